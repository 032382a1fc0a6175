"""Lossless, or why not (goose.storage.equality): a real bug is `diverged`, never `numerics`; a near-tie swapped by a
different summation order is `numerics`, with both margins and gaps reported."""

import pytest
import torch
from conftest import drafter_for

from goose.drafting.contract import Drafter
from goose.engine.single import Engine
from goose.running.loop import generate
from goose.storage.equality import DIVERGED, EXACT, NUMERICS, classify, tolerance


def old(tokens, margins, runners_up):
    """A record as versions before the gaps stored it: one runner-up per token, at the margin."""
    return {"tokens": tokens, "margins": margins, "runners_up": runners_up}


def ranks(tokens, runners_up, gaps):
    return {"tokens": tokens, "margins": [g[0] for g in gaps], "runners_up": runners_up, "gaps": gaps}


def test_classify_by_hand():
    # 4 units in the last place at a logit of 32, by hand: between 32 and 64 float32 steps by 2**-18 (3.8e-6),
    # float16 by 2**-5 (0.03125), bfloat16 by 2**-2 (0.25); a dtype is taken by name or as a torch dtype
    assert tolerance("float32") == 1.52587890625e-05 == tolerance(torch.float32)
    assert tolerance("float16") == 0.125 and tolerance("torch.float16") == 0.125
    assert tolerance("bfloat16") == 1.0 == tolerance(torch.bfloat16)
    tol = tolerance("float32")
    ref = old([1, 2, 4], [5.0, 3.0, tol / 4], [9, 9, 3])  # AR chose 4 over 3 by a quarter of the tolerance
    exact = classify(old([1, 2, 4], [5.0, 3.0, 1.0], [9, 9, 3]), ref, "float32")
    assert exact.kind == EXACT and exact.columns()["equality_tolerance"] == tol  # an exact row records it too
    v = classify(old([1, 2, 3, 7], [5.0, 3.0, tol / 2, 2.0], [9, 9, 4, 1]), ref, "float32")
    assert (v.kind, v.index, v.margin, v.ar_margin, v.gap, v.ar_gap) == (NUMERICS, 2, tol / 2, tol / 4, tol / 2,
                                                                         tol / 4)
    assert classify(old([1, 2, 3], [5.0, 3.0, tol * 2], [9, 9, 4]), ref, "float32").kind == DIVERGED  # too clear
    assert classify(old([1, 2, 5], [5.0, 3.0, tol / 2], [9, 9, 4]), ref, "float32").kind == DIVERGED  # not the pair
    assert classify(old([1, 2], [5.0, 3.0], [9, 9]), ref, "float32").kind == DIVERGED  # stopped early
    no_ranks = {"tokens": [1, 2, 4]}  # a reference of a version that recorded no margins
    assert classify(old([1, 2, 3], [5.0, 3.0, tol / 2], [9, 9, 4]), no_ranks, "float32").kind == DIVERGED


def test_a_tie_of_three_is_numerics_wherever_each_run_ranks_the_others_token():
    """Half precision ties tokens 3, 4 and 6 (gaps 0) and chose 3; float32 chose 4 and ranked 3 third, 0.15 below
    (its runner-up 7). Each run scored the other's token within the tolerance: numerics, with the gaps, not the
    top-2 margins, deciding. The same ranks with a clear gap, or the other's token not among a run's best, are
    diverged."""
    tol = tolerance("bfloat16")
    ar = ranks([1, 4], [[9, 2, 5], [7, 3, 8]], [[5.0, 6.0, 7.0], [0.01, 0.15, 0.5]])
    half = ranks([1, 3], [[9, 2, 5], [6, 4, 8]], [[5.0, 6.0, 7.0], [0.0, 0.0, 0.25]])
    v = classify(half, ar, "bfloat16")
    assert (v.kind, v.index, v.gap, v.ar_gap, v.margin, v.ar_margin) == (NUMERICS, 1, 0.0, 0.15, 0.0, 0.01)
    clear = ranks([1, 4], [[9, 2, 5], [7, 3, 8]], [[5.0, 6.0, 7.0], [0.01, tol * 2, tol * 3]])
    assert classify(half, clear, "bfloat16").kind == DIVERGED
    fourth = ranks([1, 3], [[9, 2, 5], [6, 5, 8]], [[5.0, 6.0, 7.0], [0.0, 0.0, 0.25]])  # 4 not among its best
    v = classify(fourth, ar, "bfloat16")
    assert v.kind == DIVERGED and v.gap is None and v.ar_gap == 0.15


