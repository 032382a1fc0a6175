"""Token Recycling (goose.baselines.token_recycling): its static template (the likeliest paths per depth), the
draft it fills from a hand-made adjacency matrix, the matrix kept across prompts under memory=run (the paper's
hot start) and cleared under memory=prompt, and lossless on the tiny model alone, in a batch of 1 and 4 and under
sampling."""

import pytest
import torch
from conftest import lossless_everywhere

from goose.baselines.token_recycling import TR_WIDTHS, TokenRecyclingDrafter, TRConfig, tree_template
from goose.engine.draft import Verification
from goose.errors import GooseError


@pytest.mark.parametrize("widths", [TR_WIDTHS, (1,), (3, 5), (8, 8, 8, 8), (2, 7, 1, 4)])
def test_the_template_takes_the_likeliest_paths_per_depth(widths):
    k, decay = 8, 0.55
    paths = tree_template(widths, k, decay)
    by_depth = [[p for p in paths if len(p) == d] for d in range(1, len(widths) + 1)]
    expect, prev = [], 1
    for w in widths:
        prev = min(w, prev * k)  # a depth keeps its width unless its parents have fewer children in all
        expect.append(prev)
    assert [len(level) for level in by_depth] == expect
    seen = {()}
    for p in paths:
        assert p[:-1] in seen and all(0 <= r < k for r in p)  # parents first, ranks within top-k
        seen.add(p)
    if widths == (3, 5):  # by hand: depth 1 the three top guesses; depth 2 of their 24 children, weighted
        # 0.55^(rank sum): (0,0) 1; (0,1) (1,0) 0.55; then (0,2) (1,1) (2,0) 0.3025, ties by path order
        assert by_depth == [[(0,), (1,), (2,)], [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]]


def started(drafter, context, rows: dict):
    """The drafter after a prompt whose prefill left no top-k, its matrix then set by hand: token -> successors."""
    drafter.start(context, Verification(path=[0], bonus=context[-1]))
    for token, successors in rows.items():
        drafter.harvester.table.unigram[token] = (successors, [1.0 / (1 + r) for r in range(len(successors))])
    return drafter


def test_a_small_template_filled_from_a_hand_made_matrix():
    """widths (2, 1), k = 2: the root's top two guesses, then the top guess of the top guess."""
    d = started(TokenRecyclingDrafter(k=2, widths=(2, 1)), [9, 7], {7: [3, 4], 3: [5, 6], 4: [8, 1]})
    draft = d.propose([9, 7])
    assert (draft.tokens, draft.parents) == ([7, 3, 4, 5], [-1, 0, 0, 1])
    d = started(TokenRecyclingDrafter(k=2, widths=(2, 1)), [9, 7], {7: [3, 4]})  # 3 never seen: no depth 2
    assert d.propose([9, 7]).tokens == [7, 3, 4]
    d = started(TokenRecyclingDrafter(k=2, widths=(2, 1)), [9, 7], {})  # an empty matrix: the root alone
    assert d.propose([9, 7]).tokens == [7]


def test_the_paper_template_gives_80_nodes_whatever_the_budget():
    rows = {t: [(t * 8 + r) % 1000 for r in range(8)] for t in range(1000)}  # every token has 8 distinct guesses
    draft = started(TokenRecyclingDrafter(), [5, 6], rows).propose([5, 6])
    assert len(draft.tokens) == 1 + sum(TR_WIDTHS) == 81
    depth = [0]
    for p in draft.parents[1:]:
        depth.append(depth[p] + 1)
    assert [depth.count(d) for d in range(1, len(TR_WIDTHS) + 1)] == list(TR_WIDTHS)


def test_the_matrix_is_kept_across_prompts_under_memory_run_and_cleared_under_memory_prompt():
    assert TRConfig().memory == "run"  # the paper's hot start is the default
    for memory, kept in (("run", True), ("prompt", False)):
        d = started(TokenRecyclingDrafter(k=2, widths=(2,), memory=memory), [9, 7], {7: [3, 4]})
        d.start([1, 7], Verification(path=[0], bonus=7))  # the next prompt
        assert d.propose([1, 7]).tokens == ([7, 3, 4] if kept else [7]), memory
    with pytest.raises(GooseError, match="tr: k and every template width"):
        TokenRecyclingDrafter(widths=(3, 0))


def test_a_verification_overwrites_the_rows_of_every_node_it_saw():
    """Rejected nodes included: each verified node's row becomes its top-k, best first."""
    d = started(TokenRecyclingDrafter(k=2, widths=(2,)), [9, 7], {7: [3, 4]})
    d.propose([9, 7])
    ids = torch.tensor([[40, 41], [42, 43], [44, 45]])
    d.accepted(Verification(path=[0, 1], bonus=42, topk_ids=ids, topk_scores=torch.tensor([[2.0, 1.0]] * 3),
                            width=3), [9, 7, 3, 42])
    table = d.harvester.table.unigram
    assert (table[7][0], table[3][0], table[4][0]) == ([40, 41], [42, 43], [44, 45])


@pytest.mark.integration
@pytest.mark.parametrize("memory", ["run", "prompt"])
def test_lossless_alone_in_batches_of_1_and_4_and_sampled(memory, tiny, prompts):
    landed = lossless_everywhere(tiny, prompts, lambda: TokenRecyclingDrafter(memory=memory), one_drafter=True)
    assert landed > 0, "the tiny model's repetitive outputs should let TR land something"
