"""How SGLang's n-gram matcher lays a draft out, for goose's reimplementation (goose.drafting.sglang_trie) to lay
its drafts out node for node as SGLang's compiled matcher does (sglang 0.5.23, kernels/jit/csrc/ngram_corpus/
result.cpp `fillResult`): the root, then breadth first, siblings in the iteration order of the C++ hash map that
held them, padded with token 0 under the root to the draft-token count; and two containers of GCC's standard
library whose order that depends on (a hash map of int keys, a binary heap), written from the library's rules."""

from __future__ import annotations

import math
from collections import deque

# libstdc++'s bucket counts (std::__detail::__prime_list, read from libstdc++.so.6) up to 4349.
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109,
           113, 127, 137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409, 439,
           467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493, 1613, 1741, 1879,
           2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349)
_FAST = (2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13)  # the policy's table for fewer than 14 buckets
MAX_KEYS = 4027  # keys one map may hold before it needs a bucket count past the table above


class HashOrder:
    """An insert-only std::unordered_map<int32_t, int32_t> (identity hash, prime rehash policy, max load 1):
    `keys` in the order iterating it visits them. A new key goes first in its bucket, an empty bucket's first
    key first in the whole list; a rehash re-inserts every key in the old order."""

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.value: dict[int, int] = {}
        self._first: dict[int, int] = {}  # bucket -> its first key
        self._buckets = 1
        self._next_resize = 0

    def get(self, key: int) -> int | None:
        return self.value.get(key)

    def insert(self, key: int, value: int) -> None:
        n = len(self.value)
        if n + 1 > self._next_resize:
            wanted = float(max(n + 1, 0 if self._next_resize else 11))
            if wanted >= self._buckets:
                self._rehash(self._next_bucket_count(max(math.floor(wanted) + 1, self._buckets * 2)))
            else:
                self._next_resize = self._buckets
        self._link(key)
        self.value[key] = value

    def _next_bucket_count(self, n: int) -> int:
        if n < len(_FAST):
            count = _FAST[n] if n else 1
        else:
            count = next((p for p in _PRIMES[6:] if p >= n), None)
            if count is None:
                raise ValueError(f"more than {MAX_KEYS} children of one draft node")
        if n:
            self._next_resize = count
        return count

    def _link(self, key: int) -> None:
        bucket = key % self._buckets
        if bucket in self._first:
            self.keys.insert(self.keys.index(self._first[bucket]), key)
        else:
            self.keys.insert(0, key)
        self._first[bucket] = key

    def _rehash(self, buckets: int) -> None:
        old, self.keys, self._first, self._buckets = self.keys, [], {}, buckets
        for key in old:
            self._link(key)


class MaxHeap:
    """std::priority_queue over entries whose last field is the priority, as libstdc++'s push_heap and pop_heap
    move entries: equal priorities come out in the order those moves leave them, which the draft depends on."""

    def __init__(self) -> None:
        self.c: list[tuple] = []

    def __bool__(self) -> bool:
        return bool(self.c)

    def push(self, entry: tuple) -> None:
        self.c.append(entry)
        self._sift_up(len(self.c) - 1, 0, entry)

    def pop(self) -> tuple:
        c = self.c
        top = c[0]
        if len(c) > 1:
            last = len(c) - 1
            value, c[last] = c[last], c[0]
            self._adjust(last, value)
        c.pop()
        return top

    def _sift_up(self, hole: int, top: int, value: tuple) -> None:
        c = self.c
        parent = (hole - 1) // 2
        while hole > top and c[parent][-1] < value[-1]:
            c[hole] = c[parent]
            hole = parent
            parent = (hole - 1) // 2
        c[hole] = value

    def _adjust(self, length: int, value: tuple) -> None:
        """__adjust_heap from the top: the hole goes down to a leaf along the larger children, then value rises."""
        c = self.c
        hole = child = 0
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if c[child][-1] < c[child - 1][-1]:
                child -= 1
            c[hole] = c[child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            c[hole] = c[child - 1]
            hole = child - 1
        self._sift_up(hole, 0, value)


def fill_result(last_token: int, size: int, tree: list[HashOrder]) -> tuple[list[int], list[int]]:
    """SGLang's draft of `size` nodes from the tree a builder grew (tree[i] maps a child's token to its
    slot): tokens and each node's parent (-1 for the root), breadth first, padded with token 0 under the root."""
    tokens, parents = [last_token], [-1]
    queue = deque((t, tree[0].value[t], 0) for t in tree[0].keys)
    while queue:
        token, slot, parent = queue.popleft()
        tokens.append(token)
        parents.append(parent)
        here = len(tokens) - 1
        queue.extend((t, tree[slot].value[t], here) for t in tree[slot].keys)
    pad = max(0, size - len(tokens))
    return tokens + [0] * pad, parents + [0] * pad


def parents_from_mask(mask: list[int], size: int) -> list[int]:
    """Each node's parent from SGLang's ancestor mask (row i marks i's ancestors and i): the nearest ancestor."""
    out = [-1]
    for i in range(1, size):
        row = mask[i * size : i * size + i]
        out.append(max((j for j, v in enumerate(row) if v), default=-1))
    return out


def unpadded(tokens: list[int], parents: list[int]) -> tuple[list[int], list[int]]:
    """The draft without SGLang's filler: trailing nodes of token 0 under the root. (A real token-0 child of the
    root in last place of a one-level draft looks the same and goes too: the rule is the same for both matchers.)"""
    n = len(tokens)
    while n > 1 and tokens[n - 1] == 0 and parents[n - 1] == 0:
        n -= 1
    return tokens[:n], parents[:n]
