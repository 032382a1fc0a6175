"""The adjacency table: next-token guesses harvested from the target's own forwards.

Unigram tier: token -> its top-K successors (ids, softmax over those K logits).
Bigram tier: (previous token, token) -> the same, preferred when present.
Every forward's positions overwrite their rows, rejected tree nodes included.
"""

from __future__ import annotations

import torch

Row = tuple[list[int], list[float]]


class AdjacencyTable:
    def __init__(self, k: int = 10, bigram: bool = True):
        self.k = k
        self.use_bigram = bigram
        self.unigram: dict[int, Row] = {}
        self.bigram: dict[tuple[int, int], Row] = {}

    def clear(self) -> None:
        self.unigram.clear()
        self.bigram.clear()

    def harvest(self, tokens: list[int], prev: list[int | None], ids: torch.Tensor, logits: torch.Tensor) -> None:
        """Overwrite rows from one forward: position i holds `tokens[i]`, preceded by `prev[i]`.

        `ids` / `logits` are the top-k (k >= self.k) of each position, best first.
        """
        k = self.k
        scores = torch.softmax(logits[:, :k].float(), dim=-1).tolist()
        succ = ids[:, :k].tolist()
        uni, bi = self.unigram, self.bigram
        for t, p, s, sc in zip(tokens, prev, succ, scores):
            row = (s, sc)
            uni[t] = row
            if self.use_bigram and p is not None:
                bi[(p, t)] = row

    def lookup(self, prev: int | None, token: int) -> Row | None:
        """Bigram row if present, else the unigram row if observed, else None."""
        if self.use_bigram and prev is not None:
            row = self.bigram.get((prev, token))
            if row is not None:
                return row
        return self.unigram.get(token)

    def successors(self, prev: int | None, token: int, min_score: float) -> list[tuple[int, float]]:
        """(token, score) of the looked-up row, best first, those scoring at least `min_score`."""
        row = self.lookup(prev, token)
        if row is None:
            return []
        return [(t, s) for t, s in zip(*row) if s >= min_score]
