"""NaN or inf logits stop the run: in the prefill, the Nth verification or a batched verification (which row,
which request), with one GooseError line naming the forward, the dtype and the fix. No walk runs over them and no
token from that forward or after it is returned (the error carries what was committed before)."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import drafter_for
from tiny import tiny_model

import goose.engine.draft
import goose.engine.logits
from goose.drafting.contract import Drafter
from goose.engine.batched import BatchEngine
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.errors import GooseError, NonFiniteLogits
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import BONUS, generate

N = 24
SAMPLING = Sampling(0.8, 0, 0.95, 3)
BAD = [math.nan, math.inf, -math.inf]


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=0)


def prompts():
    g = torch.Generator().manual_seed(4)
    base = torch.randint(0, 250, (10,), generator=g).tolist()
    return [base * 3, (base[:4] + [9, 9]) * 3, torch.randint(0, 250, (12,), generator=g).tolist(), base * 2]


def spoil(module, at: int, value: float, row: int | None = None):
    """A forward hook on `module` (the model, or its output layer) that writes `value` into one logit of its
    `at`-th forward: the last node's (of batch row `row` when given)."""
    calls = [0]

    def hook(mod, args, kwargs, out):
        calls[0] += 1
        if calls[0] != at:
            return
        logits = getattr(out, "logits", out)
        if row is None:
            logits[..., -1, 7] = value
        elif kwargs.get("goose_packing") is not None:  # packed: one sequence, rows[i] is node i's row
            nodes = (kwargs["goose_packing"].rows == row).nonzero().flatten()
            logits[0, int(nodes[-1]), 7] = value
        else:  # every row the same width: [rows, T, V]
            logits[row, -1, 7] = value

    return module.register_forward_hook(hook, with_kwargs=True)


def committed_before(gen, forwards: int) -> list[int]:
    """The tokens a clean generation had committed after its first `forwards` forwards (prefill included): every
    forward commits its accepted nodes, then its bonus."""
    bonuses = [i for i, o in enumerate(gen.origins) if o == BONUS]
    return gen.tokens[: bonuses[forwards - 1] + 1] if forwards else []


def one_line(e) -> str:
    text = str(e.value)
    assert "\n" not in text and isinstance(e.value, GooseError)
    return text


@pytest.fixture
def walks(monkeypatch):
    """How many walks ran (greedy and sampled both walk through goose.engine.draft.walk)."""
    count = [0]
    real = goose.engine.draft.walk

    def counted(*a, **kw):
        count[0] += 1
        return real(*a, **kw)

    for module in (goose.engine.draft, goose.engine.logits):  # greedy_walk's walk, and decide's sampled one
        monkeypatch.setattr(module, "walk", counted)
    return count


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("sampling", [None, SAMPLING], ids=["greedy", "sampled"])
def test_the_prefill_stops_the_run(model, value, sampling):
    hook = spoil(model, 1, value)
    try:
        with pytest.raises(NonFiniteLogits) as e:
            generate(Engine(model), prompts()[0], Drafter(), N, sampling=sampling)
    finally:
        hook.remove()
    assert one_line(e).startswith("the prefill forward gave NaN or inf logits in float32: ")
    assert e.value.tokens == []


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("sampling", [None, SAMPLING], ids=["greedy", "sampled"])
@pytest.mark.parametrize("method", ["ar", "goose"])
def test_the_kth_verification_stops_the_run_and_nothing_after_it_is_returned(model, method, value, sampling, walks):
    template, _ = drafter_for(method)
    p = prompts()[0]
    clean = generate(Engine(model), p, template, N, sampling=sampling)
    assert clean.steps > 5
    walks[0] = 0
    hook = spoil(model, 5, value)  # the prefill, then verifications 1 .. 4: the 4th is spoiled
    try:
        with pytest.raises(NonFiniteLogits) as e:
            generate(Engine(model), p, template, N, sampling=sampling)
    finally:
        hook.remove()
    assert one_line(e).startswith("verification 4 gave NaN or inf logits in float32: ")
    assert e.value.tokens == committed_before(clean, 4)  # the prefill's and three verifications' tokens only
    assert walks[0] == 3  # no walk over the spoiled logits


