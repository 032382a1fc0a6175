"""SGLang's NGRAM speculative algorithm (`--speculative-algorithm NGRAM`, sglang 0.5.23), run as SGLang's
NGRAMWorker runs it, its drafts verified by goose's engine instead of SGLang's CUDA kernels.

One token trie per server (here: per run under memory=run, SGLang's; per prompt under memory=prompt). Each
decode step drafts from the request's last `max_trie_depth` tokens (the tail, its last token the root), then,
once the draft is verified, inserts that same tail into the trie (the prompt itself is never inserted: only
the tail each step sees). The matcher (trie, match state, BFS or PROB tree, layout) is SGLang's own C++,
compiled here (goose.drafting.sglang_native), or with impl=python goose's reimplementation of it
(goose.drafting.sglang_trie), which drafts the same trees node for node. SGLang pads every draft to its
draft-token count with token 0 under the root; that filler is dropped (sglang_layout.unpadded).

- `sglang-ngram`: SGLang's defaults, `num_draft_tokens` = 12 nodes (root included) whatever the budget.
- `sglang-ngram-budget`: the same, its draft-token count set by the top-level budget (equal budget).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from goose.drafting.contract import budget_setting, check_memory, memory_setting
from goose.drafting.sglang_layout import MAX_KEYS, unpadded
from goose.drafting.sglang_native import NativeCorpus, library
from goose.drafting.sglang_trie import PyCorpus
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.engine.draft import Draft

TRIE = Source("trie")  # a continuation found in SGLang's n-gram trie


@dataclass(frozen=True)
class NgramSettings:
    """SGLang's server defaults (python/sglang/srt/arg_groups/fields/spec.py, `--speculative-ngram-*`)."""

    match_type: str = "BFS"  # BFS: recency, breadth from max to min by match length; PROB: by visit counts
    min_bfs_breadth: int = 1
    max_bfs_breadth: int = 10  # also PROB's top-k children per node
    max_trie_depth: int = 18  # the longest path kept, so the tail matched and inserted each step
    capacity: int = 1_000_000  # trie nodes (SGLang's NgramCorpus default; its server passes 10M, 1.9 GB here)
    impl: str = "sglang"  # sglang: SGLang's C++ compiled here; python: goose's reimplementation
    memory: str = memory_setting("run")  # SGLang keeps one trie across requests until its cache is flushed

    @property
    def draft_tokens(self) -> int:
        raise NotImplementedError

    def __post_init__(self):
        if self.match_type not in ("BFS", "PROB"):
            raise ValueError(f"match_type must be BFS or PROB (got {self.match_type!r})")
        if not 1 <= self.min_bfs_breadth <= self.max_bfs_breadth:
            raise ValueError(f"min_bfs_breadth must be >= 1 and <= max_bfs_breadth (got {self.min_bfs_breadth}, "
                             f"{self.max_bfs_breadth})")
        if self.max_trie_depth < 2:
            raise ValueError(f"max_trie_depth must be > 1 (got {self.max_trie_depth})")
        if self.capacity <= self.max_trie_depth:
            raise ValueError(f"capacity must exceed max_trie_depth (got {self.capacity})")
        if self.impl not in ("sglang", "python"):
            raise ValueError(f"impl must be sglang (SGLang's compiled matcher) or python (got {self.impl!r})")
        if not 1 <= self.draft_tokens <= MAX_KEYS:
            raise ValueError(f"the draft-token count must lie in [1, {MAX_KEYS}] (got {self.draft_tokens})")
        check_memory(self.memory, "sglang-ngram")


@dataclass(frozen=True)
class SGLangNgramConfig(NgramSettings):
    num_draft_tokens: int = 12  # --speculative-num-draft-tokens, root included (12: SGLang's NGRAM default)

    @property
    def draft_tokens(self) -> int:
        return self.num_draft_tokens


