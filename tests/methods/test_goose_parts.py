"""GOOSE's parts (matcher, adjacency table, confidence, spine tree) and its and its ablations' losslessness (each peer
method has its own file in tests/baselines/)."""

import math
import random

import pytest
import torch
from conftest import ABLATIONS, hf_greedy

from goose.drafting.adjacency import AdjacencyTable
from goose.drafting.context_match import ContextMatcher, confidence
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.methods.goose import BRANCH, SPINE, GooseConfig, GooseDrafter, SpineOnlyDrafter, build_spine_tree
from goose.running.loop import generate


# --- context matcher --------------------------------------------------------------------
def brute_match(pool, sizes, cap):
    for n in sizes:
        if len(pool) < n:
            continue
        tail = pool[-n:]
        for s in range(len(pool) - n):  # s + n < len(pool): followed by a token
            if pool[s:s + n] == tail:
                return pool[s + n:s + n + cap], n
    return [], 0


def test_matcher_earliest_occurrence_and_cap():
    m = ContextMatcher((3,), max_chain=4)
    m.reset([1, 2, 3, 10, 11, 12, 13, 14, 1, 2, 3, 20, 1, 2, 3])
    got = m.match()
    assert got.chain == [10, 11, 12, 13] and got.n == 3 and not got.consensus


def test_matcher_no_self_match():
    m = ContextMatcher((3,), max_chain=5)
    m.reset([5, 6, 7, 8, 5, 6, 7])
    assert m.match().chain == [8, 5, 6, 7]  # the trailing 5 6 7 itself never matches
    m.reset([1, 2, 3])
    assert m.match().chain == []


def test_matcher_longest_n_first_and_consensus():
    m = ContextMatcher((5, 4, 3), max_chain=20)
    m.reset([9, 1, 2, 3, 4, 7, 8, 1, 2, 3, 4, 7, 0, 5, 2, 3, 4])
    got = m.match()
    assert got.n == 3 and got.chain[0] == 7 and got.consensus  # two earlier "2 3 4", both then 7
    m.reset([0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5])
    assert m.match().n == 5


def test_incremental_index_equals_brute_force():
    rng = random.Random(0)
    for _ in range(30):
        m = ContextMatcher((5, 4, 3), max_chain=20)
        pool = [rng.randrange(4) for _ in range(rng.randrange(3, 12))]
        m.reset(pool)
        for _ in range(40):
            pool = pool + [rng.randrange(4) for _ in range(rng.randrange(1, 4))]
            m.sync(pool)
            got = m.match()
            assert (got.chain, got.n) == brute_match(pool, (5, 4, 3), 20)


def test_confidence_is_a_monotone_trust_in_zero_one():
    lengths = range(0, 60)
    for long_match in (4, 8, 16):
        plain = [confidence(n, False, long_match) for n in lengths]
        agreed = [confidence(n, True, long_match) for n in lengths]
        assert plain[0] == agreed[0] == 0.0  # no chain, no trust
        assert all(0.0 <= c <= 1.0 for c in plain + agreed)
        assert plain == sorted(plain) and agreed == sorted(agreed)  # a longer match never lowers it
        assert all(a >= c for a, c in zip(agreed, plain))  # consensus never lowers it
        assert all(c < 1.0 for c in plain)  # only consensus bypasses the tree (c = 1)


# --- adjacency table --------------------------------------------------------------------
def test_adjacency_softmax_over_topk_overwrite_and_bigram_precedence():
    t = AdjacencyTable(k=2)
    ids = torch.tensor([[5, 6, 7], [8, 9, 1]])
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, -1.0]])
    t.harvest([1, 2], [None, 1], ids, logits)
    succ, scores = t.lookup(None, 1)
    assert succ == [5, 6]
    assert scores == pytest.approx([math.exp(1) / (math.exp(1) + 1), 1 / (math.exp(1) + 1)])
    assert t.lookup(1, 2)[0] == [8, 9]  # bigram (1, 2)
    t.harvest([2], [4], torch.tensor([[3, 4]]), torch.tensor([[1.0, 1.0]]))  # overwrite unigram of 2
    assert t.lookup(None, 2)[0] == [3, 4]
    assert t.lookup(1, 2)[0] == [8, 9]  # bigram wins when present
    assert t.lookup(7, 2)[0] == [3, 4]  # unknown bigram: unigram
    assert t.lookup(None, 99) is None
    uni = AdjacencyTable(k=2, bigram=False)
    uni.harvest([1, 2], [None, 1], ids, logits)
    assert uni.bigram == {}


