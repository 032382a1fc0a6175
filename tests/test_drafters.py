"""GOOSE's parts (matcher, adjacency table, confidence, spine tree) and every method's losslessness."""

import math
import random

import pytest
import torch
from conftest import hf_greedy

from baselines.balanced_tree import BalancedTreeDrafter
from baselines.pld import PromptLookupDrafter
from baselines.token_recycling import TR_WIDTHS, TokenRecyclingDrafter, tree_template
from goose.adjacency import AdjacencyTable
from goose.context_match import ContextMatcher, confidence
from goose.decode import generate
from goose.engine import Engine
from goose.spine_tree import GooseDrafter, SpineTreeParams, build_spine_tree
from goose.tree import BRANCH, SPINE


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


def test_confidence_breakpoints():
    assert confidence(0, True) == 0.0
    assert confidence(3, True) == 1.0
    assert confidence(4, False) == pytest.approx(0.3)
    assert confidence(7, False) == pytest.approx(0.525)
    assert confidence(8, False) == pytest.approx(0.7)
    assert confidence(14, False) == pytest.approx(0.8)
    assert confidence(20, False) == pytest.approx(0.9)
    assert confidence(40, False) == pytest.approx(0.9)


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
    p = SpineTreeParams(budget=budget)
    nodes = build_spine_tree(1, 0, spine[: budget - 1], budget, table, p)
    check_tree(nodes, budget)
    assert len(nodes) == budget  # a rich table always fills the budget exactly
    assert nodes.source.count(SPINE) == min(spine_len, budget - 1)


def test_spine_branch_split_follows_one_over_i():
    table = rich_table()
    spine = list(range(20, 26))  # L = 6
    budget = 1 + 6 + 40  # branch budget 40: spine share 20, root share 20
    nodes = build_spine_tree(1, 0, spine, budget, table, SpineTreeParams(budget=budget, max_depth=1))
    direct = [sum(1 for j in range(len(nodes)) if nodes.parents[j] == i and nodes.source[j] == BRANCH)
              for i in range(7)]
    H = sum(1 / i for i in range(1, 7))
    want = [max(1, math.floor(20 * (1 / i) / H)) for i in range(1, 7)]
    assert direct[1:] == want
    succ, scores = table.lookup(0, 1)
    root_ok = [t for t, sc in zip(succ, scores) if sc >= 0.01 and t != spine[0]]
    assert direct[0] == min(20, len(root_ok))  # root share, above the min score, skipping the spine token


def test_tr_template_counts():
    from collections import Counter

    paths = tree_template()
    assert len(paths) == 80
    assert [Counter(len(p) for p in paths)[d] for d in range(1, 7)] == list(TR_WIDTHS)
    seen = {()}
    for p in paths:
        assert p[:-1] in seen  # parents come first
        seen.add(p)


# --- every method and ablation is lossless on the tiny model ----------------------------
ABLATIONS = [dict(), dict(rho=0.0), dict(bigram=False), dict(use_confidence=False), dict(prefill_harvest=False),
             dict(context_spine=False), dict(spine_continuation=False)]


def drafters():
    yield from (GooseDrafter(budget=b, **a) for a in ABLATIONS for b in (60,))
    yield GooseDrafter(budget=8)
    yield PromptLookupDrafter()
    yield TokenRecyclingDrafter()
    yield TokenRecyclingDrafter(cold_start=True)
    yield BalancedTreeDrafter(3)
    yield BalancedTreeDrafter(5, budget=16)


@pytest.mark.parametrize("drafter", list(drafters()), ids=lambda d: type(d).__name__)
def test_every_method_is_lossless_on_tiny_model(tiny, prompts, drafter):
    engine = Engine(tiny)
    accepted = 0
    for prompt in prompts:
        ref = hf_greedy(tiny, prompt, 48)
        gen = generate(engine, prompt, drafter, 48)
        assert gen.tokens == ref
        accepted += len(gen.tokens) - gen.steps
    assert accepted > 0, "the tiny model's repetitive outputs should let every drafter land something"