@dataclass(frozen=True)
class SGLangNgramBudgetConfig(NgramSettings):
    budget: int = budget_setting(60)  # the draft-token count, root included, from the top-level budget

    @property
    def draft_tokens(self) -> int:
        return self.budget


class NgramStore:
    """One corpus (SGLang's matcher) and every window inserted into it, in order: replaying them into an empty
    one gives the same trie, which is how a saved state is restored. Shared by the requests in flight under
    memory=run; each request has a match state of its own (an id, as SGLang keys them by request)."""

    def __init__(self, config: NgramSettings):
        self.config, self.keep = config, config.memory == "run"
        self._corpus: NativeCorpus | PyCorpus | None = None
        self.history: list[tuple[int, ...]] = []
        self.next_state = 0

    @property
    def corpus(self) -> NativeCorpus | PyCorpus:
        if self._corpus is None:  # made on first use: building a drafter allocates nothing
            p = self.config
            kind = NativeCorpus if p.impl == "sglang" else PyCorpus
            self._corpus = kind(p.draft_tokens, p.match_type, p.min_bfs_breadth, p.max_bfs_breadth,
                                p.max_trie_depth, p.capacity)
        return self._corpus

    def new_state(self) -> int:
        self.next_state += 1
        return self.next_state

    def insert(self, window: list[int]) -> None:
        self.corpus.insert(window)
        self.history.append(tuple(window))

    def clear(self) -> None:
        if self._corpus is not None:
            self._corpus.reset()
        self.history = []

    def save(self) -> tuple:
        return tuple(self.history)

    def restore(self, saved: tuple) -> None:
        self.clear()
        for window in saved:
            self.corpus.insert(list(window))
        self.history = list(saved)


class SGLangNgramDrafter(TreeDrafter):
    name = "sglang-ngram"
    Config = SGLangNgramConfig
    sources = (TRIE,)

    def __init__(self, config: NgramSettings | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.capabilities = dataclasses.replace(self.capabilities, memory=p.memory == "run")
        if p.impl == "sglang":
            library()  # where it cannot be had: one line (MissingLibrary) before anything loads
        self.store = NgramStore(p)
        self.state: int | None = None
        self.window: list[int] | None = None  # the tail the draft being verified came from

    def _tail(self, context: list[int]) -> list[int]:
        return list(context[-self.config.max_trie_depth :])

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.stop()
        if not self.store.keep:
            self.store.clear()
        self.state = self.store.new_state()
        self.window = None

    def propose(self, context: list[int]) -> Draft:
        self.window = self._tail(context)
        tokens, parents = unpadded(*self.store.corpus.match(self.state, self.window, len(context)))
        nodes = TreeNodes(context[-1], context[-2] if len(context) > 1 else None)
        for token, parent in zip(tokens[1:], parents[1:]):
            nodes.add(parent, token, TRIE)
        return self.finish(nodes)

    def accepted(self, result, context) -> None:
        super().accepted(result, context)
        if self.window is not None:  # after verification, SGLang inserts the tail it drafted from
            self.store.insert(self.window)
            self.window = None

    def skipped(self, context) -> None:
        """A batch step without a draft: what SGLang's step does around its draft (match, then insert the tail)."""
        super().skipped(context)
        before = context[:-1]
        tail = self._tail(before)
        self.store.corpus.match(self.state, tail, len(before))
        self.store.insert(tail)

    def stop(self) -> None:
        if self.state is not None and self.store._corpus is not None:
            self.store.corpus.erase(self.state)
        self.state = None

    def share_with(self, other) -> None:
        super().share_with(other)
        if self.store.keep:  # memory=run: one trie for every request in flight
            other.store = self.store

    def save_memory(self):
        return self.store.save() if self.store.keep else None

    def restore_memory(self, saved) -> None:
        if saved is not None:
            self.store.restore(saved)


class SGLangNgramBudgetDrafter(SGLangNgramDrafter):
    name = "sglang-ngram-budget"
    Config = SGLangNgramBudgetConfig
