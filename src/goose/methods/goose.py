"""GOOSE: an anisotropic spine tree.

Context-matched tokens (accepted often) form one deep chain, the spine; adjacency guesses
(accepted rarely) fan out as wide, shallow branches off the root and the spine nodes.
The algorithm and its hyperparameters: docs/method.md (the paper: arXiv 2604.02047).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass

import torch

from goose.drafting.context_match import ContextMatcher, Match, confidence
from goose.drafting.contract import budget_setting, check_memory, memory_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.engine.draft import Draft, ancestor_matrix
from goose.errors import GooseError

SPINE = Source("spine")  # context-matched chain; score: its confidence
BRANCH = Source("branch", scored=True)  # adjacency guess; score: the target's probability


@dataclass(frozen=True)
class GooseConfig:
    """GOOSE's hyperparameters (paper Table 5 defaults) and its ablation switches."""

    budget: int = budget_setting(60)  # B, nodes incl. root (set from the top-level budget)
    extension: int = 40  # +floor(c * 40) nodes at confidence c (max_extended_chain - B in the paper)
    max_depth: int = 6  # D, for branch growth
    k: int = 10  # adjacency top-K
    min_score: float = 0.01
    rho: float = 0.5  # share of the branch budget hung off spine nodes
    max_chain: int = 20
    max_extended_chain: int = 100
    long_match: int = 8
    ngram_sizes: tuple[int, ...] = (5, 4, 3)
    ema_alpha: float = 0.3
    ema_init: float = 0.5
    tiers: tuple[float, ...] = (0.15, 0.30, 0.50)  # spine share of the budget by acceptance EMA tier
    tier_edges: tuple[float, ...] = (0.2, 0.4)
    extend_above: float = 0.6  # chain extension when c > 0.6
    bigram: bool = True  # ablation switches from here on
    prefill_harvest: bool = True
    use_confidence: bool = True
    context_spine: bool = True
    spine_continuation: bool = True
    memory: str = memory_setting("prompt")  # adjacency table reset per prompt (the paper's); run: kept across prompts

    def __post_init__(self):
        object.__setattr__(self, "ngram_sizes", tuple(self.ngram_sizes))
        object.__setattr__(self, "tiers", tuple(self.tiers))
        object.__setattr__(self, "tier_edges", tuple(self.tier_edges))
        check(self.budget >= 1 and self.extension >= 0 and self.max_depth >= 1 and self.k >= 1,
              "budget, max_depth and k must be >= 1 and extension >= 0")
        check(0 <= self.min_score <= 1 and 0 <= self.rho <= 1, "min_score and rho must lie in [0, 1]")
        check(self.max_chain >= 1 and self.max_extended_chain >= 1 and self.long_match >= 1,
              "max_chain, max_extended_chain and long_match must be >= 1")
        check(bool(self.ngram_sizes) and min(self.ngram_sizes) >= 1, "ngram_sizes must be n-gram sizes >= 1")
        check(0 < self.ema_alpha <= 1 and 0 <= self.ema_init <= 1, "ema_alpha must lie in (0, 1], ema_init in [0, 1]")
        check(len(self.tiers) == len(self.tier_edges) + 1 and list(self.tier_edges) == sorted(self.tier_edges)
              and all(0 <= r <= 1 for r in self.tiers), "tiers: one more share in [0, 1] than ascending tier_edges")
        check_memory(self.memory, "goose")


def check(ok: bool, message: str) -> None:
    if not ok:
        raise GooseError(f"goose: {message}.")


def build_spine_tree(
    root: int, root_prev: int | None, spine: list[int], budget: int, table, p: GooseConfig, confidence: float = 1.0,
    held: int = 0,
) -> TreeNodes:
    """Lay `spine` under the root, then spend the rest of `budget` on adjacency branches.

    Spine nodes carry the chain's confidence as their score and how long the copied span has held before each
    (`held` tokens before the first; 0: unknown), what budget=auto estimates them by."""
    nodes = TreeNodes(root, root_prev)
    L = len(spine)
    prev = root_prev
    for i, t in enumerate(spine):
        nodes.add(i, t, SPINE, confidence, held + i if held else 0)
    branch_budget = max(0, budget - 1 - L)
    if L > 0 and p.rho > 0:
        spine_share = min(branch_budget, max(1, math.floor(branch_budget * p.rho)))
    else:
        spine_share = 0
    root_share = branch_budget - spine_share
    frontier: deque[int] = deque()

    def hang(parent: int, parent_prev: int | None, skip: int | None, limit: int) -> int:
        added = 0
        for t, s in table.successors(parent_prev, nodes.tokens[parent], p.min_score):
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
            for t, s in table.successors(nodes.tokens[nodes.parents[v]], nodes.tokens[v], p.min_score)
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


ROUTES = ("spine_tree", "branch_tree", "bypass", "chain", "ar")


