"""GOOSE: an anisotropic spine tree.

Context-matched tokens (accepted often) form one deep chain, the spine; adjacency guesses
(accepted rarely) fan out as wide, shallow branches off the root and the spine nodes.
See ../shared/docs/goose-method.md for the algorithm and its hyperparameters.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import torch

from goose.context_match import ContextMatcher, Match, confidence
from goose.engine import Draft, ancestor_matrix
from goose.tree import BRANCH, SPINE, HarvestingDrafter, TreeNodes


@dataclass
class SpineTreeParams:
    budget: int = 60  # B, nodes incl. root
    extension: int = 40  # budget extension at confidence 1 (max_extended_chain - B in the paper)
    max_depth: int = 6  # D, for branch growth
    k: int = 10
    min_score: float = 0.01
    rho: float = 0.5  # share of the branch budget hung off spine nodes
    spine_branches: bool = True


def successors(table, prev: int | None, token: int, min_score: float):
    row = table.lookup(prev, token)
    if row is None:
        return []
    return [(t, s) for t, s in zip(*row) if s >= min_score]


def build_spine_tree(
    root: int, root_prev: int | None, spine: list[int], budget: int, table, p: SpineTreeParams, confidence: float = 1.0
) -> TreeNodes:
    """Lay `spine` under the root, then spend the rest of `budget` on adjacency branches.

    Spine nodes carry the chain's confidence as their score (what budget=auto calibrates)."""
    nodes = TreeNodes(root)
    L = len(spine)
    prev = root_prev
    for i, t in enumerate(spine):
        nodes.add(i, t, SPINE, confidence)
    branch_budget = max(0, budget - 1 - L)
    if L > 0 and p.spine_branches:
        spine_share = min(branch_budget, max(1, math.floor(branch_budget * p.rho)))
    else:
        spine_share = 0
    root_share = branch_budget - spine_share
    frontier: deque[int] = deque()

    def hang(parent: int, parent_prev: int | None, skip: int | None, limit: int) -> int:
        added = 0
        for t, s in successors(table, parent_prev, nodes.tokens[parent], p.min_score):
            if added >= limit:
                break
            if t == skip or nodes.has_child(parent, t):
                continue
            frontier.append(nodes.add(parent, t, BRANCH, s))
            added += 1
        return added

    hang(0, prev, spine[0] if L else None, root_share)
    if spine_share:
        harmonic = sum(1.0 / i for i in range(1, L + 1))
        remaining = spine_share
        for i in range(1, L + 1):
            if remaining <= 0:
                break
            quota = min(max(1, math.floor(spine_share * (1.0 / i) / harmonic)), remaining)
            node_prev = root if i == 1 else spine[i - 2]
            remaining -= hang(i, node_prev, spine[i] if i < L else None, quota)

    # Breadth-first growth of branch nodes while budget remains.
    while frontier and len(nodes) < budget:
        v = frontier.popleft()
        d = nodes.depth[v]
        if d >= p.max_depth:
            continue
        succ = [
            (t, s)
            for t, s in successors(table, nodes.tokens[nodes.parents[v]], nodes.tokens[v], p.min_score)
            if not nodes.has_child(v, t)
        ]
        if not succ:
            continue
        remaining = budget - len(nodes)
        width = max(1, min(len(succ), math.ceil(remaining * nodes.score[v])))
        width = min(width, max(1, p.k // d))
        for t, s in succ[:width]:
            if len(nodes) >= budget:
                break
            frontier.append(nodes.add(v, t, BRANCH, s))
    return nodes


class GooseDrafter(HarvestingDrafter):
    """The GOOSE drafter, its four routes and its ablation switches."""

    name = "goose"

    def __init__(
        self,
        budget: int | str = 60,
        extension: int = 40,
        max_depth: int = 6,
        k: int = 10,
        min_score: float = 0.01,
        rho: float = 0.5,
        max_chain: int = 20,
        max_extended_chain: int = 100,
        long_match: int = 8,
        ngram_sizes: tuple[int, ...] = (5, 4, 3),
        ema_alpha: float = 0.3,
        ema_init: float = 0.5,
        tiers: tuple[float, ...] = (0.15, 0.30, 0.50),
        tier_edges: tuple[float, ...] = (0.2, 0.4),
        extend_above: float = 0.6,
        bigram: bool = True,
        prefill_harvest: bool = True,
        use_confidence: bool = True,
        context_spine: bool = True,
        spine_continuation: bool = True,
        keep_table: bool = False,
        auto_max_budget: int = 60,
    ):
        super().__init__(k=k, bigram=bigram, prefill_harvest=prefill_harvest, keep_table=keep_table)
        budget = auto_max_budget if budget == "auto" else int(budget)  # auto: build at the max, then prune
        self.params = SpineTreeParams(budget, extension, max_depth, k, min_score, rho, rho > 0)
        self.matcher = ContextMatcher(tuple(ngram_sizes), max_chain)
        self.max_extended_chain = max_extended_chain
        self.long_match = long_match
        self.ema_alpha, self.ema_init = ema_alpha, ema_init
        self.tiers, self.tier_edges = tuple(tiers), tuple(tier_edges)
        self.extend_above = extend_above
        self.use_confidence = use_confidence
        self.context_spine = context_spine
        self.spine_continuation = spine_continuation

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)
        self.ema = self.ema_init

    def tier(self) -> float:
        for edge, r in zip(self.tier_edges, self.tiers):
            if self.ema < edge:
                return r
        return self.tiers[-1]

    def extend_chain(self, context: list[int], chain: list[int], c: float) -> list[int]:
        """Keep matching from the end of context + chain until floor(100 c) tokens."""
        target = math.floor(self.max_extended_chain * c)
        certain = c >= 1.0
        tail = max(self.matcher.sizes)
        while len(chain) < target:
            m = self.matcher.match(context[-tail:] + chain)
            if not m.chain or (certain and not m.consensus):
                break
            chain = chain + m.chain
        return chain[:target]

    def propose(self, context: list[int]) -> Draft:
        self.matcher.sync(context)
        root = context[-1]
        self._root_prev = context[-2] if len(context) > 1 else None
        m: Match = self.matcher.match() if self.context_spine else Match([])
        chain = m.chain
        p = self.params
        c = confidence(len(chain), m.consensus, self.long_match) if self.use_confidence else 0.0
        if self.table.lookup(self._root_prev, root) is not None:
            if c > self.extend_above:
                chain = self.extend_chain(context, chain, c)
            if c >= 1.0:
                self.route = "bypass"  # full confidence: the whole budget is spine, a pure chain
                nodes = build_spine_tree(root, self._root_prev, chain, 1 + len(chain), self.table, p, c)
            else:
                budget = p.budget + math.floor(c * p.extension)
                r = self.tier() + c * (1 - self.tier())
                spine = chain[: min(len(chain), math.floor(budget * r), budget - 1)]
                self.route = "spine_tree" if spine else "branch_tree"
                nodes = build_spine_tree(root, self._root_prev, spine, budget, self.table, p, c)
        elif chain:
            self.route = "chain"
            nodes = build_spine_tree(root, self._root_prev, chain, 1 + len(chain), self.table, p, c)
        else:
            self.route = "ar"
            nodes = TreeNodes(root)
        if not self.spine_continuation and self.route == "spine_tree":
            self.nodes = nodes
            return self._no_continuation_draft(nodes)
        draft = self.finish(nodes)
        if len(self.nodes) < 2:
            self.route = "ar"
        return draft

    def _no_continuation_draft(self, nodes: TreeNodes) -> Draft:
        """Ablation: branches off spine nodes stay in the forward but the walk cannot enter
        them, so the walk stops where the spine breaks."""
        walk_parents = list(nodes.parents)
        for i in range(1, len(nodes)):
            par = nodes.parents[i]
            if nodes.source[i] == BRANCH and par > 0 and nodes.source[par] == SPINE:
                walk_parents[i] = -1
        visible = ancestor_matrix(nodes.parents, torch.device("cpu"))
        return Draft(nodes.tokens, walk_parents, visibility=visible, depths=nodes.depth)

    def accepted(self, draft, result, context) -> None:
        super().accepted(draft, result, context)
        if self.route in ("spine_tree", "bypass"):
            nodes = self.nodes
            n_spine = nodes.source.count(SPINE)
            if n_spine:
                hit = sum(nodes.source[i] == SPINE for i in result.path)
                self.ema = self.ema_alpha * hit / n_spine + (1 - self.ema_alpha) * self.ema
