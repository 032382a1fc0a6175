"""budget=auto: cost curve, acceptance model, pruning to what pays; still lossless."""

import pytest
from conftest import hf_greedy

from baselines.balanced_tree import BalancedTreeDrafter
from baselines.token_recycling import TokenRecyclingDrafter
from goose.budget import AutoBudget, CostCurve
from goose.decode import generate
from goose.engine import Engine
from goose.spine_tree import GooseDrafter
from goose.tree import BRANCH, SPINE, TreeNodes


def test_cost_curve_interpolates_and_extrapolates():
    c = CostCurve([1, 8, 64], [1.0, 1.6, 3.2])
    assert c(1) == 1.0 and c(8) == 1.6 and c(36) == pytest.approx(2.4)
    assert c(128) == pytest.approx(6.4)


def sample_tree():
    n = TreeNodes(0)
    s1 = n.add(0, 1, SPINE)
    n.add(s1, 2, SPINE)
    for t, sc in [(5, 0.6), (6, 0.3), (7, 0.05)]:
        b = n.add(0, t, BRANCH, sc)
    n.add(b, 8, BRANCH, 0.9)
    return n


def test_nothing_accepted_shrinks_to_ar():
    auto = AutoBudget(CostCurve([1, 8, 64], [1.0, 1.6, 3.2]))
    tree = sample_tree()
    for _ in range(200):
        auto.observe(tree, [0])  # every child reached, none accepted
    assert len(auto.prune(tree)) == 1


def test_flat_cost_keeps_everything_and_pruned_sets_are_ancestor_closed():
    flat = AutoBudget(CostCurve([1, 128], [1.0, 1.0]))
    tree = sample_tree()
    assert len(flat.prune(tree)) == len(tree)
    steep = AutoBudget(CostCurve([1, 2, 8], [1.0, 1.3, 8.0]))
    # Prior values: branch 0.6 -> 0.65, spine 0.5, branch 0.3 -> 0.35. With cost(2) = 1.3 and cost(3) = 2.4,
    # (1 + 0.65) / 1.3 beats both AR (1 / 1) and three nodes ((1 + 1.15) / 2.4): keep the root and token 5.
    kept = steep.prune(tree)
    assert kept.tokens == [0, 5] and kept.parents == [-1, 0]
    medium = AutoBudget(CostCurve([1, 4, 8], [1.0, 1.1, 8.0])).prune(tree)
    assert medium.tokens == [0, 1, 5, 6]  # spine node, then branches, all children of the root
    assert all(p < i for i, p in enumerate(medium.parents) if i)


@pytest.mark.parametrize("make", [lambda: GooseDrafter(budget="auto"), lambda: BalancedTreeDrafter(3, budget="auto"),
                                  lambda: TokenRecyclingDrafter()])
def test_auto_budget_is_lossless(tiny, prompts, make):
    d = make()
    d.enable_auto_budget(AutoBudget(CostCurve([1, 8, 32, 64], [1.0, 1.3, 2.0, 3.0])))
    engine = Engine(tiny)
    for prompt in prompts:
        assert generate(engine, prompt, d, 40).tokens == hf_greedy(tiny, prompt, 40)
    assert 1 <= d.stats()["auto_budget_mean"] <= 101


def test_engine_measures_a_rising_cost_curve(tiny):
    secs = Engine(tiny).measure_cost([1, 64], context_len=32, repeats=2)
    assert len(secs) == 2 and all(s > 0 for s in secs)