class GooseDrafter(TreeDrafter):
    """The GOOSE drafter, its four routes and its ablation switches."""

    name = "goose"
    Config = GooseConfig
    sources = (SPINE, BRANCH)

    def __init__(self, config: GooseConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.use_adjacency(p.k, p.bigram, p.prefill_harvest, p.memory)
        self.matcher = ContextMatcher(p.ngram_sizes, p.max_chain)
        self.ema = p.ema_init
        self.route = "ar"
        self.routes: Counter = Counter()
        self.continuations = self.continuation_tokens = 0
        self.spine_held = 0  # how long the span the spine continues has held (0: unknown)

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)
        self.ema = self.config.ema_init
        self.routes = Counter()
        self.continuations = self.continuation_tokens = 0

    def tier(self) -> float:
        for edge, r in zip(self.config.tier_edges, self.config.tiers):
            if self.ema < edge:
                return r
        return self.config.tiers[-1]

    def extend_chain(self, context: list[int], chain: list[int], c: float, target: int | None = None,
                     certain: bool | None = None) -> list[int]:
        """Keep matching from the end of context + chain until `target` tokens (default floor(100 c));
        `certain` (default: c = 1) continues only while each new match has consensus."""
        target = math.floor(self.config.max_extended_chain * c) if target is None else target
        certain = c >= 1.0 if certain is None else certain
        tail = max(self.matcher.sizes)
        while len(chain) < target:
            m = self.matcher.match(context[-tail:] + chain)
            if not m.chain or (certain and not m.consensus):
                break
            chain = chain + m.chain
        return chain[:target]

    def spine(self, context: list[int]) -> tuple[list[int], float]:
        """The chain to lay under the root and the confidence in it: context matching (a subclass
        may take its spine from elsewhere)."""
        self.matcher.sync(context)
        p = self.config
        m: Match = self.matcher.match() if p.context_spine else Match([])
        self.spine_held = m.held
        return m.chain, confidence(len(m.chain), m.consensus, p.long_match) if p.use_confidence else 0.0

    def propose(self, context: list[int]) -> Draft:
        root = context[-1]
        root_prev = context[-2] if len(context) > 1 else None
        p = self.config
        table = self.harvester.table
        chain, c = self.spine(context)
        if table.lookup(root_prev, root) is not None:
            if c > p.extend_above:
                chain = self.extend_chain(context, chain, c)
            if c >= 1.0:
                self.route = "bypass"  # full confidence: the whole budget is spine, a pure chain
                nodes = build_spine_tree(root, root_prev, chain, 1 + len(chain), table, p, c, self.spine_held)
            else:
                budget = p.budget + math.floor(c * p.extension)
                r = self.tier() + c * (1 - self.tier())
                spine = chain[: min(len(chain), math.floor(budget * r), budget - 1)]
                self.route = "spine_tree" if spine else "branch_tree"
                nodes = build_spine_tree(root, root_prev, spine, budget, table, p, c, self.spine_held)
        elif chain:
            self.route = "chain"
            nodes = build_spine_tree(root, root_prev, chain, 1 + len(chain), table, p, c, self.spine_held)
        else:
            self.route = "ar"
            nodes = TreeNodes(root, root_prev)
        draft = self.finish(nodes)
        if len(self.proposed) < 2:
            self.route = "ar"
        if not p.spine_continuation and self.route == "spine_tree":
            return no_continuation_draft(self.proposed, draft.gains)
        return draft

    def accepted(self, result, context) -> None:
        super().accepted(result, context)
        if self.route in ("spine_tree", "bypass"):  # the spine-acceptance EMA that picks the tier
            nodes = self.proposed
            n_spine = nodes.source.count(SPINE)
            if n_spine:
                hit = sum(nodes.source[i] == SPINE for i in result.path)
                a = self.config.ema_alpha
                self.ema = a * hit / n_spine + (1 - a) * self.ema

    def step_info(self, nodes: TreeNodes, path: list[int]) -> dict:
        """The route taken, and the tokens gained after the walk left the spine below the root into a
        branch (spine continuation)."""
        self.routes[self.route] += 1
        last_spine = max((k for k, i in enumerate(path) if nodes.source[i] == SPINE), default=-1)
        gained = len(path) - 1 - last_spine if last_spine >= 0 else 0
        if gained > 0:
            self.continuations += 1
            self.continuation_tokens += gained
        return {"route": self.route, "continuation": gained}

    def stats(self) -> dict:
        out = super().stats()
        out.update({"continuations": self.continuations, "continuation_tokens": self.continuation_tokens})
        out.update({f"route_{r}": self.routes[r] for r in ROUTES})
        return out


class SpineOnlyDrafter(GooseDrafter):
    """GOOSE's context-match spine alone, given the whole budget GOOSE would have each step:
    B + floor(c * extension) nodes, the chain extended by matching again from its end until it
    fills them or nothing matches. No branches and no adjacency table. With branches-only (GOOSE
    with context_spine=false) it is one of the two single sources synergy is measured against."""

    name = "spine-only"

    def __init__(self, config: GooseConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        check(self.config.context_spine, "spine-only needs context_spine=true (there is nothing else to draft)")
        self.capabilities = TreeDrafter.capabilities  # no top-k to harvest, nothing kept
        self.harvester = None

    def propose(self, context: list[int]) -> Draft:
        chain, c = self.spine(context)
        budget = self.config.budget + math.floor(c * self.config.extension)
        if chain:
            chain = self.extend_chain(context, chain, c, target=budget - 1, certain=False)
        nodes = TreeNodes(context[-1], context[-2] if len(context) > 1 else None)
        for i, t in enumerate(chain[: budget - 1]):
            nodes.add(i, t, SPINE, c, self.spine_held + i if self.spine_held else 0)
        self.route = "bypass" if c >= 1.0 else "chain"
        draft = self.finish(nodes)
        if len(self.proposed) < 2:
            self.route = "ar"
        return draft


def no_continuation_draft(nodes: TreeNodes, gains: list[float] | None = None) -> Draft:
    """Ablation: branches off spine nodes stay in the forward but the walk cannot enter them, so
    the walk stops where the spine breaks."""
    walk_parents = list(nodes.parents)
    for i in range(1, len(nodes)):
        par = nodes.parents[i]
        if nodes.source[i] == BRANCH and par > 0 and nodes.source[par] == SPINE:
            walk_parents[i] = -1
    visible = ancestor_matrix(nodes.parents, torch.device("cpu"))
    return Draft(nodes.tokens, walk_parents, visibility=visible, depths=nodes.depth, gains=gains)
