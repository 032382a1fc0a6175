"""Parts tree drafters compose: a node list labelled by source, per-source acceptance counters,
an adjacency harvester, and `TreeDrafter`, which wires them to the drafter contract
(budget=auto pruning, tracing) so a method only builds its tree."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from goose.drafting.adjacency import AdjacencyTable
from goose.drafting.contract import Capabilities, Drafter
from goose.engine.draft import Draft, Verification

DEEP = 7  # acceptance by depth is kept for depths 1..6 and pooled beyond


@dataclass(frozen=True)
class Source:
    """Where a draft node came from. `scored`: the node's score is the target's own probability
    (an adjacency top-k entry); otherwise it is a confidence in a copied chain. budget=auto
    estimates acceptance differently for the two."""

    name: str
    scored: bool = False


ROOT = Source("root")


class TreeNodes:
    """Draft nodes in topological order; node 0 is the root. Siblings never repeat a token.

    `root_prev` is the committed token before the root (what a bigram harvest keys the root by). A copied
    chain's node may say how long the span it continues has held (`held`: tokens of text and source that agree
    before it, its ancestors included); 0 when unknown."""

    def __init__(self, root: int, root_prev: int | None = None):
        self.root_prev = root_prev
        self.tokens = [root]
        self.parents = [-1]
        self.depth = [0]
        self.source = [ROOT]
        self.score = [1.0]
        self.held = [0]
        self._children: list[set[int]] = [set()]

    def __len__(self) -> int:
        return len(self.tokens)

    def has_child(self, parent: int, token: int) -> bool:
        return token in self._children[parent]

    def add(self, parent: int, token: int, source: Source, score: float = 1.0, held: int = 0) -> int:
        self.tokens.append(token)
        self.held.append(held)
        self.parents.append(parent)
        self.depth.append(self.depth[parent] + 1)
        self.source.append(source)
        self.score.append(score)
        self._children[parent].add(token)
        self._children.append(set())
        return len(self.tokens) - 1

    def draft(self) -> Draft:
        return Draft(self.tokens, self.parents)

    def reordered(self, order: list[int]) -> TreeNodes:
        """The nodes of `order` (root first, every parent before its children, closed under ancestors), in that
        order, re-indexed."""
        out = TreeNodes(self.tokens[0], self.root_prev)
        where = {0: 0}
        for i in order[1:]:
            where[i] = out.add(where[self.parents[i]], self.tokens[i], self.source[i], self.score[i], self.held[i])
        return out

    def subset(self, keep: list[int]) -> TreeNodes:
        """The nodes `keep` (ascending, root first, closed under ancestors), re-indexed."""
        return self.reordered(keep)


class SourceStats:
    """Per-prompt acceptance counters: drafted and accepted nodes per source and per depth."""

    def __init__(self, sources: tuple[Source, ...]):
        self.names = [s.name for s in sources]  # reported even when a prompt drafts none of them
        self.reset()

    def reset(self) -> None:
        self.counts: Counter = Counter()
        self.depth_drafted: Counter = Counter()
        self.depth_accepted: Counter = Counter()
        # Per verified tree: the answer token its commit began at, and (source, depth, accepted?) -> nodes, so
        # that acceptance by depth per source can also be read over the answer's loop-free window alone.
        self.trees: list[tuple[int, Counter]] = []

    def record(self, nodes: TreeNodes, path: list[int], at: int = 0) -> None:
        """Count one verified tree, whose accepted tokens and bonus are the answer's from token `at` on."""
        c = self.counts
        c["drafted"] += len(nodes) - 1
        c["accepted"] += len(path) - 1
        on_path = set(path)
        tree: Counter = Counter()
        for i in range(1, len(nodes)):
            name, d = nodes.source[i].name, min(nodes.depth[i], DEEP)
            hit = i in on_path
            c[f"{name}_drafted"] += 1
            c[f"{name}_accepted"] += hit
            self.depth_drafted[d] += 1
            self.depth_accepted[d] += hit
            tree[name, d, False] += 1
            tree[name, d, True] += hit
        self.trees.append((at, tree))

    def by_depth(self, before: int | None = None) -> dict:
        """Per source, `<source>_by_depth`: `depth:accepted/drafted` per tree depth, `;`-separated, over every
        verified tree, or (`before`) over the trees whose tokens begin before the answer's token `before` (the
        forwards of its loop-free window, as goose.analysis.loops counts them)."""
        total: Counter = Counter()
        for at, tree in self.trees:
            if before is None or at < before:
                total.update(tree)
        return {f"{name}_by_depth": ";".join(f"{_depth(d)}:{total[name, d, True]}/{total[name, d, False]}"
                                             for d in sorted({d for (n, d, _) in total if n == name}))
                for name in self.names}

    def step(self, nodes: TreeNodes, path: list[int]) -> dict:
        """One verified tree's numbers per source, for a trace line."""
        out = {"size": len(nodes), "accepted": len(path) - 1}
        for name in self.names:
            out[name] = sum(s.name == name for s in nodes.source)
            out[f"{name}_accepted"] = sum(nodes.source[i].name == name for i in path)
        return out

    def stats(self) -> dict:
        c = self.counts
        out = {"drafted": c["drafted"], "accepted": c["accepted"]}
        for name in self.names:
            d, a = c[f"{name}_drafted"], c[f"{name}_accepted"]
            out.update({f"{name}_drafted": d, f"{name}_accepted": a, f"{name}_rate": a / d if d else 0.0})
        out["accept_by_depth"] = ";".join(
            f"{_depth(d)}:{self.depth_accepted[d]}/{self.depth_drafted[d]}" for d in sorted(self.depth_drafted)
        )
        out.update(self.by_depth())
        return out