# --- spine tree -------------------------------------------------------------------------
def rich_table(vocab=50, k=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = AdjacencyTable(k=k)
    toks = list(range(vocab))
    logits = torch.randn(vocab, vocab, generator=g) * 3
    top = logits.topk(k, dim=-1)
    t.harvest(toks, [None] * vocab, top.indices, top.values)
    return t


def check_tree(nodes, budget, max_depth_branch=6):
    assert len(nodes) <= budget
    kids = {}
    for i in range(1, len(nodes)):
        kids.setdefault(nodes.parents[i], []).append(nodes.tokens[i])
        assert nodes.parents[i] < i
        if nodes.source[i] == BRANCH and nodes.source[nodes.parents[i]] == BRANCH:
            assert nodes.depth[i] <= max_depth_branch
    for toks in kids.values():
        assert len(toks) == len(set(toks)), "siblings must be distinct"


@pytest.mark.parametrize("budget", [2, 10, 30, 60, 100])
@pytest.mark.parametrize("spine_len", [0, 1, 5, 12])
def test_spine_tree_budget_exact_distinct_depth_capped(budget, spine_len):
    table = rich_table()
    spine = list(range(20, 20 + spine_len))
    p = GooseConfig(budget=budget)
    nodes = build_spine_tree(1, 0, spine[: budget - 1], budget, table, p)
    check_tree(nodes, budget)
    assert len(nodes) == budget  # a rich table always fills the budget exactly
    assert nodes.source.count(SPINE) == min(spine_len, budget - 1)


def anchor(nodes, i):
    """The root or spine node branch node i descends from."""
    while nodes.source[nodes.parents[i]] == BRANCH:
        i = nodes.parents[i]
    return nodes.parents[i]


@pytest.mark.parametrize("spine_len", [1, 3, 6, 12])
def test_rho_moves_branches_from_the_root_to_the_spine(spine_len):
    """With a rich table every node of the budget is used whatever rho is; rho = 0 hangs no branch
    off the spine, and a larger rho never hangs fewer there."""
    table = rich_table()
    spine = list(range(20, 20 + spine_len))
    budget = 1 + spine_len + 40
    off_spine = []
    for rho in (0.0, 0.25, 0.5, 0.75, 1.0):
        nodes = build_spine_tree(1, 0, spine, budget, table, GooseConfig(budget=budget, rho=rho))
        check_tree(nodes, budget)
        assert len(nodes) == budget

        off_spine.append(sum(1 for i in range(len(nodes)) if nodes.source[i] == BRANCH and anchor(nodes, i) > 0))
    assert off_spine[0] == 0 and off_spine[-1] > 0
    assert off_spine == sorted(off_spine)


def test_spine_tree_ignores_the_order_rows_were_harvested_in():
    """Rows of distinct tokens are independent: the harvest order cannot change a draft."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(50, 50, generator=g) * 3
    top = logits.topk(10, dim=-1)
    tables = []
    for order in (list(range(50)), list(reversed(range(50)))):
        t = AdjacencyTable(k=10)
        t.harvest(order, [None] * 50, top.indices[order], top.values[order])
        tables.append(t)
    a, b = (build_spine_tree(1, None, [20, 21, 22], 40, t, GooseConfig(budget=40)) for t in tables)
    assert (a.tokens, a.parents) == (b.tokens, b.parents)


# --- the single sources at equal budget (synergy) ---------------------------------------
def test_spine_only_is_a_chain_filling_the_budget_goose_would_have():
    """Spine-only: a pure chain of spine nodes, extended by matching again until it fills
    B + floor(c * extension) - 1 tokens; no adjacency table is kept or asked for."""
    period = [5, 6, 7, 8, 9, 10, 11]
    context = period * 20
    d = SpineOnlyDrafter(budget=30)
    assert d.harvester is None and d.capabilities.topk == 0 and not d.capabilities.harvest_prefill
    d.start(context, None)
    draft = d.propose(context)
    nodes = d.proposed
    assert len(nodes) == 70  # the period repeats (consensus, c = 1): B + floor(c * extension) = 30 + 40
    assert set(nodes.source[1:]) == {SPINE}
    assert draft.parents == [-1, *range(len(nodes) - 1)]  # one chain
    assert nodes.tokens[1:] == (period * 20)[: len(nodes) - 1]  # what follows the root (token 11) is 5, 6, ...


def test_spine_only_drafts_nothing_without_a_match_and_branches_only_has_no_spine(tiny, prompts):
    d = SpineOnlyDrafter()
    d.start([1, 2, 3, 4], None)
    d.propose([1, 2, 3, 4])
    assert len(d.proposed) == 1 and d.route == "ar"
    engine = Engine(tiny)
    for d, absent in ((SpineOnlyDrafter(), BRANCH), (GooseDrafter(context_spine=False), SPINE)):
        d.enable_trace()
        generate(engine, prompts[0], d, 48)
        steps = d.take_trace()
        assert steps and all(s[absent.name] == 0 for s in steps)
    with pytest.raises(GooseError, match="nothing else to draft"):
        SpineOnlyDrafter(context_spine=False)


# --- GOOSE and its ablations are lossless on the tiny model (each peer: tests/baselines/test_<peer>.py) -------
def drafters():
    yield from (GooseDrafter(budget=b, **a) for a in ABLATIONS for b in (60,))
    yield GooseDrafter(budget=8)
    yield SpineOnlyDrafter()


# GOOSE as shipped in the unit tier, its ablations in the integration tier
@pytest.mark.parametrize("drafter", [pytest.param(d, marks=() if i == 0 else pytest.mark.integration)
                                     for i, d in enumerate(drafters())], ids=lambda d: type(d).__name__)
def test_goose_and_its_ablations_are_lossless_on_tiny_model(tiny, prompts, drafter):
    engine = Engine(tiny)
    accepted = 0
    for prompt in prompts:
        ref = hf_greedy(tiny, prompt, 48)
        gen = generate(engine, prompt, drafter, 48)
        assert gen.tokens == ref
        accepted += len(gen.tokens) - gen.steps
    assert accepted > 0, "the tiny model's repetitive outputs should let every GOOSE variant land something"


def test_spine_acceptance_ema_follows_the_spine_rates(tiny, prompts):
    """The EMA that picks the spine tier moves after spine steps and stays within the range of
    its start and the per-step spine acceptance rates (a running average of them)."""
    engine = Engine(tiny)
    moved = False
    for prompt in prompts:
        d = GooseDrafter()
        d.enable_trace()
        generate(engine, prompt, d, 48)
        rates = [s["spine_accepted"] / s["spine"] for s in d.take_trace()
                 if s["route"] in ("spine_tree", "bypass") and s["spine"]]
        if rates:
            start = d.config.ema_init
            assert min(start, *rates) - 1e-12 <= d.ema <= max(start, *rates) + 1e-12
            moved |= d.ema != start
    assert moved, "no prompt moved the EMA: the tier never adapts"
