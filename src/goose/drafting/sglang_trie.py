"""SGLang's NGRAM matcher in Python: goose's reimplementation of the C++ in sglang 0.5.23
(kernels/jit/csrc/ngram_corpus/trie.cpp, ngram.cpp, result.cpp), written from its rules and checked draft for
draft against the compiled original (tests/baselines/test_sglang_ngram.py). `PyCorpus` and
goose.drafting.sglang_native.NativeCorpus answer the same calls with the same drafts.

- A trie of every token window inserted, each path at most `max_trie_depth` long: inserting a window inserts
  the path of each of its positions (to the window's end or the depth), counting each node's visits (`freq`),
  keeping each node's children most recently touched first and all nodes in one least-recently-used order,
  from which leaves are evicted when `capacity` nodes are in use.
- Per request a match state: for each suffix length d (1 .. depth) the trie node of the context's last d
  tokens, advanced token by token from the previous step (a suffix not in the trie when its tokens arrived
  stays unmatched) and rebuilt from the tail when it cannot be advanced.
- A draft from every matched suffix that has continuations, longest first, merged into one tree of at most
  `draft_token_num - 1` nodes under the root: BFS (recency) takes each node's most recent children, as many as
  a breadth that starts between max_bfs_breadth (a short match) and min_bfs_breadth (a long one) and shrinks
  by a fixed step per level; PROB (frequency) grows the tree best-first by the product of each level's share
  of visits among a node's `max_bfs_breadth` most visited children.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from goose.drafting.sglang_layout import HashOrder, MaxHeap, fill_result


class TrieNode:
    __slots__ = ("token", "parent", "children", "freq", "alive")

    def __init__(self, token: int, parent: TrieNode | None):
        self.token, self.parent, self.freq, self.alive = token, parent, 0, True
        self.children: dict[int, TrieNode] = {}  # least recently touched first

    def recent_first(self):
        return reversed(self.children.values())

    def by_visits(self) -> list[TrieNode]:
        return sorted(self.children.values(), key=lambda n: (-n.freq, n.token))


@dataclass
class MatchState:
    epoch: int = 0
    processed: int = 0  # the request length the anchors stand for
    anchors: list[TrieNode | None] = field(default_factory=list)  # anchors[d - 1]: the node of the last d tokens


class Trie:
    def __init__(self, capacity: int, max_depth: int):
        self.capacity, self.max_depth = capacity, max_depth
        self.epoch = 0
        self.reset()

    def reset(self) -> None:
        """Empty, and every match state stale."""
        self.epoch += 1
        self.root = TrieNode(-1, None)
        self.lru: OrderedDict[TrieNode, None] = OrderedDict()  # least recently used first
        self.free = self.capacity - 1  # the root holds one node

    def insert(self, tokens: list[int]) -> None:
        for i in range(len(tokens)):
            path_len = min(len(tokens) - i, self.max_depth)
            if path_len > self.free:
                self._evict(path_len - self.free)
            cursor, path = self.root, []
            for token in tokens[i : i + path_len]:
                node = cursor.children.pop(token, None)
                if node is None:
                    node = TrieNode(token, cursor)
                    self.free -= 1
                    self.lru[node] = None
                node.freq += 1
                cursor.children[token] = node  # most recent last
                cursor = node
                path.append(node)
            for node in reversed(path):  # the path's first node ends up most recent
                self.lru.move_to_end(node)

    def _evict(self, count: int) -> None:
        if count > self.capacity - 1 - self.free:
            raise RuntimeError(f"sglang-ngram: the trie cannot free {count} nodes (capacity {self.capacity})")
        for _ in range(count):
            node, _ = self.lru.popitem(last=False)
            if node.children:
                raise RuntimeError("sglang-ngram: the least recently used node still has children")
            del node.parent.children[node.token]
            node.alive = False
            self.free += 1

    # Matching: the anchors of a request's suffixes, advanced step by step.

    def _live(self, state: MatchState, node: TrieNode | None) -> TrieNode | None:
        return node if node is not None and state.epoch == self.epoch and node.alive else None

    def _rebuild(self, tail: list[int], state: MatchState, total_len: int) -> None:
        depth = min(len(tail), self.max_depth)
        state.epoch, state.processed, state.anchors = self.epoch, total_len, [None] * depth
        for d in range(1, depth + 1):
            cursor: TrieNode | None = self.root
            for token in tail[len(tail) - d :]:
                cursor = cursor.children.get(token)
                if cursor is None:
                    break
            state.anchors[d - 1] = cursor

    def _advance(self, state: MatchState, new: list[int], total_len: int) -> bool:
        if state.epoch != self.epoch or any(a is not None and not a.alive for a in state.anchors):
            return False
        for token in new:
            depth = min(len(state.anchors) + 1, self.max_depth)
            nxt: list[TrieNode | None] = [None] * depth
            nxt[0] = self.root.children.get(token)
            for d in range(1, depth):
                prev = state.anchors[d - 1]
                if prev is None:
                    continue
                if not prev.alive:
                    return False
                nxt[d] = prev.children.get(token)
            state.anchors = nxt
        state.processed = total_len
        return True

    def match(self, tail: list[int], state: MatchState, total_len: int) -> list[tuple[TrieNode, int]]:
        """The matched suffixes that have continuations, longest first, as (node, length)."""
        forward = total_len >= state.processed
        new = total_len - state.processed if forward else 0
        can = (state.epoch == self.epoch and forward and new <= len(tail)
               and len(state.anchors) == min(state.processed, self.max_depth))
        if not (can and self._advance(state, tail[len(tail) - new :], total_len)):
            self._rebuild(tail, state, total_len)
        out = []
        for d in range(len(state.anchors), 0, -1):
            node = self._live(state, state.anchors[d - 1])
            if node is not None and node.children:
                out.append((node, d))
        return out


def build_recency(anchors, drafts: int, min_breadth: int, max_breadth: int, max_depth: int) -> list[HashOrder]:
    """BFS: from each anchor, breadth first, each node's most recent children, as many as its breadth."""
    longest = max(1, max_depth - 1)
    step = (max_breadth - min_breadth) / longest
    tree = [HashOrder() for _ in range(drafts + 1)]
    cursor = 1
    for anchor, depth in anchors:
        queue = deque([(0, (longest - depth) * step + min_breadth, anchor)])
        while queue and cursor <= drafts:
            parent, breadth, node = queue.popleft()
            width = max(1, int(breadth))
            for i, child in enumerate(node.recent_first()):
                if i >= width or cursor > drafts:
                    break
                slot = tree[parent].get(child.token)
                if slot is None:
                    slot = cursor
                    tree[parent].insert(child.token, slot)
                    cursor += 1
                queue.append((slot, breadth - step, child))
    return tree


