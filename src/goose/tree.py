"""Building blocks for tree drafters: a node list with distinct siblings, and a drafter
base class that harvests every forward into an adjacency table and counts acceptance."""

from __future__ import annotations

from collections import Counter

from goose.adjacency import AdjacencyTable
from goose.decode import Drafter
from goose.engine import Draft, Verification

SPINE, BRANCH, ROOT = "s", "b", "r"
DEEP = 7  # acceptance by depth is kept for depths 1..6 and pooled beyond


class TreeNodes:
    """Draft nodes in topological order; node 0 is the root. Siblings never repeat a token."""

    def __init__(self, root: int):
        self.tokens = [root]
        self.parents = [-1]
        self.depth = [0]
        self.source = [ROOT]
        self.score = [1.0]
        self._children: list[set[int]] = [set()]

    def __len__(self) -> int:
        return len(self.tokens)

    def has_child(self, parent: int, token: int) -> bool:
        return token in self._children[parent]

    def add(self, parent: int, token: int, source: str, score: float = 1.0) -> int:
        self.tokens.append(token)
        self.parents.append(parent)
        self.depth.append(self.depth[parent] + 1)
        self.source.append(source)
        self.score.append(score)
        self._children[parent].add(token)
        self._children.append(set())
        return len(self.tokens) - 1

    def draft(self) -> Draft:
        return Draft(self.tokens, self.parents)

    def subset(self, keep: list[int]) -> TreeNodes:
        """The nodes `keep` (ascending, root first, closed under ancestors), re-indexed."""
        out = TreeNodes(self.tokens[0])
        where = {0: 0}
        for i in keep[1:]:
            where[i] = out.add(where[self.parents[i]], self.tokens[i], self.source[i], self.score[i])
        return out


class HarvestingDrafter(Drafter):
    """Base for drafters fed by an adjacency table: harvests prefill (optionally) and every
    verified node, and keeps per-prompt acceptance counters by source and depth."""

    def __init__(self, k: int = 10, bigram: bool = True, prefill_harvest: bool = True, keep_table: bool = False):
        self.topk = k
        self.harvest_prefill = prefill_harvest
        self.keep_table = keep_table
        self.table = AdjacencyTable(k=k, bigram=bigram)
        self.nodes: TreeNodes | None = None
        self.route = "ar"
        self.trace: list[dict] | None = None
        self.auto = None  # an AutoBudget when budget=auto: prunes each tree to what pays on this hardware

    def enable_auto_budget(self, auto) -> None:
        self.auto = auto

    def finish(self, nodes: TreeNodes) -> Draft:
        """The draft to verify: the whole tree, or its most valuable part under budget=auto."""
        if self.auto is not None:
            nodes = self.auto.prune(nodes)
        self.nodes = nodes
        return nodes.draft()

    # --- lifecycle -------------------------------------------------------------------
    def start(self, context: list[int], prefill: Verification) -> None:
        if not self.keep_table:
            self.table.clear()
        if self.auto is not None:
            # Learned per prompt: a prompt's drafts never depend on which prompts ran before it
            # (a resumed run, n_prompts or another order give the same rows).
            self.auto.reset()
        prompt = context[:-1]
        if prefill.topk_ids is not None:
            prev = [None, *prompt[:-1]]
            self.table.harvest(prompt, prev, prefill.topk_ids, prefill.topk_scores)
        self.counts: Counter = Counter()
        self.depth_drafted: Counter = Counter()
        self.depth_accepted: Counter = Counter()

    def accepted(self, draft: Draft, result: Verification, context: list[int]) -> None:
        nodes = self.nodes
        if result.topk_ids is not None:
            prev = [nodes.tokens[p] if p >= 0 else None for p in nodes.parents]
            prev[0] = self._root_prev
            self.table.harvest(nodes.tokens, prev, result.topk_ids, result.topk_scores)
        if self.auto is not None:
            self.auto.observe(nodes, result.path)
        self.record(nodes, result.path)

    def record(self, nodes: TreeNodes, path: list[int]) -> None:
        c = self.counts
        c[f"route_{self.route}"] += 1
        c["drafted"] += len(nodes) - 1
        c["accepted"] += len(path) - 1
        on_path = set(path)
        for i in range(1, len(nodes)):
            src, d = nodes.source[i], nodes.depth[i]
            hit = i in on_path
            c[f"{src}_drafted"] += 1
            c[f"{src}_accepted"] += hit
            self.depth_drafted[min(d, DEEP)] += 1
            self.depth_accepted[min(d, DEEP)] += hit
        # Spine continuation: the walk left the spine below the root into a branch.
        last_spine = max((k for k, i in enumerate(path) if nodes.source[i] == SPINE), default=-1)
        gained = len(path) - 1 - last_spine if last_spine >= 0 else 0
        if gained > 0:
            c["continuations"] += 1
            c["continuation_tokens"] += gained
        if self.trace is not None:
            self.trace.append({
                "route": self.route,
                "size": len(nodes),
                "spine": nodes.source.count(SPINE),
                "spine_accepted": sum(nodes.source[i] == SPINE for i in path),
                "branch": nodes.source.count(BRANCH),
                "branch_accepted": sum(nodes.source[i] == BRANCH for i in path),
                "accepted": len(path) - 1,
                "continuation": gained,
            })

    def stats(self) -> dict:
        c = self.counts
        out = {
            "spine_drafted": c["s_drafted"],
            "spine_accepted": c["s_accepted"],
            "branch_drafted": c["b_drafted"],
            "branch_accepted": c["b_accepted"],
            "spine_rate": c["s_accepted"] / c["s_drafted"] if c["s_drafted"] else 0.0,
            "branch_rate": c["b_accepted"] / c["b_drafted"] if c["b_drafted"] else 0.0,
            "continuations": c["continuations"],
            "continuation_tokens": c["continuation_tokens"],
        }
        if self.auto is not None:
            out.update(self.auto.stats())
        for r in ("spine_tree", "branch_tree", "bypass", "chain", "ar"):
            out[f"route_{r}"] = c[f"route_{r}"]
        depths = sorted(self.depth_drafted)
        out["accept_by_depth"] = ";".join(
            f"{d if d < DEEP else f'{DEEP}+'}:{self.depth_accepted[d]}/{self.depth_drafted[d]}" for d in depths
        )
        return out
