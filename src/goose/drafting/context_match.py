"""Context matching: continue the text from the earliest earlier occurrence of its tail n-gram.

The pool is prompt + every committed token, indexed incrementally (n-gram -> start
positions, in order), so a query costs a dict lookup rather than a rescan.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Match:
    chain: list[int]
    n: int = 0  # the n-gram size that matched (0: none)
    consensus: bool = False  # >= 2 earlier occurrences, all followed by the same token
    held: int = 0  # tokens the text and the earlier occurrence agree on before the chain (>= n, up to MAX_HELD)


NO_MATCH = Match([])
MAX_HELD = 64  # how far back a match's agreement is counted (goose.drafting.budget buckets it by powers of two)


class ContextMatcher:
    def __init__(self, ngram_sizes: tuple[int, ...] = (5, 4, 3), max_chain: int = 20):
        self.sizes = tuple(sorted(ngram_sizes, reverse=True))
        self.max_chain = max_chain
        self.reset([])

    def reset(self, tokens: list[int]) -> None:
        self.pool: list[int] = []
        self.index: dict[int, dict[tuple[int, ...], list[int]]] = {n: {} for n in self.sizes}
        self.sync(tokens)

    def sync(self, tokens: list[int]) -> None:
        """Index the tokens of `tokens` beyond what is indexed (it must extend the pool)."""
        old = len(self.pool)
        self.pool.extend(tokens[old:])
        pool = self.pool
        for n, table in self.index.items():
            for s in range(max(0, old - n + 1), len(pool) - n + 1):
                table.setdefault(tuple(pool[s : s + n]), []).append(s)

    def match(self, tail: list[int] | None = None, max_chain: int | None = None) -> Match:
        """Longest n first; `tail` defaults to the pool itself (its trailing n-gram never counts)."""
        pool = self.pool
        query = pool if tail is None else tail
        end = len(pool)
        cap = self.max_chain if max_chain is None else max_chain
        for n in self.sizes:
            if len(query) < n:
                continue
            starts = self.index[n].get(tuple(query[-n:]))
            if not starts:
                continue
            valid = [s for s in starts if s + n < end]
            if not valid:
                continue
            s0 = valid[0]
            nxt = pool[s0 + n]
            consensus = len(valid) >= 2 and all(pool[s + n] == nxt for s in valid)
            return Match(pool[s0 + n : s0 + n + cap], n, consensus, held_before(pool, s0 + n, query))
        return NO_MATCH


def held_before(pool: list[int], start: int, query: list[int]) -> int:
    """How many tokens before pool[start] equal the end of `query`: the span the chain continues has held that
    long (at most MAX_HELD)."""
    k = 0
    while k < MAX_HELD and k < start and k < len(query) and pool[start - 1 - k] == query[-1 - k]:
        k += 1
    return k


def confidence(length: int, consensus: bool, long_match: int = 8) -> float:
    """How much to trust a context-matched chain of `length` tokens."""
    if length == 0:
        return 0.0
    if consensus:
        return 1.0
    if length >= long_match:
        return min(0.9, 0.7 + 0.2 * (length - long_match) / 12)
    return 0.6 * length / long_match
