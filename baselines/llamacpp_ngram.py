"""llama.cpp's draftless n-gram speculation as llama-server runs it: `--spec-type ngram-simple` and `ngram-mod`.

Read in ggml-org/llama.cpp (docs/baselines.md names the versions): common/ngram-map.cpp
(`common_ngram_simple_draft`), common/ngram-mod.cpp (`common_ngram_mod`: the hashed pool), common/speculative.cpp
(the ngram-mod implementation's begin / draft / accept) and common/common.h (the options' defaults).

Both see the committed text as llama.cpp does: `prompt` the tokens in the KV cache, `id_last` the token just
sampled (goose's context[:-1] and context[-1]).

- ngram-simple: the latest earlier occurrence of the last size_n tokens; the draft is the size_m tokens that
  followed it, cut where the cached text ends, and dropped when fewer than size_n remain.
- ngram-mod: a fixed-size table of slots, one per hash of a match_n-gram, each holding the token that last
  followed an n-gram hashed there (a write overwrites, whatever n-gram wrote before: collisions are not
  detected). A draft walks it token by token from the tail; one shorter than n_min is dropped. The table is
  shared by every request in flight and kept across requests (memory=run, llama-server's single pool).
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass

from goose.drafting.context_match import ContextMatcher, held_before
from goose.drafting.contract import check_memory, memory_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.engine.draft import Draft, Verification

NGRAM = Source("ngram")  # a token that followed the tail n-gram somewhere before (the same label as PLD's)


def check_range(config, bounds: dict[str, tuple[int, int]]) -> None:
    """llama.cpp's own bounds on its options (common/arg.cpp)."""
    for field, (lo, hi) in bounds.items():
        value = getattr(config, field)
        if not lo <= value <= hi:
            raise ValueError(f"{field} must lie in [{lo}, {hi}] (got {value})")


# --- ngram-simple -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NgramSimpleConfig:
    # common/common.h, common_params_speculative_ngram_map (llama-server's ngram_simple):
    size_n: int = 12  # --spec-ngram-simple-size-n: the n-gram looked up
    size_m: int = 48  # --spec-ngram-simple-size-m: the most tokens drafted after it

    def __post_init__(self):
        check_range(self, {"size_n": (1, 1024), "size_m": (1, 1024)})


def simple_draft(context: list[int], starts: list[int], n: int, m: int) -> tuple[list[int], int]:
    """common_ngram_simple_draft's draft for `context` (prompt + id_last) and where its copy starts (0: none).
    `starts`: the ascending start positions of context[-n:] in context."""
    cached = len(context) - 1  # llama.cpp's cur_len: id_last is not searched in, nor copied
    if cached <= n + m + 1:
        return [], 0
    # llama.cpp scans down from cached - n - 1 (skipping the tail's own place) to 1: position 0 never matches
    k = bisect.bisect_right(starts, cached - n - 1) - 1
    if k < 0 or starts[k] < 1:
        return [], 0
    start = starts[k] + n
    copy = min(m, cached - start)
    if copy < n:  # the latest occurrence decides: an earlier one with more text after it is not tried
        return [], 0
    return context[start : start + copy], start


class NgramSimpleDrafter(TreeDrafter):
    """llama-server `--spec-type ngram-simple`: no state but the text. No budget setting: a numeric budget leaves
    the chain as llama.cpp drafts it (rows record budget=fixed); budget=auto prunes it."""

    name = "llamacpp-ngram-simple"
    Config = NgramSimpleConfig
    sources = (NGRAM,)

    def __init__(self, config: NgramSimpleConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        self.matcher = ContextMatcher((self.config.size_n,), self.config.size_m)  # used for its n-gram index

    def start(self, context: list[int], prefill: Verification) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)

    def propose(self, context: list[int]) -> Draft:
        n, m = self.config.size_n, self.config.size_m
        self.matcher.sync(context)
        nodes = TreeNodes(context[-1])
        if len(context) >= n:
            starts = self.matcher.index[n].get(tuple(context[-n:]), [])
            chain, at = simple_draft(context, starts, n, m)
            held = held_before(context, at, context) if chain else 0
            for i, t in enumerate(chain):
                nodes.add(i, t, NGRAM, held=held + i)
        return self.finish(nodes)


# --- ngram-mod --------------------------------------------------------------------------------------------------
LCG_MUL = 6364136223846793005  # common_ngram_mod::idx: hash = hash * this + token, over the n tokens
WRAP = (1 << 64) - 1  # ... in size_t, which wraps at 2**64
POOL_SIZE = 4 * 1024 * 1024  # common/speculative.cpp: the ngram-mod implementation's table (16 MiB of int32)
CHUNK = 32  # speculative.cpp draft: generated n-grams enter the table once more than 32 tokens are new
FULL = 0.25  # speculative.cpp begin: the table is emptied when used / size exceeds this
LOW = 0.25  # speculative.cpp accept: a verification that accepted under this share of the draft is "low"
LOW_STREAK = 5  # ... and this many low ones in a row empty the table


