"""Lossless, or why not (goose.equality): a real bug is `diverged`, never `numerics`; a near-tie swapped by a
different summation order is `numerics`, with both margins reported."""

import pytest
import torch

from goose.decode import generate
from goose.drafter import Drafter
from goose.engine import Engine
from goose.equality import DIVERGED, EXACT, NUMERICS, classify, tolerance
from goose.methods import method_drafter


def test_classify_by_hand():
    tol = tolerance("float32")
    assert tol == pytest.approx(16 * 2 ** -23 * 32)
    ref = ([1, 2, 4], [5.0, 3.0, tol / 4], [9, 9, 3])  # AR chose 4 over 3 by a quarter of the tolerance
    assert classify([1, 2, 4], [5.0, 3.0, 1.0], [9, 9, 3], *ref, "float32").kind == EXACT
    v = classify([1, 2, 3, 7], [5.0, 3.0, tol / 2, 2.0], [9, 9, 4, 1], *ref, "float32")
    assert (v.kind, v.index, v.margin, v.ar_margin) == (NUMERICS, 2, tol / 2, tol / 4)
    assert classify([1, 2, 3], [5.0, 3.0, tol * 2], [9, 9, 4], *ref, "float32").kind == DIVERGED  # too clear
    assert classify([1, 2, 5], [5.0, 3.0, tol / 2], [9, 9, 4], *ref, "float32").kind == DIVERGED  # not the pair
    assert classify([1, 2], [5.0, 3.0], [9, 9], *ref, "float32").kind == DIVERGED  # stopped early
    assert classify([1, 2, 3], [5.0, 3.0, tol / 2], [9, 9, 4], [1, 2, 4], None, None, "float32").kind == DIVERGED
    assert tolerance("bfloat16") > tolerance("float16") > tolerance("float32")


def test_an_exact_tie_of_three_is_numerics_whichever_tied_token_was_recorded_as_runner_up():
    """Half precision: tokens 3, 4 and 6 tie exactly (margin 0) and this run records 6 as the runner-up of its 3;
    AR (in float32) chose 4, with 3 second by a hair. Still a near-tie swap; without a tie it is not."""
    tol = tolerance("bfloat16")
    ref = ([1, 4], [5.0, 0.01], [9, 3])
    assert classify([1, 3], [5.0, 0.0], [9, 6], *ref, "bfloat16").kind == NUMERICS
    assert classify([1, 3], [5.0, tol / 2], [9, 6], *ref, "bfloat16").kind == DIVERGED  # no tie: 6 is not AR's 4
    assert classify([1, 3], [5.0, 0.0], [9, 6], [1, 4], [5.0, 0.01], [9, 7], "bfloat16").kind == DIVERGED  # neither


def test_the_margins_are_the_logits_a_plain_forward_gives(tiny, prompts):
    """A generation's margin and runner-up per token are those of a full forward over prompt + answer."""
    g = generate(Engine(tiny), prompts[0], method_drafter("goose@16")[0], 20)
    with torch.no_grad():
        logits = tiny(torch.tensor([prompts[0] + g.tokens])).logits[0, len(prompts[0]) - 1:-1]
    top = logits.topk(2)
    assert g.runners_up == top.indices[:, 1].tolist() and top.indices[:, 0].tolist() == g.tokens
    assert g.margins == pytest.approx((top.values[:, 0] - top.values[:, 1]).tolist(), abs=1e-4)


def test_a_real_bug_is_diverged_never_numerics(tiny, prompts, monkeypatch):
    """A walk that accepts one more child than the target agreed to: the output leaves AR's, and the verdict is
    diverged (the token taken was not AR's runner-up)."""
    import goose.engine as engine_module

    ar = generate(Engine(tiny), prompts[0], Drafter(), 30)
    real_walk = engine_module.greedy_walk

    def careless(parents, tokens, pred):
        path = real_walk(parents, tokens, pred)
        children = [i for i in range(1, len(parents)) if parents[i] == path[-1]]
        return path + children[:1]  # one more node, unchecked

    monkeypatch.setattr(engine_module, "greedy_walk", careless)
    bad = generate(Engine(tiny), prompts[0], method_drafter("goose@16")[0], 30)
    v = classify(bad.tokens, bad.margins, bad.runners_up, ar.tokens, ar.margins, ar.runners_up, "float32")
    assert bad.tokens != ar.tokens and v.kind == DIVERGED


def test_a_near_tie_swapped_by_a_last_bit_difference_is_numerics(tiny, prompts, monkeypatch):
    """Two tokens whose output rows differ in the 7th digit nearly tie wherever one is chosen; a verification
    that sums in another order (here: its logits moved by 1e-6) can pick the other: numerics, and the margins
    say how near the tie was."""
    import copy

    import goose.engine as engine_module

    model = copy.deepcopy(tiny)
    first = generate(Engine(model), prompts[1], Drafter(), 12).tokens
    a, b = first[5], (first[5] + 1) % 250
    with torch.no_grad():
        model.lm_head.weight[b] = model.lm_head.weight[a] * (1 - 1e-7)
    ar = generate(Engine(model), prompts[1], Drafter(), 12)
    assert ar.tokens[5] == a and ar.runners_up[5] == b and ar.margins[5] < tolerance("float32")
    real = engine_module.decide

    def other_order(draft, logits, emitted, topk=0, sampler=None):  # a forward that sums in another order
        moved = logits.clone()
        moved[:, b] += 1e-6 * moved[:, a].abs()
        return real(draft, moved, emitted, topk, sampler)

    monkeypatch.setattr(engine_module, "decide", other_order)
    tree = generate(Engine(model), prompts[1], method_drafter("goose@16")[0], 12)
    v = classify(tree.tokens, tree.margins, tree.runners_up, ar.tokens, ar.margins, ar.runners_up, "float32")
    assert tree.tokens[5] == b and v.kind == NUMERICS and v.index == 5
    assert v.margin < v.tol and v.ar_margin < v.tol
