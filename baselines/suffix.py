"""SuffixDecoding (Oliaro et al., arXiv 2411.04975) through its own library, Snowflake's
arctic-inference, run as vLLM's `suffix` method runs it: a suffix tree over each request's prompt
and response, one global tree over the responses of earlier requests, drafts scored by how often
each continuation was seen. The library builds every draft; this file keeps the request lifecycle
and maps the library's draft onto the engine's tree.

- `suffix`: tree drafts (`use_tree_spec=True`, which vLLM does not use).
- `suffix-chain`: the single path vLLM verifies today.
- `goose-suffix` (beyond the paper): GOOSE whose spine is SuffixDecoding's best path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from goose.drafter import Capabilities, budget_setting, check_memory, memory_setting
from goose.engine import Draft
from goose.errors import GooseError, MissingLibrary
from goose.spine_tree import GooseConfig, GooseDrafter
from goose.tree import Source, TreeDrafter, TreeNodes

SUFFIX = Source("suffix")  # score: the library's estimate of the probability that the path to it is right

INSTALL = ("pip install nanobind==2.9.2 cmake ninja grpcio-tools protobuf && "
           "pip install --no-build-isolation --no-deps arctic-inference==0.3.0 (or `make install`)")


def library():
    """arctic_inference.suffix_decoding, or a clear error naming how to build it."""
    try:
        from arctic_inference import suffix_decoding
    except ImportError as e:
        raise MissingLibrary(f"SuffixDecoding needs Snowflake's arctic-inference library, which is not importable here "
                         f"({e}). Build it with: {INSTALL}. Every other method works without it.") from None
    return suffix_decoding


@dataclass(frozen=True)
class SuffixConfig:
    """vLLM's defaults for its `suffix` method; `budget` (nodes incl. root) caps max_spec_tokens."""

    budget: int = budget_setting(60)
    tree: bool = True  # use_tree_spec: a tree of continuations; False = the best single path
    max_tree_depth: int = 24
    max_cached_requests: int = 10000
    max_spec_factor: float = 1.0  # at most factor * match length + offset tokens
    max_spec_offset: float = 0.0
    min_token_prob: float = 0.1
    memory: str = memory_setting("run")  # the global tree keeps earlier responses (vLLM's setting)

    def __post_init__(self):
        if self.budget < 1:
            raise GooseError(f"suffix: budget must be >= 1 (got {self.budget}).")
        check_suffix_settings(self, "suffix")


def check_suffix_settings(c, method: str) -> None:
    """The library's settings, as SuffixConfig and GooseSuffixConfig share them."""
    bad = []
    if c.max_tree_depth < 1:
        bad.append(f"max_tree_depth must be >= 1 (got {c.max_tree_depth})")
    if c.max_cached_requests == 0 or c.max_cached_requests < -1:
        bad.append(f"max_cached_requests must be >= 1 or -1 for no limit (got {c.max_cached_requests})")
    if c.max_spec_factor < 0 or c.max_spec_offset < 0:
        bad.append(f"max_spec_factor and max_spec_offset must be >= 0 (got {c.max_spec_factor}, {c.max_spec_offset})")
    if not 0 <= c.min_token_prob <= 1:
        bad.append(f"min_token_prob must lie in [0, 1] (got {c.min_token_prob})")
    if bad:
        raise GooseError(f"{method}: {'; '.join(bad)}.")
    check_memory(c.memory, method)


class SuffixCache:
    """The library's cache and its request lifecycle, one request per prompt: `start_request` with
    the prompt, `add_active_response` with every committed token, `stop_request` when the next
    prompt starts. Under memory=run the responses stay in the global tree; under memory=prompt a
    fresh cache serves each prompt.

    The state across prompts is the list of (prompt, response) pairs: replaying them into a fresh
    cache gives the same trees (the library appends token by token), which is how a saved state is
    restored."""

    def __init__(self, max_tree_depth: int, max_cached_requests: int, keep: bool):
        self.lib = library()
        self.depth, self.max_cached, self.keep = max_tree_depth, max_cached_requests, keep
        self.history: list[tuple[tuple[int, ...], list[int]]] = []
        self.cache = None
        self.active: int | None = None
        self.seen = 0  # committed tokens of the active request already given to the library

    def _fresh(self) -> None:
        self.cache = self.lib.SuffixDecodingCache(max_tree_depth=self.depth, max_cached_requests=self.max_cached)
        self.active = None

    def start(self, context: list[int]) -> None:
        """A new request: the prompt, and the first generated token (the root) as its response."""
        if not self.keep or self.cache is None:
            self._fresh()
            self.history = []
        elif self.active is not None:
            self.cache.stop_request(self.active)
        self.active = len(self.history)
        prompt = tuple(context[:-1])
        self.history.append((prompt, [context[-1]]))
        self.cache.start_request(self.active, list(prompt))
        self.cache.add_active_response(self.active, context[-1:])
        self.seen = len(context)

    def commit(self, context: list[int]) -> None:
        new = context[self.seen :]
        if new:
            self.cache.add_active_response(self.active, new)
            self.history[-1][1].extend(new)
            self.seen = len(context)

    def speculate(self, context: list[int], max_tokens: int, tree: bool, factor: float, offset: float,
                  min_prob: float):
        return self.cache.speculate(self.active, context[-self.depth :], max_spec_tokens=max_tokens,
                                    max_spec_factor=factor, max_spec_offset=offset, min_token_prob=min_prob,
                                    use_tree_spec=tree)

    def save(self) -> tuple:
        return tuple((p, tuple(r)) for p, r in self.history)

    def restore(self, saved: tuple) -> None:
        self._fresh()
        self.history = []
        for i, (prompt, response) in enumerate(saved):
            self.cache.start_request(i, list(prompt))
            self.cache.add_active_response(i, list(response))
            self.cache.stop_request(i)
            self.history.append((prompt, list(response)))


