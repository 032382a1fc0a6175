"""Lookahead decoding (goose.baselines.lookahead): the n-gram pool, the window's visibility, one step's window and
pool updates by hand, the seeded window; lossless on the tiny model."""

import pytest
import torch
from conftest import hf_greedy

from goose.baselines.lookahead import LookaheadDrafter, NGramPool, window_visibility
from goose.engine.single import Engine
from goose.running.loop import generate


def test_pool_keeps_g_most_recent_per_key():
    pool = NGramPool(per_key=2)
    pool.add((1, 2, 3))
    pool.add((1, 4, 5))
    pool.add((1, 2, 3))  # refreshed: now the most recent
    pool.add((1, 6, 7))  # evicts (1, 4, 5), the least recently used
    assert pool.guesses(1) == [(6, 7), (2, 3)]
    assert pool.guesses(9) == []


def test_window_visibility_shape_and_contents():
    vis, depth = window_visibility(levels=2, width=3)
    assert vis.shape == (7, 7) and depth == [0, 1, 2, 3, 2, 3, 4]
    # cell (level 2, column 1) = index 5 sees: root, level-1 columns 0 and 1, itself
    assert vis[5].nonzero().flatten().tolist() == [0, 1, 2, 5]
    # level-1 cells form a causal row
    assert vis[3].nonzero().flatten().tolist() == [0, 1, 2, 3]


def test_window_and_pool_update_on_hand_made_step():
    d = LookaheadDrafter(ngram=3, window=2, guesses=4)

    class Pre:  # a prefill result: only its shape matters here
        topk_ids = None

    d.start([5, 6, 7, 8, 9], Pre())
    d.levels = [[10, 11], [20, 21]]
    draft = d.propose([5, 6, 7, 8, 9])
    assert draft.tokens == [9, 10, 11, 20, 21] and draft.parents == [-1, -1, -1, -1, -1]
    assert draft.depths == [0, 1, 2, 2, 3]

    class Res:
        path = [0]
        width = 5
        topk_ids = torch.tensor([[0], [0], [0], [30], [31]])  # guesses of the top level: 30, 31

    d.accepted(Res(), [5, 6, 7, 8, 9, 0])
    assert d.levels == [[20, 21], [30, 31]]
    assert d.pool.guesses(10) == [(20, 30)] and d.pool.guesses(11) == [(21, 31)]
    d.pool.add((0, 1, 2))
    d.pool.add((0, 1, 3))
    nxt = d.propose([5, 6, 7, 8, 9, 0])
    # the guesses starting after token 0 form a trie: 0 -> 1 -> {3, 2}, then the window
    assert nxt.tokens[:4] == [0, 1, 3, 2] and nxt.parents[:4] == [-1, 0, 1, 1]


@pytest.mark.integration
def test_lookahead_is_lossless_on_tiny_model(tiny, prompts):
    engine = Engine(tiny)
    for d in (LookaheadDrafter(), LookaheadDrafter(budget=12)):
        for prompt in prompts:
            assert generate(engine, prompt, d, 40).tokens == hf_greedy(tiny, prompt, 40)


def test_lookahead_is_seeded(prompts):
    """The seed alone decides the window's initial tokens: same seed, same window; another, another."""

    class Pre:
        topk_ids = None

    def window(seed):
        d = LookaheadDrafter(seed=seed)
        d.start(prompts[1] + [0], Pre())
        return d.levels

    assert window(3) == window(3)
    assert window(3) != window(4)
