"""Isotropic (balanced) k-ary trees over GOOSE's adjacency source, at GOOSE's budget.

No spine: the context matcher only sets the budget extension, as it does for GOOSE.
"""

import math
from collections import deque
from dataclasses import dataclass

from goose.drafting.context_match import ContextMatcher, confidence
from goose.drafting.contract import budget_setting, check_memory, memory_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.errors import GooseError

ADJACENCY = Source("adjacency", scored=True)


@dataclass(frozen=True)
class BalancedTreeConfig:
    branching: int = 3
    budget: int = budget_setting(60)  # nodes incl. root (set from the top-level budget)
    extension: int = 40
    max_depth: int = 6
    k: int = 10
    min_score: float = 0.01
    bigram: bool = True
    prefill_harvest: bool = True
    ngram_sizes: tuple[int, ...] = (5, 4, 3)
    max_chain: int = 20
    long_match: int = 8
    memory: str = memory_setting("prompt")  # adjacency table reset per prompt, as GOOSE's

    def __post_init__(self):
        object.__setattr__(self, "ngram_sizes", tuple(self.ngram_sizes))
        check_memory(self.memory, "balanced tree")
        if min(self.branching, self.budget, self.max_depth, self.k, self.max_chain, self.long_match) < 1:
            raise GooseError("balanced tree: branching, budget, max_depth, k, max_chain, long_match must be >= 1.")
        if self.extension < 0 or not 0 <= self.min_score <= 1:
            raise GooseError("balanced tree: extension must be >= 0 and min_score in [0, 1].")


class BalancedTreeDrafter(TreeDrafter):
    name = "iso"
    Config = BalancedTreeConfig
    sources = (ADJACENCY,)

    def __init__(self, config: BalancedTreeConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.use_adjacency(p.k, p.bigram, p.prefill_harvest, p.memory)
        self.matcher = ContextMatcher(p.ngram_sizes, p.max_chain)

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)

    def propose(self, context):
        self.matcher.sync(context)
        p = self.config
        m = self.matcher.match()
        budget = p.budget + math.floor(confidence(len(m.chain), m.consensus, p.long_match) * p.extension)
        nodes = TreeNodes(context[-1], context[-2] if len(context) > 1 else None)
        table = self.harvester.table
        frontier = deque([0])
        while frontier and len(nodes) < budget:
            v = frontier.popleft()
            if nodes.depth[v] >= p.max_depth:
                continue
            prev = nodes.root_prev if v == 0 else nodes.tokens[nodes.parents[v]]
            added = 0
            for t, s in table.successors(prev, nodes.tokens[v], p.min_score):
                if added >= p.branching or len(nodes) >= budget:
                    break
                if not nodes.has_child(v, t):
                    frontier.append(nodes.add(v, t, ADJACENCY, s))
                    added += 1
        return self.finish(nodes)
