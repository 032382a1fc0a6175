"""SuffixDecoding (Oliaro et al., arXiv 2411.04975) through its own library, Snowflake's
arctic-inference, run as vLLM's `suffix` method runs it: a suffix tree over each request's prompt
and response, one global tree over the responses of earlier requests, drafts scored by how often
each continuation was seen. The library builds every draft; this file keeps the request lifecycle
and maps the library's draft onto the engine's tree.

- `suffix`: tree drafts (`use_tree_spec=True`, which vLLM does not use).
- `suffix-chain`: the single path vLLM verifies today.
(`goose-suffix`, GOOSE with a suffix-tree spine, is goose.methods.goose_suffix.)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from goose.drafting.contract import budget_setting, memory_setting
from goose.drafting.suffix_cache import SuffixCache, SuffixLifecycle, SuffixStore, check_suffix_settings
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.engine.draft import Draft
from goose.errors import GooseError

SUFFIX = Source("suffix")  # score: the library's estimate of the probability that the path to it is right

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


def draft_nodes(root: int, root_prev: int | None, token_ids, parents, probs, match_len: int = 0) -> TreeNodes:
    """The library's draft under our root. Its `token_ids` leave the root out and its parent -1 means
    "child of the root"; our node 0 is the root, so every index shifts by one. Each node's span has held
    the match plus its ancestors (`match_len`: the suffix the library matched; 0: unknown)."""
    nodes = TreeNodes(root, root_prev)
    for t, par, prob in zip(token_ids, parents, probs):
        held = match_len + nodes.depth[par + 1] if match_len else 0
        nodes.add(par + 1, int(t), SUFFIX, float(prob), held)
    return nodes


class SuffixDrafter(SuffixLifecycle, TreeDrafter):
    name = "suffix"
    Config = SuffixConfig
    sources = (SUFFIX,)

    def __init__(self, config: SuffixConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.capabilities = dataclasses.replace(self.capabilities, memory=p.memory == "run")
        self.suffix = SuffixCache(SuffixStore(p.max_tree_depth, p.max_cached_requests, keep=p.memory == "run"))


    def propose(self, context: list[int]) -> Draft:
        p = self.config
        d = self.suffix.speculate(context, p.budget - 1, p.tree, p.max_spec_factor, p.max_spec_offset,
                                  p.min_token_prob)
        nodes = draft_nodes(context[-1], context[-2] if len(context) > 1 else None, d.token_ids, d.parents, d.probs,
                            int(d.match_len))
        return self.finish(nodes)

    def save_memory(self):
        return self.suffix.save() if self.suffix.keep else None

    def restore_memory(self, saved) -> None:
        if saved is not None:
            self.suffix.restore(saved)