def test_the_margins_are_the_logits_a_plain_forward_gives(tiny, prompts):
    """A generation's margin, runners-up and gaps per token are those of a full forward over prompt + answer."""
    g = generate(Engine(tiny), prompts[0], drafter_for("goose@16")[0], 20)
    with torch.no_grad():
        logits = tiny(torch.tensor([prompts[0] + g.tokens])).logits[0, len(prompts[0]) - 1:-1]
    top = logits.topk(4)
    assert g.runners_up == top.indices[:, 1:].tolist() and top.indices[:, 0].tolist() == g.tokens
    assert g.margins == pytest.approx((top.values[:, 0] - top.values[:, 1]).tolist(), abs=1e-4)
    gaps = top.values[:, :1] - top.values[:, 1:]
    assert [x for row in g.gaps for x in row] == pytest.approx(gaps.flatten().tolist(), abs=1e-4)


def test_a_real_bug_is_diverged_never_numerics(tiny, prompts, monkeypatch):
    """A walk that accepts one more child than the target agreed to: the output leaves AR's, and the verdict is
    diverged (the token taken was not AR's runner-up)."""
    import goose.engine.logits as engine_module

    ar = generate(Engine(tiny), prompts[0], Drafter(), 30)
    real_walk = engine_module.greedy_walk

    def careless(parents, tokens, pred):
        path = real_walk(parents, tokens, pred)
        children = [i for i in range(1, len(parents)) if parents[i] == path[-1]]
        return path + children[:1]  # one more node, unchecked

    monkeypatch.setattr(engine_module, "greedy_walk", careless)
    bad = generate(Engine(tiny), prompts[0], drafter_for("goose@16")[0], 30)
    v = classify(bad, ar, "float32")
    assert bad.tokens != ar.tokens and v.kind == DIVERGED


def test_a_near_tie_swapped_by_a_last_bit_difference_is_numerics(tiny, prompts, monkeypatch):
    """Two tokens whose output rows differ in the 7th digit nearly tie wherever one is chosen; a verification
    that sums in another order (here: its logits moved by 1e-6) can pick the other: numerics, and the margins
    say how near the tie was."""
    import copy

    import goose.engine.single as engine_module

    model = copy.deepcopy(tiny)
    first = generate(Engine(model), prompts[1], Drafter(), 12).tokens
    a, b = first[5], (first[5] + 1) % 250
    with torch.no_grad():
        model.lm_head.weight[b] = model.lm_head.weight[a] * (1 - 1e-7)
    ar = generate(Engine(model), prompts[1], Drafter(), 12)
    assert ar.tokens[5] == a and ar.runners_up[5][0] == b and ar.margins[5] < tolerance("float32")
    real = engine_module.decide

    def other_order(draft, logits, emitted, topk=0, sampler=None):  # a forward that sums in another order
        moved = logits.clone()
        moved[:, b] += 1e-6 * moved[:, a].abs()
        return real(draft, moved, emitted, topk, sampler)

    monkeypatch.setattr(engine_module, "decide", other_order)
    tree = generate(Engine(model), prompts[1], drafter_for("goose@16")[0], 12)
    v = classify(tree, ar, "float32")
    assert tree.tokens[5] == b and v.kind == NUMERICS and v.index == 5
    assert v.margin < v.tol and v.ar_margin < v.tol and v.gap < v.tol and v.ar_gap < v.tol