def _depth(d: int) -> str:
    return str(d) if d < DEEP else f"{DEEP}+"


class AdjacencyHarvester:
    """Feeds an adjacency table from the target's forwards: the prompt at prefill (optional) and
    every verified node, rejected ones included."""

    def __init__(self, k: int, bigram: bool, keep: bool = False):
        self._table = AdjacencyTable(k=k, bigram=bigram)
        self.keep = keep  # across prompts (memory=run, e.g. Token Recycling's hot start)
        self.pending: list[tuple[list[int], object]] = []  # prompts whose top-k a batch's prefill left for later

    @property
    def table(self) -> AdjacencyTable:
        """The table, with every prompt harvest still pending done first (in the order the prompts started)."""
        while self.pending:
            prompt, later = self.pending.pop(0)
            scores, ids = later()
            self._table.harvest(prompt, [None, *prompt[:-1]], ids, scores)
        return self._table

    def save(self) -> tuple[dict, dict]:
        # Rows are replaced on harvest, never mutated: copying the dicts copies the table.
        return dict(self.table.unigram), dict(self.table.bigram)

    def restore(self, saved: tuple[dict, dict]) -> None:
        self.pending.clear()
        self._table.unigram, self._table.bigram = dict(saved[0]), dict(saved[1])

    def start(self, context: list[int], prefill: Verification) -> None:
        if not self.keep:
            self.pending.clear()
            self._table.clear()
        # Harvested when the table is next read, after any prompt still pending (a batch's prefill computes the
        # top-k only then: topk_later)
        if prefill.topk_ids is not None:
            self.pending.append((context[:-1], lambda: (prefill.topk_scores, prefill.topk_ids)))
        elif prefill.topk_later is not None:
            self.pending.append((context[:-1], prefill.topk_later))

    def harvest(self, nodes: TreeNodes, result: Verification) -> None:
        if result.topk_ids is None:
            return
        prev = [nodes.tokens[p] if p >= 0 else None for p in nodes.parents]
        prev[0] = nodes.root_prev
        self.table.harvest(nodes.tokens, prev, result.topk_ids, result.topk_scores)