def build_frequency(anchors, drafts: int, top_k: int) -> list[HashOrder]:
    """PROB: best first by path probability, each level's share of visits among a node's top_k children."""
    heap = MaxHeap()
    tree = [HashOrder() for _ in range(drafts + 1)]
    cursor = 1

    def expand(parent: int, node: TrieNode, prob: float) -> None:
        kids = node.by_visits()[:top_k]
        total = float(sum(k.freq for k in kids)) or 1.0
        for kid in kids:
            heap.push((parent, kid, kid.freq / total * prob))

    for anchor, _ in anchors:
        expand(0, anchor, 1.0)
        while heap and cursor <= drafts:
            parent, node, prob = heap.pop()
            slot = tree[parent].get(node.token)
            if slot is None:
                slot = cursor
                cursor += 1
                tree[parent].insert(node.token, slot)
            expand(slot, node, prob)
    return tree


class PyCorpus:
    """SGLang's `Ngram` corpus (no external corpora): one trie, a match state per request id."""

    def __init__(self, draft_token_num: int, match_type: str, min_bfs_breadth: int, max_bfs_breadth: int,
                 max_trie_depth: int, capacity: int):
        self.size, self.match_type = draft_token_num, match_type
        self.min_breadth, self.max_breadth, self.max_depth = min_bfs_breadth, max_bfs_breadth, max_trie_depth
        self.trie = Trie(capacity, max_trie_depth)
        self.states: dict[int, MatchState] = {}

    def insert(self, tokens: list[int]) -> None:
        self.trie.insert(list(tokens))

    def match(self, state_id: int, tail: list[int], total_len: int) -> tuple[list[int], list[int]]:
        """SGLang's draft for a request: tokens and parents, node 0 the tail's last token, padded to size."""
        if not tail:
            raise ValueError("sglang-ngram: an empty token tail")
        state = self.states.setdefault(state_id, MatchState())
        anchors = self.trie.match(list(tail), state, total_len)
        drafts = self.size - 1
        if self.match_type == "BFS":
            tree = build_recency(anchors, drafts, self.min_breadth, self.max_breadth, self.max_depth)
        else:
            tree = build_frequency(anchors, drafts, self.max_breadth)
        return fill_result(tail[-1], self.size, tree)

    def erase(self, state_id: int) -> None:
        self.states.pop(state_id, None)

    def reset(self) -> None:
        self.trie.reset()
        self.states.clear()
