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

import torch

from goose.engine import Draft, ancestor_matrix
from goose.tree import SPINE, HarvestingDrafter, TreeNodes


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
    vis = torch.zeros(T, T, dtype=torch.bool)
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


class LookaheadDrafter(HarvestingDrafter):
    name = "lookahead"

    def __init__(self, ngram: int = 5, window: int = 7, guesses: int = 7, budget: int | str = 60, seed: int = 0):
        super().__init__(k=1, bigram=False, prefill_harvest=False)  # k=1: every node's argmax
        self.N, self.W, self.G = ngram, window, guesses
        self.budget = 10**9 if budget == "auto" else int(budget)
        self.seed = seed

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.pool = NGramPool(self.G)
        rng = random.Random(self.seed)
        prompt = context[:-1]
        self.levels = [[rng.choice(prompt) for _ in range(self.W)] for _ in range(self.N - 1)]

    def _width(self) -> int:
        """Window columns that fit the budget (the window goes first, then guesses)."""
        return max(0, min(self.W, (self.budget - 1) // (self.N - 1)))

    def propose(self, context: list[int]) -> Draft:
        root = context[-1]
        self._root_prev = context[-2] if len(context) > 1 else None
        width = self._width()
        levels = self.N - 1
        win_vis, win_depth = window_visibility(levels, width)
        n_win = levels * width
        # Guesses as a trie under the root, within what is left of the budget.
        trie = TreeNodes(root)
        room = self.budget - 1 - n_win
        for g in self.pool.guesses(root):
            at = 0
            for t in g:
                nxt = next((c for c in range(1, len(trie)) if trie.parents[c] == at and trie.tokens[c] == t), None)
                if nxt is None:
                    if room <= 0:
                        break
                    nxt = trie.add(at, t, SPINE)
                    room -= 1
                at = nxt
        T = len(trie) + n_win
        vis = torch.zeros(T, T, dtype=torch.bool)
        n_trie = len(trie)
        vis[:n_trie, :n_trie] = ancestor_matrix(trie.parents, torch.device("cpu"))
        vis[n_trie:, 0] = True
        vis[n_trie:, n_trie:] = win_vis[1:, 1:]
        tokens = trie.tokens + [t for row in self.levels for t in row[:width]]
        parents = trie.parents + [-1] * n_win
        depths = trie.depth + win_depth[1:]
        self.nodes = trie
        self._n_trie, self._width_used = n_trie, width
        self.route = "chain" if n_trie > 1 else "ar"
        return Draft(tokens, parents, visibility=vis, depths=depths)

    def accepted(self, draft, result, context) -> None:
        self.record(self.nodes, result.path)
        width, n0 = self._width_used, self._n_trie
        if not width:
            return
        guess = result.topk_ids[:, 0].tolist()
        top = [guess[n0 + (self.N - 2) * width + j] for j in range(width)]
        for j in range(width):
            self.pool.add(tuple(self.levels[m][j] for m in range(self.N - 1)) + (top[j],))
        self.levels = self.levels[1:] + [top + self.levels[-1][width:]]
