"""Lookahead decoding: a Jacobi window and an n-gram pool, verified in the same forward.

The window has N - 1 levels of W columns. Cell (level l, column j) sits at depth j + l and
sees the root, level-1 cells of columns <= j and its own column's cells of levels < l: the
sequence root, L1[0..j], L2[j], ..., Ll[j]. Its argmax guesses the next token of that
sequence. Each step the levels shift down, the top level takes the new guesses, and every
column yields an N-gram (L1[j], ..., L(N-1)[j], guess) for the pool, keyed by its first
token (at most G per key, least recently used evicted). Up to G pooled n-grams starting
after the last committed token are verified as a trie in the same forward; the window
cells are visible only to each other and are never walked.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass

import torch

from goose.drafting.contract import Capabilities, budget_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.engine.draft import Draft, ancestor_matrix
from goose.errors import GooseError

GUESS = Source("guess")  # an n-gram from the pool, verified as a trie under the root


class NGramPool:
    def __init__(self, per_key: int):
        self.per_key = per_key
        self.table: dict[int, OrderedDict[tuple[int, ...], None]] = {}

    def add(self, gram: tuple[int, ...]) -> None:
        row = self.table.setdefault(gram[0], OrderedDict())
        row[gram] = None
        row.move_to_end(gram)
        while len(row) > self.per_key:
            row.popitem(last=False)

    def guesses(self, token: int) -> list[tuple[int, ...]]:
        """Continuations after `token`, most recently used first."""
        return [g[1:] for g in reversed(self.table.get(token, {}))]


def window_visibility(levels: int, width: int) -> tuple[torch.Tensor, list[int]]:
    """Visibility among [root, window cells level by level] and each cell's depth."""
    T = 1 + levels * width
    vis = torch.zeros(T, T, dtype=torch.bool, device="cpu")  # host-side, as every draft (the engine moves it)
    vis[:, 0] = True
    vis[0, 0] = True
    depth = [0] * T

    def idx(l: int, j: int) -> int:  # l in 1..levels, j in 0..width-1
        return 1 + (l - 1) * width + j

    for l in range(1, levels + 1):
        for j in range(width):
            i = idx(l, j)
            depth[i] = j + l
            vis[i, [idx(1, c) for c in range(j + 1)]] = True
            vis[i, [idx(m, j) for m in range(1, l + 1)]] = True
    return vis, depth


@dataclass(frozen=True)
class LookaheadConfig:
    ngram: int = 5  # N (Spec-Bench: N=5, W=7, G=7)
    window: int = 7  # W
    guesses: int = 7  # G, pooled n-grams per key
    budget: int = budget_setting(60)  # bounds window + guesses + root (set from the top-level budget)
    seed: int = 0  # the window's random initial tokens

    def __post_init__(self):
        if self.ngram < 2 or self.window < 1 or self.guesses < 1 or self.budget < 1:
            raise GooseError("lookahead: need ngram >= 2 and window, guesses, budget >= 1.")


class LookaheadDrafter(TreeDrafter):
    """Not prunable under budget=auto: the window is what produces the guesses, so it is refused."""

    name = "lookahead"
    Config = LookaheadConfig
    sources = (GUESS,)
    capabilities = Capabilities(topk=1, trace=True)  # k=1: every node's argmax feeds the window

    def __init__(self, config: LookaheadConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.N, self.W, self.G = p.ngram, p.window, p.guesses
        self.pool = NGramPool(self.G)
        self.levels: list[list[int]] = []
        self.window_width = 0  # columns of the window in the draft being verified
        self.window_cells = 0

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.pool = NGramPool(self.G)
        rng = random.Random(self.config.seed)
        prompt = context[:-1]
        self.levels = [[rng.choice(prompt) for _ in range(self.W)] for _ in range(self.N - 1)]
        self.window_cells = 0

    def _width(self) -> int:
        """Window columns that fit the budget (the window goes first, then guesses)."""
        return max(0, min(self.W, (self.config.budget - 1) // (self.N - 1)))

    def propose(self, context: list[int]) -> Draft:
        root = context[-1]
        width = self._width()
        levels = self.N - 1
        win_vis, win_depth = window_visibility(levels, width)
        n_win = levels * width
        # Guesses as a trie under the root, within what is left of the budget.
        trie = TreeNodes(root, context[-2] if len(context) > 1 else None)
        room = self.config.budget - 1 - n_win
        for g in self.pool.guesses(root):
            at = 0
            for t in g:
                nxt = next((c for c in range(1, len(trie)) if trie.parents[c] == at and trie.tokens[c] == t), None)
                if nxt is None:
                    if room <= 0:
                        break
                    nxt = trie.add(at, t, GUESS)
                    room -= 1
                at = nxt
        T = len(trie) + n_win
        vis = torch.zeros(T, T, dtype=torch.bool, device="cpu")  # host-side: the engine moves it to the model
        n_trie = len(trie)
        vis[:n_trie, :n_trie] = ancestor_matrix(trie.parents, torch.device("cpu"))
        vis[n_trie:, 0] = True
        vis[n_trie:, n_trie:] = win_vis[1:, 1:]
        tokens = trie.tokens + [t for row in self.levels for t in row[:width]]
        parents = trie.parents + [-1] * n_win
        depths = trie.depth + win_depth[1:]
        self.proposed = trie
        self.window_width = width
        self.window_cells += n_win
        return Draft(tokens, parents, visibility=vis, depths=depths)

    def accepted(self, result, context) -> None:
        n0 = len(self.proposed)
        super().accepted(result, context)
        width = self.window_width
        if not width or result.width < n0 + (self.N - 1) * width:  # the context ended before the window: keep it
            return
        guess = result.topk_ids[:, 0].tolist()
        top = [guess[n0 + (self.N - 2) * width + j] for j in range(width)]
        for j in range(width):
            self.pool.add(tuple(self.levels[m][j] for m in range(self.N - 1)) + (top[j],))
        self.levels = self.levels[1:] + [top + self.levels[-1][width:]]

    def stats(self) -> dict:
        return {**super().stats(), "window_drafted": self.window_cells}  # window cells are never walked
