"""Hardware-aware budget (`budget=auto`): how many draft nodes are worth verifying this step.

Two inputs: the target's verification cost curve cost(T) on this machine (measured once,
cached), and each drafted node's chance of being accepted once its parent was, estimated online
from what the walk actually accepted, with a Beta prior (`AcceptanceModel`). A node is
worth v = v(parent) * q(node); the best draft of b nodes is the b most valuable ones (an
ancestor-closed set, since v never grows down a path), and b is chosen to maximise
(1 + sum of v) / cost(b): expected tokens per second. With nothing being accepted, b -> 1 (AR).
"""

from __future__ import annotations

import bisect
import glob
import json
import math
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from goose.core.waits import about, progress_bar, verify_seconds
from goose.drafting.tree import TreeNodes
from goose.engine.backends import device_name
from goose.errors import GooseError
from goose.paths import cache_root

if TYPE_CHECKING:
    from goose.core.identity import ModelIdentity
    from goose.engine.single import Engine

DEFAULT_WIDTHS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128)
# Under budget=auto a drafter builds its tree at this budget, then prunes it. Wider than any fixed budget pays
# on a CPU, so a long copied run is there to keep when it holds (measured: docs/results/speed.md, "Built wider
# before pruning").
AUTO_BUILD_NODES = 128
# Part of a cached cost profile's name: raised whenever the engine or a backend changes what a forward costs
# (2: the in-place KV cache and prepacked's grouped-head attention), so no curve of older code is reused.
COST_PROFILE_VERSION = 2
# Contexts the curve is measured after: attention over a longer prefix makes every node dearer (by how much:
# docs/results/speed.md, "Numbers behind constants"), so a long answer's pruner reads its own context's curve.
CURVE_CONTEXTS = (256, 1024)
CURVE_REPEATS = 5  # timed rounds per context, after one warm-up round


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


class StoredProfile:
    """A measured profile that round-trips through its JSON file: `FIELDS` are both its constructor's parameters and
    its attributes (a field a file lacks takes the constructor's default)."""

    FIELDS: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({f: getattr(self, f) for f in self.FIELDS})

    @classmethod
    def load(cls, path: Path):
        d = json.loads(Path(path).read_text())
        return cls(**{f: d[f] for f in cls.FIELDS if f in d})


class CostCurve(StoredProfile):
    """Seconds per verification as a function of the number of nodes, linearly interpolated; `seconds` after
    the first of `contexts` tokens of prefix. Measured after several contexts (`by_context`, one row of seconds
    per context), cost(t, context) is also linear in the context between them, and beyond the last continues
    the last two's slope (attention grows linearly with the prefix); before the first, the first."""

    FIELDS = ("widths", "seconds", "contexts", "by_context")

    def __init__(self, widths: list[int], seconds: list[float], contexts: list[int] | None = None,
                 by_context: list[list[float]] | None = None):
        order = sorted(range(len(widths)), key=lambda i: widths[i])
        self.widths = [widths[i] for i in order]
        self.seconds = [seconds[i] for i in order]
        self.contexts = list(contexts or [CURVE_CONTEXTS[0]])
        self.by_context = [[row[i] for i in order] for row in by_context] if by_context else [self.seconds]

    def __call__(self, t: int, context: int | None = None) -> float:
        if context is None or len(self.contexts) == 1 or context <= self.contexts[0]:
            return interpolate(self.widths, self.seconds, t)
        at = [interpolate(self.widths, row, t) for row in self.by_context]
        c = self.contexts
        i = min(bisect.bisect_left(c, context), len(c) - 1)  # the segment [c[i-1], c[i]], or the last one
        return at[i - 1] + (at[i] - at[i - 1]) * (context - c[i - 1]) / (c[i] - c[i - 1])


def score_bucket(score: float) -> int:
    return min(9, int(score * 10))


HELD_EDGES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)  # buckets of how long a copied span has held


def held_bucket(held: int) -> int:
    return max(0, bisect.bisect_right(HELD_EDGES, held) - 1)