class NgramModPool:
    """common_ngram_mod: `size` slots, EMPTY unless written (a dict holds the written ones). `used` counts what
    llama.cpp counts: writes over a slot already written, not slots filled (a quirk kept: the FULL check reads it)."""

    def __init__(self, n: int, size: int):
        self.n, self.size = n, size
        self.reset()

    def reset(self) -> None:
        self.slots: dict[int, int] = {}
        self.used = 0

    def slot(self, ngram) -> int:
        h = 0
        for t in ngram:
            h = (h * LCG_MUL + t) & WRAP
        return h % self.size

    def add(self, tokens: list[int], at: int) -> None:
        """The n-gram tokens[at : at + n] was followed by tokens[at + n]."""
        i = self.slot(tokens[at : at + self.n])
        self.used += i in self.slots
        self.slots[i] = tokens[at + self.n]

    def chain(self, tail: list[int], n_min: int, n_max: int) -> list[int]:
        """Up to n_max tokens, each the slot of the n tokens before it; [] when an EMPTY slot comes before n_min."""
        window, out = list(tail[-self.n :]), []
        for i in range(n_max):
            t = self.slots.get(self.slot(window[i : i + self.n]))
            if t is None:
                return [] if i < n_min else out
            window.append(t)
            out.append(t)
        return out

    def save(self) -> tuple[dict[int, int], int]:
        return dict(self.slots), self.used

    def restore(self, saved: tuple[dict[int, int], int]) -> None:
        self.slots, self.used = dict(saved[0]), saved[1]


@dataclass(frozen=True)
class NgramModConfig:
    # common/common.h, common_params_speculative_ngram_mod:
    n_match: int = 24  # --spec-ngram-mod-n-match: the n-gram hashed
    n_min: int = 48  # --spec-ngram-mod-n-min: a shorter draft is dropped
    n_max: int = 64  # --spec-ngram-mod-n-max: the longest draft
    # Not options in llama.cpp (written into common/speculative.cpp); fields so that tests can make collisions
    # and short lessons visible:
    pool_size: int = POOL_SIZE
    chunk: int = CHUNK
    memory: str = memory_setting("run")  # one table for every request, kept across requests (llama-server's)

    def __post_init__(self):
        check_range(self, {"n_match": (1, 1024), "n_min": (0, 1024), "n_max": (0, 1024)})
        if self.n_max < self.n_min:  # llama.cpp takes it and never drafts: a run of AR under another name
            raise ValueError(f"llamacpp-ngram-mod: n_max ({self.n_max}) must be >= n_min ({self.n_min}): a draft "
                             "shorter than n_min is dropped, so it would never draft")
        if self.pool_size < 1 or self.chunk < 0:
            raise ValueError(f"pool_size must be >= 1 and chunk >= 0 (got {self.pool_size}, {self.chunk})")
        check_memory(self.memory, "llamacpp-ngram-mod")


class NgramModDrafter(TreeDrafter):
    """llama-server `--spec-type ngram-mod`. Per request (llama.cpp's seq_info): how far the text is in the table
    and the streak of low verifications; the table itself is shared under memory=run. No budget setting: a numeric
    budget leaves the chain as llama.cpp drafts it (rows record budget=fixed); budget=auto prunes it."""

    name = "llamacpp-ngram-mod"
    Config = NgramModConfig
    sources = (NGRAM,)

    def __init__(self, config: NgramModConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.keep = p.memory == "run"
        self.capabilities = dataclasses.replace(self.capabilities, memory=self.keep)
        self.pool = NgramModPool(p.n_match, p.pool_size)
        self.i_last = 0  # text positions before this one have their n-grams in the table
        self.n_low = 0  # verifications in a row that accepted under LOW of the draft (not reset per request)

    def start(self, context: list[int], prefill: Verification) -> None:
        """llama.cpp's begin, with the prompt: every n-gram of it that has a next token enters the table."""
        super().start(context, prefill)
        if not self.keep:
            self.pool.reset()
            self.n_low = 0
        prompt, n = context[:-1], self.config.n_match
        self.i_last = 0
        if len(prompt) < n:
            return
        for i in range(len(prompt) - n):
            self.pool.add(prompt, i)
        self.i_last = len(prompt) - n
        if self.pool.used / self.pool.size > FULL:  # after the prompt went in: it goes too
            self.pool.reset()

    def propose(self, context: list[int]) -> Draft:
        p, n = self.config, self.config.n_match
        prompt = context[:-1]
        nodes = TreeNodes(context[-1])
        if len(prompt) >= n:
            if self.i_last + p.chunk < len(prompt):
                for i in range(self.i_last, len(prompt) - n):
                    self.pool.add(prompt, i)
                self.i_last = len(prompt) - n
            # held: each node continues an n-gram found in the table (a collision aside)
            for i, t in enumerate(self.pool.chain(context, p.n_min, p.n_max)):
                nodes.add(i, t, NGRAM, held=n)
        return self.finish(nodes)

    def accepted(self, result: Verification, context: list[int]) -> None:
        super().accepted(result, context)
        drafted = len(self.proposed) - 1  # what was verified (budget=auto may have pruned llama.cpp's draft)
        if drafted == 0:
            return
        if (len(result.path) - 1) / drafted >= LOW:
            self.n_low = 0
            return
        self.n_low += 1
        if self.n_low >= LOW_STREAK:
            self.pool.reset()
            self.n_low = 0
            self.i_last = 0  # the whole text goes in again at the next draft

    def share_with(self, other) -> None:
        super().share_with(other)
        if self.keep:  # memory=run: one table for every request in flight, as llama-server's slots share one
            other.pool = self.pool

    def save_memory(self):
        return (self.pool.save(), self.n_low) if self.keep else None

    def restore_memory(self, saved) -> None:
        if saved is not None:
            self.pool.restore(saved[0])
            self.n_low = saved[1]
