"""Isotropic (balanced) k-ary trees over GOOSE's adjacency source, at GOOSE's budget.

No spine: the context matcher only sets the budget extension, as it does for GOOSE.
"""

import math
from collections import deque

from goose.context_match import ContextMatcher, confidence
from goose.spine_tree import successors
from goose.tree import BRANCH, HarvestingDrafter, TreeNodes


class BalancedTreeDrafter(HarvestingDrafter):
    name = "iso"

    def __init__(self, branching: int = 3, budget: int | str = 60, extension: int = 40, max_depth: int = 6,
                 k: int = 10, min_score: float = 0.01, bigram: bool = True, prefill_harvest: bool = True,
                 ngram_sizes: tuple[int, ...] = (5, 4, 3), max_chain: int = 20, long_match: int = 8,
                 auto_max_budget: int = 60):
        super().__init__(k=k, bigram=bigram, prefill_harvest=prefill_harvest)
        budget = auto_max_budget if budget == "auto" else int(budget)
        self.branching, self.budget, self.extension = branching, budget, extension
        self.max_depth, self.min_score, self.long_match = max_depth, min_score, long_match
        self.matcher = ContextMatcher(tuple(ngram_sizes), max_chain)

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)

    def propose(self, context):
        self.matcher.sync(context)
        root = context[-1]
        self._root_prev = context[-2] if len(context) > 1 else None
        m = self.matcher.match()
        budget = self.budget + math.floor(confidence(len(m.chain), m.consensus, self.long_match) * self.extension)
        nodes = TreeNodes(root)
        frontier = deque([0])
        while frontier and len(nodes) < budget:
            v = frontier.popleft()
            if nodes.depth[v] >= self.max_depth:
                continue
            prev = self._root_prev if v == 0 else nodes.tokens[nodes.parents[v]]
            added = 0
            for t, s in successors(self.table, prev, nodes.tokens[v], self.min_score):
                if added >= self.branching or len(nodes) >= budget:
                    break
                if not nodes.has_child(v, t):
                    frontier.append(nodes.add(v, t, BRANCH, s))
                    added += 1
        self.route = "branch_tree" if len(nodes) > 1 else "ar"
        return self.finish(nodes)