class AcceptanceModel:
    """Online P(node accepted | its parent was), per source and what is known when the node is drafted.

    - An adjacency guess (a scored source): by its score, the target's own probability (prior: the bucket's
      middle).
    - A copied chain node: by its chain score and how long the span it continues has held (the match before
      the chain plus the chain above the node; its depth when the drafter does not say), in buckets doubling
      in width. The longer a copy has held, the likelier it holds once more: the prior is Laplace's rule of
      succession, (h + 1) / (h + 2) after h tokens (what SmolLM2's spine accepted per depth: docs/results/speed.md,
      "At the paper's lengths the pruner matters more"), so deep nodes are not judged by shallow ones' evidence.
    - Exploration: a source judged on a few early rejections must not be locked out for the rest of the
      prompt, yet once pruned it gathers no more evidence. So evidence fades by DECAY for every verified step
      in which its key went unobserved: a pruned source's estimate drifts back to its prior until it is tried
      again, sooner after little evidence than after much (deterministic: a row still depends on its prompt
      only). A key observed step after step keeps all its evidence.
    """

    DECAY = 0.9

    def __init__(self, prior_strength: float = 4.0):
        self.reached: dict[tuple, float] = {}
        self.hits: dict[tuple, float] = {}
        self.last: dict[tuple, int] = {}  # the step each key's counts were last brought up to date
        self.strength = prior_strength
        self.steps = 0

    @staticmethod
    def key(nodes: TreeNodes, i: int) -> tuple:
        src = nodes.source[i]
        if src.scored:  # score: the target's own probability for this guess
            return (src.name, True, score_bucket(nodes.score[i]))
        held = nodes.held[i] or nodes.depth[i]
        return (src.name, False, score_bucket(nodes.score[i]), held_bucket(held))  # score: chain confidence

    def prior(self, key: tuple) -> float:
        if key[1]:
            return (key[2] + 0.5) / 10
        h = HELD_EDGES[key[3]]
        return (h + 1) / (h + 2)

    def _faded(self, key: tuple) -> float:
        """What is left of the key's evidence: DECAY per step since it was last observed."""
        return self.DECAY ** (self.steps - self.last.get(key, self.steps))

    def q(self, key: tuple) -> float:
        f = self._faded(key)
        n = self.reached.get(key, 0.0) * f
        a = self.hits.get(key, 0.0) * f
        return (a + self.strength * self.prior(key)) / (n + self.strength)

    def observe(self, nodes: TreeNodes, path: list[int]) -> None:
        on_path = set(path)
        seen: set[tuple] = set()
        for i in range(1, len(nodes)):
            if nodes.parents[i] in on_path:
                k = self.key(nodes, i)
                f = 1.0 if k in seen else self._faded(k)
                seen.add(k)
                self.reached[k] = self.reached.get(k, 0.0) * f + 1
                self.hits[k] = self.hits.get(k, 0.0) * f + (i in on_path)
        self.steps += 1
        for k in seen:
            self.last[k] = self.steps


class AutoBudget:
    """Per request: the acceptance estimates, and the pruning of each draft. `defer` (a request in a batch):
    the draft is not cut but ordered by value, each prefix worth `gains[k - 1]` expected tokens, and the batch
    decides every request's width (goose.running.batch_loop), from the cost surface."""

    def __init__(self, cost: CostCurve, overhead_s: float = 0.0, defer: bool = False):
        self.cost = cost
        self.overhead_s = overhead_s
        self.defer = defer
        self.gains: list[float] = [1.0]
        self.context_len: int | None = None  # the request's context, kept up to date by its drafter
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
            self.gains = [1.0]  # a bare root promises its bonus token alone, never the last tree's gains
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
        keep = self.choose(nodes, order, value)
        self.chosen.append(len(keep))
        return nodes if len(keep) == len(nodes) else nodes.subset(keep)

    def choose(self, nodes: TreeNodes, order: list[int], value: list[float]) -> list[int]:
        """Which of `nodes` to verify, sorted: the root and the first b - 1 of `order` (by value, parents
        first), b maximising expected tokens per second."""
        ctx = self.context_len
        best_b, best_rate, gain = 1, 1.0 / (self.cost(1, ctx) + self.overhead_s), 1.0
        for b, i in enumerate(order, start=2):
            gain += value[i]
            rate = gain / (self.cost(b, ctx) + self.overhead_s)
            if rate > best_rate:
                best_b, best_rate = b, rate
        return sorted([0, *order[: best_b - 1]])

    def observe(self, nodes: TreeNodes, path: list[int]) -> None:
        self.model.observe(nodes, path)

    def stats(self) -> dict:
        c = self.chosen
        return {"auto_budget_mean": round(sum(c) / len(c), 2) if c else math.nan,
                "auto_budget_max": max(c) if c else 0}


