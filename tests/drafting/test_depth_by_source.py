"""Acceptance by depth per source (`<source>_by_depth`, and `loop_free_<source>_by_depth` over the loop-free window):
claim 1 read the paper's way, at each depth. The counts add up to the per-source and per-depth totals the row
already carries; the window's are the same whether the answer ran to the cap or stopped at its first loop (the
forwards whose tokens begin inside the window are the same forwards); and a batch counts as one request alone."""

import pytest
import torch
from conftest import drafter_for

from goose.analysis.loops import parse  # the rows' format, as the analysis reads it
from goose.engine.batched import BatchEngine
from goose.engine.single import Engine
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate

TREES = ["goose", "pld", "tr", "iso3", "spine-only", "goose-no-bypass", "lookahead"]


def _prompts():
    g = torch.Generator().manual_seed(5)
    base = torch.randint(0, 250, (10,), generator=g).tolist()
    return [base * 3, torch.randint(0, 250, (17,), generator=g).tolist(), (base[:6] + [3, 3]) * 3]


@pytest.mark.parametrize("name", TREES)
def test_the_counts_add_up_to_the_totals_per_source_and_per_depth(name, tiny):
    for p in _prompts():
        s = generate(Engine(tiny), p, drafter_for(name)[0], 120).stats
        sources = [k.removesuffix("_by_depth") for k in s if k.endswith("_by_depth")
                   and not k.startswith(("loop_free_", "accept_"))]
        assert sources, name
        per_depth = {}
        for src in sources:
            counts = parse(s[f"{src}_by_depth"])
            assert sum(a for a, _ in counts.values()) == s[f"{src}_accepted"], (name, src)
            assert sum(d for _, d in counts.values()) == s[f"{src}_drafted"], (name, src)
            for depth, (a, d) in counts.items():
                assert 0 <= a <= d
                pa, pd = per_depth.get(depth, (0, 0))
                per_depth[depth] = (pa + a, pd + d)
        assert per_depth == parse(s["accept_by_depth"]), name


@pytest.mark.parametrize("name", ["goose", "pld", "tr", "spine-only", "lookahead"])
def test_the_window_is_the_same_in_a_stopped_run_and_a_full_one(name, tiny):
    """The tiny model loops within 300 tokens on these prompts (tests/running/test_loop_stop.py)."""
    for p in _prompts():
        full = generate(Engine(tiny), p, drafter_for(name)[0], 300)
        stopped = generate(Engine(tiny), p, drafter_for(name)[0], 300, stop_at_loop=True)
        assert full.loop_free == stopped.loop_free < len(full.tokens)
        window = {k: v for k, v in full.stats.items() if k.startswith("loop_free_")}
        assert window and window == {k: v for k, v in stopped.stats.items() if k.startswith("loop_free_")}, name
        if any(v for v in window.values()):
            assert any(window[k] != full.stats[k.removeprefix("loop_free_")] for k in window), name  # a part only


def test_without_a_loop_the_window_is_the_whole_answer(tiny):
    p = _prompts()[1]
    gen = generate(Engine(tiny), p, drafter_for("goose")[0], 12)
    assert gen.loop_free == len(gen.tokens)
    assert all(gen.stats[f"loop_free_{k}"] == gen.stats[k] for k in ("spine_by_depth", "branch_by_depth"))


def test_a_batch_counts_each_request_as_it_counts_alone(tiny):
    prompts = _prompts() + [_prompts()[0][3:]]
    alone = [generate(Engine(tiny), p, drafter_for("goose")[0], 200, stop_at_loop=True) for p in prompts]
    template, _ = drafter_for("goose")
    batched, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 200) for p in prompts],
                              stop_at_loop=True)
    for a, b in zip(alone, batched):
        assert {k: v for k, v in a.stats.items() if "by_depth" in k} == \
            {k: v for k, v in b.stats.items() if "by_depth" in k}