class TreeDrafter(Drafter):
    """A drafter whose drafts are `TreeNodes`: subclasses build a tree in `propose` and return
    `self.finish(nodes)`; counting, budget=auto and tracing happen here.

    `sources` names what the subclass labels its nodes with (reported per source in every row);
    a subclass fed by an adjacency table sets `self.harvester`, which then sees the prefill and
    every verified tree.
    """

    sources: tuple[Source, ...] = ()
    capabilities = Capabilities(auto_budget=True, trace=True)  # every tree can be pruned and traced

    def __init__(self, config=None, **overrides):
        super().__init__(config, **overrides)
        self.counters = SourceStats(self.sources)
        self.auto = None  # an AutoBudget under budget=auto
        self.proposed: TreeNodes | None = None  # the tree of the draft being verified
        self.trace: list[dict] | None = None
        self.harvester: AdjacencyHarvester | None = None

    def use_adjacency(self, k: int, bigram: bool, prefill_harvest: bool, memory: str) -> None:
        """Feed an adjacency table (top-k of every verified node, and of the prompt at prefill when
        `prefill_harvest`), kept across prompts under memory=run; the capabilities say so."""
        keep = memory == "run"
        self.capabilities = dataclasses.replace(self.capabilities, topk=k, harvest_prefill=prefill_harvest,
                                                memory=keep)
        self.harvester = AdjacencyHarvester(k, bigram, keep=keep)

    def enable_auto_budget(self, auto) -> None:
        if not self.capabilities.auto_budget:
            super().enable_auto_budget(auto)
        self.auto = auto

    @property
    def auto_budget_enabled(self) -> bool:
        return self.auto is not None

    @property
    def sized_by_batch(self) -> bool:
        return self.auto is not None and self.auto.defer

    def enable_trace(self) -> None:
        self.trace = []

    def take_trace(self) -> list[dict]:
        if self.trace is None:
            return []
        steps, self.trace = self.trace, []
        return steps

    def finish(self, nodes: TreeNodes) -> Draft:
        """The draft to verify: the whole tree, or its most valuable part under budget=auto."""
        if self.auto is not None:
            nodes = self.auto.prune(nodes)
        self.proposed = nodes
        draft = nodes.draft()
        if self.auto is not None and self.auto.defer:
            draft.gains = self.auto.gains
        return draft

    def start(self, context: list[int], prefill: Verification) -> None:
        if self.harvester is not None:
            self.harvester.start(context, prefill)
        if self.auto is not None:
            # Learned per prompt: a prompt's drafts never depend on which prompts ran before it
            # (a resumed run, n_prompts or another order give the same rows).
            self.auto.reset()
            self.auto.context_len = len(context)  # what a verification attends to
        self.counters.reset()
        self.answer_start = len(context) - 1  # the context ends with the answer's first token, the prefill's
        self.at = 1  # the answer token the next verified tree's tokens begin at
        if self.trace is not None:
            self.trace = []

    def accepted(self, result: Verification, context: list[int]) -> None:
        if result.width < len(self.proposed):  # the context ended, or a batch's width: a prefix was verified
            self.proposed = self.proposed.subset(list(range(result.width)))
        if self.auto is not None and self.auto.defer:
            self.auto.chosen.append(result.width)
        nodes = self.proposed
        if self.harvester is not None:
            self.harvester.harvest(nodes, result)
        if self.auto is not None:
            self.auto.observe(nodes, result.path)
            self.auto.context_len = len(context)
        self.counters.record(nodes, result.path, self.at)
        self.at = len(context) - self.answer_start
        extra = self.step_info(nodes, result.path)
        if self.trace is not None:
            self.trace.append({**self.counters.step(nodes, result.path), **extra})

    def skipped(self, context: list[int]) -> None:
        self.at = len(context) - self.answer_start

    def share_with(self, other: Drafter) -> None:
        if self.harvester is not None and self.harvester.keep:  # memory=run: one table for every request
            other.harvester = self.harvester
        if self.auto is not None:
            other.enable_auto_budget(self.auto.spawn())
        if self.trace is not None:
            other.enable_trace()

    def save_memory(self):
        return self.harvester.save() if self.harvester is not None and self.harvester.keep else None

    def restore_memory(self, saved) -> None:
        if saved is not None:
            self.harvester.restore(saved)

    def origins(self, path: list[int]) -> list[str]:
        return [self.proposed.source[i].name for i in path[1:]]

    def step_info(self, nodes: TreeNodes, path: list[int]) -> dict:
        """A subclass's own per-step numbers (counted in its stats, written to the trace)."""
        return {}

    def stats(self) -> dict:
        out = self.counters.stats()
        if self.auto is not None:
            out.update(self.auto.stats())
        return out

    def window_stats(self, tokens: int) -> dict:
        return self.counters.by_depth(before=tokens)