def profile_key(engine: Engine, model: ModelIdentity, device: torch.device, dtype: torch.dtype) -> str:
    """What a measured cost depends on, as a file name's stem: the model's content (its fingerprint, never its
    name: the same weights under another file name read the same curve), the device (the CPU's model and kernel
    instruction set, or the GPU's name), dtype, threads, backend, torch version and the engine's cost revision."""
    where = re.sub(r"[^A-Za-z0-9.]+", "_", device_name(device)).strip("_")
    return (f"{model.fingerprint}-{where}-{str(dtype).replace('torch.', '')}"
            f"-threads{torch.get_num_threads()}-{engine.backend}-torch{torch.__version__}-v{COST_PROFILE_VERSION}")


def cached_profile(name: str) -> Path | None:
    """The cached profile `name` (a cost curve's or surface's file under the cache's profiles/), or None. A file of
    the older name, which began with the model's label (`<label>-<name>`, so a model under another file name was
    measured again), is taken over under `name` (copied; the old file is left, never read again)."""
    folder = cache_root() / "profiles"
    path = folder / name
    if path.is_file():
        return path
    for old in sorted(folder.glob(f"*-{glob.escape(name)}")) if folder.is_dir() else []:
        try:
            text = old.read_text()
            json.loads(text)
        except (OSError, ValueError):
            continue
        write_profile(path, text)
        return path
    return None