@pytest.mark.parametrize("sampling", [None, SAMPLING], ids=["greedy", "sampled"])
@pytest.mark.parametrize("method", ["ar", "goose"])
@pytest.mark.parametrize("row", [0, 2])
def test_a_batched_verification_names_its_row_and_request(model, method, row, sampling, walks):
    template, _ = drafter_for(method)
    ps = prompts()
    requests = lambda: [Request(p, template.spawn(), N) for p in ps]  # noqa: E731
    clean, _ = decode_batch(BatchEngine(model, rows=3), requests(), sampling=sampling)
    assert all(g.steps > 4 for g in clean)
    walks[0] = 0
    hook = spoil(model, 3, math.nan, row)  # the model's 3rd forward: batched verification 3 (admits run apart)
    try:
        with pytest.raises(NonFiniteLogits) as e:
            decode_batch(BatchEngine(model, rows=3), requests(), sampling=sampling)
    finally:
        hook.remove()
    assert one_line(e).startswith(f"batched verification 3 (row {row}: request {row}, its verification 3) gave NaN "
                                  "or inf logits in float32: ")
    assert e.value.row == row and e.value.tokens == committed_before(clean[row], 3)
    assert walks[0] == 2 * 3 + row  # two clean steps of three rows, then the rows before the spoiled one


@pytest.mark.parametrize("sampling", [None, SAMPLING], ids=["greedy", "sampled"])
def test_a_batched_prefill_names_its_request(model, sampling):
    hook = spoil(model.get_output_embeddings(), 2, math.inf)  # admits run the output layer alone: request 1's
    try:
        with pytest.raises(NonFiniteLogits) as e:
            decode_batch(BatchEngine(model, rows=3), [Request(p, Drafter(), N) for p in prompts()], sampling=sampling)
    finally:
        hook.remove()
    assert one_line(e).startswith("the prefill forward of request 1 (row 1) gave NaN or inf logits in float32: ")
    assert e.value.tokens == []


@pytest.mark.parametrize("dtype, fix", [
    (torch.float16, "float16 overflowed (its largest value is 65504): run in bfloat16 (dtype=bfloat16), as the "
                    "paper's code does for Qwen3-8B."),
    (torch.bfloat16, "bfloat16 has float32's range, so this is no overflow"),
    (torch.float32, "float32 does not overflow here: the weights or the model's code give NaN or inf")])
def test_the_error_says_the_fix_for_the_dtype(dtype, fix):
    half = tiny_model(seed=0).to(dtype)
    hook = spoil(half, 2, math.inf)
    try:
        with pytest.raises(NonFiniteLogits) as e:
            generate(Engine(half), prompts()[0], Drafter(), N)
    finally:
        hook.remove()
    name = str(dtype).removeprefix("torch.")
    assert one_line(e).startswith(f"verification 1 gave NaN or inf logits in {name}: {fix}")
    hook = spoil(half, 3, math.nan, row=1)
    try:
        with pytest.raises(NonFiniteLogits) as e:
            decode_batch(BatchEngine(half, rows=2), [Request(p, Drafter(), N) for p in prompts()[:2]])
    finally:
        hook.remove()
    assert f"gave NaN or inf logits in {name}: {fix}" in one_line(e)


def test_finite_logits_pass_and_a_single_bad_logit_in_any_row_is_caught():
    from goose.engine.logits import finite_rows, greedy_rows

    x = torch.randn(5, 300, generator=torch.Generator().manual_seed(0))
    assert finite_rows(x).all() and greedy_rows(x, 0, finite_rows(x))[0] == x.argmax(-1).tolist()
    big = torch.full((2, 50_000), 65504.0, dtype=torch.float16)  # finite at float16's edge: its sum is not
    assert finite_rows(big).all()
    for value in BAD:
        for r in range(5):
            y = x.clone()
            y[r, 123] = value
            assert finite_rows(y).tolist() == [i != r for i in range(5)]
            with pytest.raises(NonFiniteLogits):
                greedy_rows(y, 4, finite_rows(y))