def draft_nodes(root: int, root_prev: int | None, token_ids, parents, probs) -> TreeNodes:
    """The library's draft under our root. Its `token_ids` leave the root out and its parent -1 means
    "child of the root"; our node 0 is the root, so every index shifts by one."""
    nodes = TreeNodes(root, root_prev)
    for t, par, prob in zip(token_ids, parents, probs):
        nodes.add(par + 1, int(t), SUFFIX, float(prob))
    return nodes


class SuffixDrafter(TreeDrafter):
    name = "suffix"
    Config = SuffixConfig
    sources = (SUFFIX,)

    def __init__(self, config: SuffixConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.capabilities = Capabilities(auto_budget=True, trace=True, memory=p.memory == "run")
        self.suffix = SuffixCache(p.max_tree_depth, p.max_cached_requests, keep=p.memory == "run")

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.suffix.start(context)

    def propose(self, context: list[int]) -> Draft:
        p = self.config
        d = self.suffix.speculate(context, p.budget - 1, p.tree, p.max_spec_factor, p.max_spec_offset,
                                  p.min_token_prob)
        nodes = draft_nodes(context[-1], context[-2] if len(context) > 1 else None, d.token_ids, d.parents, d.probs)
        return self.finish(nodes)

    def accepted(self, result, context) -> None:
        super().accepted(result, context)
        self.suffix.commit(context)

    def save_memory(self):
        return self.suffix.save() if self.suffix.keep else None

    def restore_memory(self, saved) -> None:
        if saved is not None:
            self.suffix.restore(saved)


@dataclass(frozen=True)
class GooseSuffixConfig(GooseConfig):
    """GOOSE's hyperparameters, plus SuffixDecoding's for the spine (vLLM's defaults)."""

    max_tree_depth: int = 24
    max_cached_requests: int = 10000
    max_spec_factor: float = 1.0
    max_spec_offset: float = 0.0
    min_token_prob: float = 0.1

    def __post_init__(self):
        super().__post_init__()
        check_suffix_settings(self, "goose-suffix")


def suffix_confidence(probs: list[float], match_len: int, long_match: int) -> float:
    """GOOSE's spine confidence from the library's scores: the mean estimated probability of the
    path's tokens (its expected accepted share), scaled down for short matches as GOOSE's context
    matcher does (full trust from `long_match` tokens). Kept below 1, since a suffix-tree estimate
    from one earlier occurrence is no consensus: GOOSE's bypass route (no branches) is left to it."""
    if not probs:
        return 0.0
    return min(0.9, sum(probs) / len(probs) * min(1.0, match_len / long_match))


class GooseSuffixDrafter(GooseDrafter):
    """GOOSE whose spine is SuffixDecoding's best path over the prompt and (memory=run) earlier
    responses, instead of the context matcher's; adjacency branches as in GOOSE."""

    name = "goose-suffix"
    Config = GooseSuffixConfig

    def __init__(self, config: GooseSuffixConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.suffix = SuffixCache(p.max_tree_depth, p.max_cached_requests, keep=p.memory == "run")
        self.path: list[int] = []  # the library's whole path, for chain extension

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.suffix.start(context)

    def spine(self, context: list[int]) -> tuple[list[int], float]:
        p = self.config
        if not p.context_spine:
            return [], 0.0
        d = self.suffix.speculate(context, p.max_extended_chain, False, p.max_spec_factor, p.max_spec_offset,
                                  p.min_token_prob)
        self.path = [int(t) for t in d.token_ids]
        c = suffix_confidence(list(d.probs), d.match_len, p.long_match) if p.use_confidence else 0.0
        return self.path[: p.max_chain], c

    def extend_chain(self, context: list[int], chain: list[int], c: float) -> list[int]:
        """A confident spine runs on along the library's path, up to floor(100 c) tokens."""
        return self.path[: max(len(chain), math.floor(self.config.max_extended_chain * c))]

    def accepted(self, result, context) -> None:
        super().accepted(result, context)
        self.suffix.commit(context)

    def save_memory(self):
        if not self.suffix.keep:
            return None
        return super().save_memory(), self.suffix.save()

    def restore_memory(self, saved) -> None:
        if saved is not None:
            super().restore_memory(saved[0])
            self.suffix.restore(saved[1])