def write_profile(path: Path, text: str) -> None:
    """A profile written whole or not at all (a run beside this one may read it meanwhile)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.write_text(text)
    os.replace(part, path)


def cost_curve(engine: Engine, model: ModelIdentity, device: torch.device, dtype: torch.dtype) -> CostCurve:
    """The verification cost curve of this model on this machine, after each of CURVE_CONTEXTS tokens, measured
    once and cached, keyed by the model's content, device, dtype, threads, backend, torch version, the engine's
    cost revision and the contexts (`profile_key`). Before measuring it says what it measures and about how long
    that takes, and shows a progress bar over the timed forwards."""
    room = getattr(engine, "max_positions", None)  # a model of short context: the widths and contexts that fit
    widths = [w for w in DEFAULT_WIDTHS if room is None or 2 * w <= room] or [1]
    contexts = [c for c in CURVE_CONTEXTS if room is None or c + widths[-1] <= room] or [room - widths[-1]]
    name = f"{profile_key(engine, model, device, dtype)}-ctx{'-'.join(map(str, contexts))}.json"
    cached = cached_profile(name)
    if cached is not None:
        return CostCurve.load(cached)
    path = cache_root() / "profiles" / name
    rounds = CURVE_REPEATS + 1
    steps = len(contexts) * rounds * len(widths)
    each = [verify_seconds(engine, n, c) for c in contexts for n in (c, *[w for w in widths for _ in range(rounds)])]
    estimate = None if None in each else sum(each)
    print(f"[goose] budget=auto measures this model's verification cost on this machine once (cached for every later "
          f"run): {steps} timed forwards ({len(widths)} node counts x {rounds} rounds x {len(contexts)} context(s)), "
          f"{about(estimate)}; {path}", flush=True)
    with progress_bar(steps, "cost curve") as bar:
        rows = [measure_quietly(engine, widths, repeats=CURVE_REPEATS, context_len=c, bar=bar,
                                estimate=None if estimate is None else estimate / len(contexts)) for c in contexts]
    curve = CostCurve(widths, rows[0], contexts, rows)
    write_profile(path, curve.to_json())
    return curve


BUSY_SPREAD = 1.25  # rounds of one measurement further apart than this: the machine was busy meanwhile


def round_spread(rounds: list[list[float]]) -> float:
    """How far apart the slowest and the fastest round are (1.0: alike). A round's factor is the median,
    over the widths, of its time over that width's median time, so a busy spell counts as much while the
    cheap widths ran as while the wide ones did."""
    medians = [statistics.median(t) for t in rounds]
    factors = [statistics.median(t[r] / m for t, m in zip(rounds, medians)) for r in range(len(rounds[0]))]
    return max(factors) / min(factors)


def monotone(values: list[float]) -> list[float]:
    """The non-decreasing sequence closest to `values` in squared error (pooling adjacent violators): more nodes
    never cost less, and a noisy time below its neighbour's would make a wider tree look free."""
    blocks: list[list[float]] = []  # [mean, count]
    for v in values:
        blocks.append([v, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m2, c2), (m1, c1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    return [m for m, c in blocks for _ in range(int(c))]


def say(bar, line: str) -> None:
    """A line above the progress bar (or plain, without one)."""
    if bar is None:
        print(line, flush=True)
    else:
        bar.write(line, file=sys.stdout)
        sys.stdout.flush()


def calmest(measure, spread_of, attempts: int = 3, bar=None, steps: int = 0, estimate: float | None = None):
    """`measure(progress)` again while its rounds disagree (`spread_of(result)` > BUSY_SPREAD: another process took
    the cores for part of it), at most `attempts` times; the calmest result. A profile is cached for every later
    budget=auto run, so a busy spell must not be kept when it can be avoided. Each busy attempt is said, and grows
    the bar's total by `steps` (one attempt's timed forwards); an attempt over twice `estimate` (seconds on an idle
    machine) says how much slower it ran, kept or not: evenly shared cores keep the ratios budget=auto reads, but
    the user learns where the wait went and how to measure afresh."""
    tried = []
    for attempt in range(1, attempts + 1):
        started = time.perf_counter()
        result = measure(bar.update if bar is not None else None)
        took = time.perf_counter() - started
        spread = spread_of(result)
        tried.append((spread, result))
        slow = estimate and took > 2 * estimate
        slower = f"{took / estimate:.0f}x slower than estimated (other processes share the cores)" if slow else ""
        if spread <= BUSY_SPREAD:
            if slow:
                say(bar, f"[goose] measured {slower}; its rounds agree, so it is kept; delete the file to measure "
                         "afresh on an idle machine")
            break
        again = "measuring again" if attempt < attempts else "keeping the calmest; delete the file to measure afresh"
        say(bar, f"[goose] the machine was busy while measuring: rounds {spread:.2f}x apart"
                 f"{', ' + slower if slow else ''}; {again}")
        if bar is not None and attempt < attempts:
            bar.total += steps
            bar.refresh()
    return min(tried, key=lambda x: x[0])[1]


def measure_quietly(engine: Engine, widths: list[int], attempts: int = 3, repeats: int = CURVE_REPEATS,
                    context_len: int = CURVE_CONTEXTS[0], bar=None, estimate: float | None = None) -> list[float]:
    """The cost curve after `context_len` tokens: the median of each width's rounds, measured until the rounds agree
    (`calmest`), made non-decreasing in the width (`monotone`). `bar`: a progress bar (`progress_bar`) that counts
    every timed forward; `estimate`: seconds one measurement takes on an idle machine."""
    def measure(progress):
        counted = {"progress": progress} if progress is not None else {}
        return engine.measure_rounds(widths, context_len=context_len, repeats=repeats, **counted)

    rounds = calmest(measure, round_spread, attempts, bar, (repeats + 1) * len(widths), estimate)
    return monotone([statistics.median(t) for t in rounds])
