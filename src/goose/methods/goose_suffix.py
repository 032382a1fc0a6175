"""GOOSE whose spine is SuffixDecoding's best path (beyond the paper): the spine comes from the library's
suffix trees over the prompt and (memory=run) earlier responses instead of the context matcher; adjacency
branches as in GOOSE."""

from __future__ import annotations

import math
from dataclasses import dataclass

from goose.drafting.suffix_cache import SuffixCache, SuffixLifecycle, SuffixStore, check_suffix_settings
from goose.methods.goose import GooseConfig, GooseDrafter


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


class GooseSuffixDrafter(SuffixLifecycle, GooseDrafter):
    """GOOSE whose spine is SuffixDecoding's best path over the prompt and (memory=run) earlier
    responses, instead of the context matcher's; adjacency branches as in GOOSE."""

    name = "goose-suffix"
    Config = GooseSuffixConfig

    def __init__(self, config: GooseSuffixConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.suffix = SuffixCache(SuffixStore(p.max_tree_depth, p.max_cached_requests, keep=p.memory == "run"))
        self.path: list[int] = []  # the library's whole path, for chain extension


    def spine(self, context: list[int]) -> tuple[list[int], float]:
        p = self.config
        if not p.context_spine:
            return [], 0.0
        d = self.suffix.speculate(context, p.max_extended_chain, False, p.max_spec_factor, p.max_spec_offset,
                                  p.min_token_prob)
        self.path = [int(t) for t in d.token_ids]
        self.spine_held = int(d.match_len)
        c = suffix_confidence(list(d.probs), d.match_len, p.long_match) if p.use_confidence else 0.0
        return self.path[: p.max_chain], c

    def extend_chain(self, context: list[int], chain: list[int], c: float) -> list[int]:
        """A confident spine runs on along the library's path, up to floor(100 c) tokens."""
        return self.path[: max(len(chain), math.floor(self.config.max_extended_chain * c))]

    def save_memory(self):
        if not self.suffix.keep:
            return None
        return super().save_memory(), self.suffix.save()

    def restore_memory(self, saved) -> None:
        if saved is not None:
            super().restore_memory(saved[0])
            self.suffix.restore(saved[1])
