"""SuffixDecoding's library (Snowflake's arctic-inference) and its request lifecycle: a suffix tree over each
request's prompt and response and one global tree over the responses of earlier requests. A draft source
like drafting.context_match, used by SuffixDecoding (methods.suffix_decoding) and by GOOSE with a suffix-tree spine
(goose.methods.goose_suffix)."""

from __future__ import annotations

from goose.drafting.contract import check_memory
from goose.errors import GooseError, MissingLibrary

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


class SuffixStore:
    """The library's cache: a suffix tree per request in flight and, under memory=run, one global tree over
    the responses of finished requests. Every request it has seen is in `history` as (prompt, response), in
    start order: replaying them into a fresh cache gives the same trees (the library appends token by token),
    which is how a saved state is restored. Under memory=run the requests in flight share one store (every
    request a drafter spawns for a batch); under memory=prompt each request has a fresh one."""

    def __init__(self, max_tree_depth: int, max_cached_requests: int, keep: bool):
        self.lib = library()
        self.depth, self.max_cached, self.keep = max_tree_depth, max_cached_requests, keep
        self.fresh()

    def fresh(self) -> None:
        self.cache = self.lib.SuffixDecodingCache(max_tree_depth=self.depth, max_cached_requests=self.max_cached)
        self.history: list[tuple[tuple[int, ...], list[int]]] = []

    def open(self, prompt: list[int], root: int) -> int:
        rid = len(self.history)
        self.history.append((tuple(prompt), [root]))
        self.cache.start_request(rid, list(prompt))
        self.cache.add_active_response(rid, [root])
        return rid

    def add(self, rid: int, tokens: list[int]) -> None:
        self.cache.add_active_response(rid, tokens)
        self.history[rid][1].extend(tokens)

    def close(self, rid: int) -> None:
        self.cache.stop_request(rid)

    def save(self) -> tuple:
        return tuple((p, tuple(r)) for p, r in self.history)

    def restore(self, saved: tuple) -> None:
        self.fresh()
        for i, (prompt, response) in enumerate(saved):
            self.cache.start_request(i, list(prompt))
            self.cache.add_active_response(i, list(response))
            self.cache.stop_request(i)
            self.history.append((prompt, list(response)))


class SuffixCache:
    """One drafter's request in a `SuffixStore`: `start` with the prompt (ending the drafter's previous
    request), `commit` every committed token, `stop` when the request is done."""

    def __init__(self, store: SuffixStore):
        self.store = store
        self.keep = store.keep
        self.rid: int | None = None
        self.seen = 0  # committed tokens of the request already given to the library

    def start(self, context: list[int]) -> None:
        """A new request: the prompt, and the first generated token (the root) as its response."""
        self.stop()
        if not self.keep:
            self.store.fresh()
        self.rid = self.store.open(context[:-1], context[-1])
        self.seen = len(context)

    def commit(self, context: list[int]) -> None:
        new = context[self.seen :]
        if new:
            self.store.add(self.rid, new)
            self.seen = len(context)

    def stop(self) -> None:
        if self.rid is not None:
            self.store.close(self.rid)
            self.rid = None

    def speculate(self, context: list[int], max_tokens: int, tree: bool, factor: float, offset: float,
                  min_prob: float):
        return self.store.cache.speculate(self.rid, context[-self.store.depth :], max_spec_tokens=max_tokens,
                                          max_spec_factor=factor, max_spec_offset=offset, min_token_prob=min_prob,
                                          use_tree_spec=tree)

    def save(self) -> tuple:
        return self.store.save()

    def restore(self, saved: tuple) -> None:
        self.rid = None
        self.store.restore(saved)


class SuffixLifecycle:
    """A drafter's request in the library (the drafter holds its `SuffixCache` as `self.suffix`): started with the
    prompt, told every committed token, stopped when done, shared by the requests in flight under memory=run.
    Listed before the drafter's base class."""

    suffix: SuffixCache

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.suffix.start(context)

    def accepted(self, result, context) -> None:
        super().accepted(result, context)
        self.suffix.commit(context)

    def skipped(self, context) -> None:
        super().skipped(context)
        self.suffix.commit(context)

    def stop(self) -> None:
        self.suffix.stop()

    def share_with(self, other) -> None:
        super().share_with(other)
        if self.suffix.keep:  # memory=run: the requests in flight share the library's trees
            other.suffix = SuffixCache(self.suffix.store)
