"""Hardware-aware budget (`budget=auto`): how many draft nodes are worth verifying this step.

Two inputs: the target's verification cost curve cost(T) on this machine (measured once,
cached), and each drafted node's chance of being accepted, estimated online from what the
walk actually accepted (per source and adjacency-score bucket, with a Beta prior). A node is
worth v = v(parent) * q(node); the best draft of b nodes is the b most valuable ones (an
ancestor-closed set, since v never grows down a path), and b is chosen to maximise
(1 + sum of v) / cost(b): expected tokens per second. With nothing being accepted, b -> 1 (AR).
"""

from __future__ import annotations

import bisect
import json
import math
from pathlib import Path

from goose.tree import SPINE, TreeNodes

DEFAULT_WIDTHS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)


class CostCurve:
    """Seconds per verification as a function of the number of nodes, linearly interpolated."""

    def __init__(self, widths: list[int], seconds: list[float]):
        pairs = sorted(zip(widths, seconds))
        self.widths = [w for w, _ in pairs]
        self.seconds = [s for _, s in pairs]

    def __call__(self, t: int) -> float:
        w, s = self.widths, self.seconds
        if t <= w[0]:
            return s[0]
        if t >= w[-1]:
            return s[-1] * t / w[-1]
        i = bisect.bisect_left(w, t)
        f = (t - w[i - 1]) / (w[i] - w[i - 1])
        return s[i - 1] + f * (s[i] - s[i - 1])

    def to_json(self) -> str:
        return json.dumps({"widths": self.widths, "seconds": self.seconds})

    @classmethod
    def load(cls, path: Path) -> CostCurve:
        d = json.loads(Path(path).read_text())
        return cls(d["widths"], d["seconds"])


def score_bucket(score: float) -> int:
    return min(9, int(score * 10))


class AcceptanceModel:
    """Online P(node accepted | its parent was reached), per (source, bucket)."""

    def __init__(self, prior_strength: float = 4.0, spine_prior: float = 0.5):
        self.reached: dict[tuple, float] = {}
        self.hits: dict[tuple, float] = {}
        self.strength = prior_strength
        self.spine_prior = spine_prior

    @staticmethod
    def key(nodes: TreeNodes, i: int) -> tuple:
        if nodes.source[i] == SPINE:  # score: the chain's confidence (GOOSE) or 1.0
            return ("s", score_bucket(nodes.score[i]), min(nodes.depth[i], 4))
        return ("b", score_bucket(nodes.score[i]))

    def prior(self, key: tuple) -> float:
        return self.spine_prior if key[0] == "s" else (key[1] + 0.5) / 10

    def q(self, key: tuple) -> float:
        n = self.reached.get(key, 0.0)
        a = self.hits.get(key, 0.0)
        return (a + self.strength * self.prior(key)) / (n + self.strength)

    def observe(self, nodes: TreeNodes, path: list[int]) -> None:
        on_path = set(path)
        for i in range(1, len(nodes)):
            if nodes.parents[i] in on_path:
                k = self.key(nodes, i)
                self.reached[k] = self.reached.get(k, 0.0) + 1
                self.hits[k] = self.hits.get(k, 0.0) + (i in on_path)


class AutoBudget:
    def __init__(self, cost: CostCurve, overhead_s: float = 0.0):
        self.cost = cost
        self.overhead_s = overhead_s
        self.reset()

    def reset(self) -> None:
        """A new prompt: forget what was learned (the cost curve is the hardware's and stays)."""
        self.model = AcceptanceModel()
        self.chosen: list[int] = []

    def prune(self, nodes: TreeNodes) -> TreeNodes:
        """Keep the root plus the b - 1 most valuable nodes, b maximising expected tokens/s."""
        if len(nodes) <= 1:
            return nodes
        value = [1.0] * len(nodes)
        for i in range(1, len(nodes)):
            value[i] = value[nodes.parents[i]] * self.model.q(self.model.key(nodes, i))
        order = sorted(range(1, len(nodes)), key=lambda i: (-value[i], i))
        best_b, best_rate, gain = 1, 1.0 / (self.cost(1) + self.overhead_s), 1.0
        for b, i in enumerate(order, start=2):
            gain += value[i]
            rate = gain / (self.cost(b) + self.overhead_s)
            if rate > best_rate:
                best_b, best_rate = b, rate
        self.chosen.append(best_b)
        if best_b == len(nodes):
            return nodes
        return nodes.subset(sorted([0, *order[: best_b - 1]]))

    def observe(self, nodes: TreeNodes, path: list[int]) -> None:
        self.model.observe(nodes, path)

    def stats(self) -> dict:
        c = self.chosen
        return {"auto_budget_mean": round(sum(c) / len(c), 2) if c else math.nan,
                "auto_budget_max": max(c) if c else 0}
