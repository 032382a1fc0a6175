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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from goose.errors import GooseError
from goose.tree import TreeNodes

if TYPE_CHECKING:
    from goose.engine import Engine
    from goose.models import ModelIdentity

DEFAULT_WIDTHS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
AUTO_BUILD_NODES = 60  # under budget=auto a drafter builds its tree at this budget, then prunes it
# Part of a cached cost profile's name: raised whenever the engine or a backend changes what a forward costs
# (2: the in-place KV cache and prepacked's grouped-head attention), so no curve of older code is reused.
COST_PROFILE_VERSION = 2


@dataclass(frozen=True)
class Budget:
    """The top-level `budget` setting, parsed once: `nodes` per draft (incl. root) a drafter builds,
    and whether budget=auto prunes each draft to what pays on this hardware."""

    nodes: int
    auto: bool

    @classmethod
    def parse(cls, value) -> Budget:
        if value == "auto":
            return cls(AUTO_BUILD_NODES, True)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return cls(value, False)
        raise GooseError(f"budget must be a whole number of nodes >= 1 or auto (got {value!r}), e.g. budget=60.")


def interpolate(xs: list[int], ys: list[float], x: float) -> float:
    """Linear between measured points; beyond the last, proportional to x; before the first, the first."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1] * x / xs[-1]
    i = bisect.bisect_left(xs, x)
    f = (x - xs[i - 1]) / (xs[i] - xs[i - 1])
    return ys[i - 1] + f * (ys[i] - ys[i - 1])


class CostCurve:
    """Seconds per verification as a function of the number of nodes, linearly interpolated."""

    def __init__(self, widths: list[int], seconds: list[float]):
        pairs = sorted(zip(widths, seconds))
        self.widths = [w for w, _ in pairs]
        self.seconds = [s for _, s in pairs]

    def __call__(self, t: int) -> float:
        return interpolate(self.widths, self.seconds, t)

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

    def __init__(self, prior_strength: float = 4.0, chain_prior: float = 0.5):
        self.reached: dict[tuple, float] = {}
        self.hits: dict[tuple, float] = {}
        self.strength = prior_strength
        self.chain_prior = chain_prior

    @staticmethod
    def key(nodes: TreeNodes, i: int) -> tuple:
        src = nodes.source[i]
        if src.scored:  # score: the target's own probability for this guess
            return (src.name, True, score_bucket(nodes.score[i]))
        return (src.name, False, score_bucket(nodes.score[i]), min(nodes.depth[i], 4))  # score: chain confidence

    def prior(self, key: tuple) -> float:
        return (key[2] + 0.5) / 10 if key[1] else self.chain_prior

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
    """Per request: the acceptance estimates, and the pruning of each draft. `defer` (a request in a batch):
    the draft is not cut but ordered by value, each prefix worth `gains[k - 1]` expected tokens, and the batch
    decides one width for all its requests (goose.batch_decode), from the cost surface."""

    def __init__(self, cost: CostCurve, overhead_s: float = 0.0, defer: bool = False):
        self.cost = cost
        self.overhead_s = overhead_s
        self.defer = defer
        self.gains: list[float] = [1.0]
        self.reset()

    def spawn(self) -> AutoBudget:
        """The pruner of another request: the same hardware, nothing learned."""
        return AutoBudget(self.cost, self.overhead_s, self.defer)

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
        order = sorted(range(1, len(nodes)), key=lambda i: (-value[i], i))  # parents first: v falls down a path
        if self.defer:
            self.gains = [1.0]
            for i in order:
                self.gains.append(self.gains[-1] + value[i])
            return nodes.reordered([0, *order])
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


def cost_curve(engine: Engine, model: ModelIdentity, device: torch.device, dtype: torch.dtype) -> CostCurve:
    """The verification cost curve of this model on this machine, measured once and cached, keyed by
    the model's content, device, dtype, threads, backend, torch version and the engine's cost revision."""
    from goose.paths import cache_root

    where = device.type if device.type == "cpu" else torch.cuda.get_device_name(device).replace(" ", "_")
    key = (f"{model.label}-{model.fingerprint}-{where}-{str(dtype).replace('torch.', '')}"
           f"-threads{torch.get_num_threads()}-{engine.backend}-torch{torch.__version__}-v{COST_PROFILE_VERSION}.json")
    path = cache_root() / "profiles" / key
    if path.is_file():
        return CostCurve.load(path)
    print(f"[goose] measuring the verification cost curve once ({path})", flush=True)
    widths = list(DEFAULT_WIDTHS)
    curve = CostCurve(widths, measure_quietly(engine, widths))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(curve.to_json())
    return curve


BUSY_SPREAD = 1.25  # rounds of one measurement further apart than this: the machine was busy meanwhile


def round_spread(rounds: list[list[float]]) -> float:
    """How far apart the slowest and the fastest round are (1.0: alike). A round's factor is the median,
    over the widths, of its time over that width's median time, so a busy spell counts as much while the
    cheap widths ran as while the wide ones did."""
    import statistics

    medians = [statistics.median(t) for t in rounds]
    factors = [statistics.median(t[r] / m for t, m in zip(rounds, medians)) for r in range(len(rounds[0]))]
    return max(factors) / min(factors)


def measure_quietly(engine: Engine, widths: list[int], attempts: int = 3, repeats: int = 5) -> list[float]:
    """The cost curve, measured again while its rounds disagree (another process took the cores for part
    of it); after `attempts`, the calmest one is kept. The curve is cached for every later budget=auto
    run, so a busy spell must not be kept when it can be avoided."""
    import statistics

    tried = []
    for attempt in range(1, attempts + 1):
        rounds = engine.measure_rounds(widths, repeats=repeats)
        tried.append((round_spread(rounds), rounds))
        if tried[-1][0] <= BUSY_SPREAD:
            break
        again = "measuring again" if attempt < attempts else "keeping the calmest; delete the file to measure afresh"
        print(f"[goose] the machine was busy while measuring: rounds {tried[-1][0]:.2f}x apart; {again}",
              flush=True)
    rounds = min(tried, key=lambda x: x[0])[1]
    return [statistics.median(t) for t in rounds]
