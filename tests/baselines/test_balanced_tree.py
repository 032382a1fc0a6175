"""Balanced (isotropic) trees (goose.baselines.balanced_tree): the k-ary tree it grows breadth-first from a
hand-made adjacency table, capped by branching, depth, score and budget, the budget extended by the context
match's confidence as GOOSE's is, and lossless on the tiny model alone, in a batch of 1 and 4 and under sampling."""

import pytest
from conftest import lossless_everywhere

from goose.baselines.balanced_tree import BalancedTreeConfig, BalancedTreeDrafter
from goose.engine.draft import Verification
from goose.errors import GooseError
from goose.methods.goose import GooseConfig

TABLE = {7: [1, 2, 3], 1: [4, 5, 6], 2: [8, 9], 4: [10], 8: [11]}  # token -> successors, best first


def drafted(context, rows=TABLE, scores=None, **config):
    d = BalancedTreeDrafter(bigram=False, extension=0, **config)
    d.start(context, Verification(path=[0], bonus=context[-1]))
    for token, successors in rows.items():
        d.harvester.table.unigram[token] = (successors, scores or [0.5 / (1 + r) for r in range(len(successors))])
    draft = d.propose(context)
    return draft.tokens, draft.parents


def test_breadth_first_k_ary_up_to_the_budget():
    assert drafted([0, 7], branching=2, budget=7) == ([7, 1, 2, 4, 5, 8, 9], [-1, 0, 0, 1, 1, 2, 2])
    assert drafted([0, 7], branching=2, budget=5) == ([7, 1, 2, 4, 5], [-1, 0, 0, 1, 1])  # the budget, root incl.
    assert drafted([0, 7], branching=3, budget=60) == ([7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11],
                                                       [-1, 0, 0, 0, 1, 1, 1, 2, 2, 4, 7])
    assert drafted([0, 7], branching=3, budget=60, max_depth=1) == ([7, 1, 2, 3], [-1, 0, 0, 0])
    assert drafted([0, 7], {}, budget=60) == ([7], [-1])  # nothing harvested: the root alone


def test_guesses_below_min_score_are_not_drafted():
    assert drafted([0, 7], {7: [1, 2, 3]}, scores=[0.6, 0.3, 0.005], budget=60)[0] == [7, 1, 2]
    assert drafted([0, 7], {7: [1, 2, 3]}, scores=[0.6, 0.3, 0.005], budget=60, min_score=0.4)[0] == [7, 1]


def test_a_confident_context_match_extends_the_budget_as_it_does_for_goose():
    rows = {t: [(3 * t + r) % 500 + 500 for r in range(3)] for t in range(1000)}  # never runs short of guesses
    period = [5, 6, 7, 8, 9, 10, 11]
    for context, size in ((period * 6, 20 + 40), (list(range(1, 30)), 20)):  # the period repeats: confidence 1
        d = BalancedTreeDrafter(bigram=False, budget=20)  # extension 40, GOOSE's
        d.start(context, Verification(path=[0], bonus=context[-1]))
        for token, successors in rows.items():
            d.harvester.table.unigram[token] = (successors, [0.5, 0.3, 0.2])
        assert len(d.propose(context).tokens) == size, context
    same = ("extension", "k", "min_score", "ngram_sizes", "max_chain", "long_match", "max_depth")
    assert all(getattr(BalancedTreeConfig(), f) == getattr(GooseConfig(), f) for f in same)


def test_bad_settings_are_refused():
    for bad in (dict(branching=0), dict(budget=0), dict(max_depth=0)):
        with pytest.raises(GooseError, match="balanced tree: branching"):
            BalancedTreeDrafter(**bad)
    with pytest.raises(GooseError, match="min_score in"):
        BalancedTreeDrafter(min_score=2)


@pytest.mark.integration
@pytest.mark.parametrize("config", [dict(branching=3), dict(branching=5, budget=16)], ids=["b3", "b5-B16"])
def test_lossless_alone_in_batches_of_1_and_4_and_sampled(config, tiny, prompts):
    landed = lossless_everywhere(tiny, prompts, lambda: BalancedTreeDrafter(**config))
    assert landed > 0, "the tiny model's repetitive outputs should let a balanced tree land something"
