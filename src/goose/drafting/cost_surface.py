"""The cost surface cost(requests, width): seconds of one batched verification of `requests` rows of `width` nodes
each (goose.engine.batched), measured once per model content, device, dtype, threads, backend, torch and engine
revision and cached beside the cost curve. budget=auto at concurrency > 1 picks, each step, every request's width
to maximise the batch's expected tokens per second (`choose_widths`); with one request it is the cost curve's
decision.
"""

from __future__ import annotations

import heapq
import statistics
import time

import torch

from goose.core.waits import about, progress_bar, verify_seconds
from goose.drafting.budget import (
    CostCurve,
    StoredProfile,
    cached_profile,
    calmest,
    interpolate,
    monotone,
    profile_key,
    round_spread,
    write_profile,
)
from goose.engine.backends import synchronize
from goose.engine.draft import Draft
from goose.paths import cache_root


class CostSurface(StoredProfile):
    """seconds[i][j]: `rows[i]` requests of `widths[j]` nodes each; interpolated in width, then in rows.
    `harvest_s`: seconds of a prompt's top-k (the output layer over its positions) per prompt token."""

    FIELDS = ("rows", "widths", "seconds", "harvest_s")

    def __init__(self, rows: list[int], widths: list[int], seconds: list[list[float]], harvest_s: float = 0.0):
        self.rows, self.widths, self.seconds = list(rows), list(widths), [list(s) for s in seconds]
        self.harvest_s = harvest_s

    def __call__(self, requests: int, width: int) -> float:
        per_rows = [interpolate(self.widths, s, width) for s in self.seconds]
        return interpolate(self.rows, per_rows, requests)

    def at(self, requests: int):
        """seconds(width) for `requests` rows: the surface interpolated in rows once."""
        seconds = [interpolate(self.rows, [s[j] for s in self.seconds], requests) for j in range(len(self.widths))]
        return lambda width: interpolate(self.widths, seconds, width)

    def curve(self, requests: int = 1):
        """The cost curve of `requests` rows (goose.drafting.budget.CostCurve)."""
        return CostCurve(self.widths, [self(requests, w) for w in self.widths])



# What drafting costs a request per step beside the forward (proposing, harvesting, the prompt's top-k spread
# over its steps), as a share of one request's one-node forward (what was measured: docs/results/concurrency.md,
# "A batch that stops drafting where no width pays"). At one request it is noise; at 16 a request's share of AR's
# forward is a sixteenth of it, and it decides whether drafting pays.
DRAFT_OVERHEAD = 0.02


# A packed forward (goose.engine.packed) computes every node once, but attention still reads the rows padded to the
# widest draft: a padding query costs a share of a node, more at longer contexts; the share measured in the bench's
# own steps is kept (docs/results/concurrency.md, "The previous full run", item 1).
PADDING_SHARE = 0.25


def packed_width(total: int, widest: int, requests: int) -> float:
    """The uniform width whose forward costs what a packed one of `total` nodes (the widest row `widest`) costs:
    the mean width, each padding query of the attention counted as PADDING_SHARE of a node."""
    return (total + PADDING_SHARE * (requests * widest - total)) / requests


def batch_cost(cost, widths: list[int]) -> float:
    """Seconds of a packed forward verifying widths[r] nodes of request r (`packed_width` on the surface)."""
    return cost(len(widths), packed_width(sum(widths), max(widths), len(widths)))


def choose_widths(gains: list[list[float]], cost, requests: int, overhead_s: float = 0.0) -> list[int]:
    """Per request r a width W_r (its first W_r nodes, root included) maximising the batch's expected tokens per
    second, sum_r gains_r(W_r) / (batch_cost(W) + requests * overhead_s if any W_r > 1): each row pays for the
    nodes it verifies (a packed forward), and drafting costs each request `overhead_s` a step (all W_r = 1 is a
    step that need not draft at all). gains_r[k - 1] is request r's expected tokens from its first k nodes.
    Greedy: nodes are added in order of the expected tokens they add, anywhere in the batch, and the best prefix
    of that order is kept (ties to fewer nodes); the search stops once the rate has fallen a fifth below the best
    (past the peak: the cost only grows)."""
    at = cost.at(requests) if hasattr(cost, "at") else (lambda w: cost(requests, w))
    widths = [1] * requests
    total, widest = requests, 1
    expected = sum(g[0] for g in gains)
    best, best_rate = list(widths), expected / at(1)
    heap = [(-(g[1] - g[0]), r) for r, g in enumerate(gains) if len(g) > 1]
    heapq.heapify(heap)
    while heap:
        neg, r = heapq.heappop(heap)
        expected -= neg
        widths[r] += 1
        total, widest = total + 1, max(widest, widths[r])
        g = gains[r]
        if widths[r] < len(g):
            heapq.heappush(heap, (-(g[widths[r]] - g[widths[r] - 1]), r))
        spent = at(packed_width(total, widest, requests)) + requests * overhead_s
        rate = expected / spent
        if rate > best_rate:
            best, best_rate = list(widths), rate
        elif rate < 0.8 * best_rate:
            break
    return best


# What a prompt's harvest (its top-k at every position, seeding an adjacency table) is worth in a batch. Its tau
# gain comes with the branch nodes it adds, which a batch pays for: alone a harvest pays, at concurrency 4 it did
# not; this share lies between the two (measured: docs/results/concurrency.md, the 2026-12-03 run; docs/concurrency.md).
HARVEST_SHARE = 0.01


def harvest_pays(cost: CostSurface, prompt_len: int, new_tokens: int, rows: int) -> bool:
    """Whether a request in a batch of `rows` should harvest its prompt: the output layer over every prompt position
    costs about what HARVEST_SHARE of the request's own share of its batch's forwards would (`new_tokens` AR steps
    of cost(rows, 1) / rows) or less. Alone a harvest is a few steps of 128 and pays; at 4 or 16 rows a request's
    share of a forward is a quarter or a sixteenth of it, while its prompt's top-k costs the same."""
    harvest = getattr(cost, "harvest_s", 0.0) * prompt_len
    return harvest <= HARVEST_SHARE * new_tokens * cost(rows, 1) / rows


class Calibration:
    """How far the drafters' expected extra tokens are from what the walks accept, over the batch so far: the
    tokens beyond the bonus the chosen prefixes gave, over those their gains promised (a prior of PRIOR_STEPS
    request-steps at 1). The per-prompt estimates learn on the nodes they keep, mostly shallow ones, and promise
    too much of a wide step, and a batch pays for every node it verifies, so `choose_widths` reads the
    gains scaled by this. It depends on the tokens only, so a run repeats exactly."""

    PRIOR_STEPS = 8

    def __init__(self):
        self.promised = self.given = float(self.PRIOR_STEPS)

    @property
    def factor(self) -> float:
        return self.given / self.promised

    def scaled(self, gains: list[float]) -> list[float]:
        f = self.factor
        return [1 + f * (g - 1) for g in gains]

    def observe(self, gains: list[float], width: int, accepted: int) -> None:
        """One request's step: its first `width` nodes promised gains[width - 1] tokens; the walk gave `accepted`
        (path length, root included: the bonus token is the root's)."""
        self.promised += max(gains[min(width, len(gains)) - 1] - 1, 0.0)
        self.given += max(accepted - 1, 0)


# Every width up to 8 is measured: a batch verifies few nodes per request, and on a CPU the cost is far from
# linear between 2 and 4 (docs/results/concurrency.md, "Every width measured").
# SURFACE_VERSION is part of a cached surface's name: raised when what is measured changes (3: widths timed
# as ratios to the one-node forward right before them; 4: rows packed, goose.engine.packed; 5: the prompt harvest;
# 6: node counts bucketed).
SURFACE_WIDTHS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 24, 32, 48, 64)
SURFACE_VERSION = 6


def surface_rows(concurrency: int) -> list[int]:
    """1, 2, 4, ... up to `concurrency`, and `concurrency` itself."""
    rows, n = [], 1
    while n < concurrency:
        rows.append(n)
        n *= 2
    return [*rows, concurrency]


@torch.inference_mode()
def measure_rounds(engine, rows: list[int], widths: list[int], context_len: int = 256, repeats: int = 3,
                   progress=None):
    """Per (rows, width) pair, one (seconds, seconds of the one-node forward timed right before it) per round;
    every pair takes its turn in every round (after a warm-up round). `engine` is a goose.engine.batched.BatchEngine
    with room for max(rows) requests; it is left empty.

    Why pairs: a machine's speed drifts within a minute while the ratio of a width to the one-node forward next to
    it holds, and budget=auto compares widths for the same rows, so the ratio is what must be right (measured:
    docs/results/concurrency.md, "The issue's command after a paired cost surface"). `progress()`, when given, is
    called after every timed forward (a progress bar's step)."""

    vocab = engine.model.config.get_text_config(decoder=True).vocab_size
    g = torch.Generator().manual_seed(0)
    for _ in range(max(rows)):
        engine.admit(torch.randint(0, vocab, (context_len,), generator=g).tolist())
    drafts = {w: [Draft.chain(torch.randint(0, vocab, (w,), generator=g).tolist()) for _ in range(max(rows))]
              for w in {1, *widths}}
    times: dict[tuple[int, int], list[tuple[float, float]]] = {(n, w): [] for n in rows for w in widths}
    full = list(engine.lengths)

    def timed(n: int, w: int) -> float:
        engine.rewind(full[:n])
        synchronize(engine.device)
        t0 = time.perf_counter()
        engine.verify(drafts[w][:n])
        synchronize(engine.device)
        took = time.perf_counter() - t0
        if progress is not None:
            progress()
        return took

    for _ in range(repeats + 1):
        for n in rows:
            for w in widths:
                one = timed(n, 1)
                times[(n, w)].append((timed(n, w) if w != 1 else one, one))
        engine.rewind(full)
    while engine.active:
        engine.release(engine.active - 1)
    return {p: t[1:] for p, t in times.items()}


@torch.inference_mode()
def measure_harvest(engine, context_len: int = 256, repeats: int = 5, topk: int = 10) -> float:
    """The prompt harvest's seconds over a one-row one-node forward timed right before it (median of `repeats`
    pairs): a prompt of `context_len` random tokens, its top-`topk` at every position. `engine` is left empty."""

    vocab = engine.model.config.get_text_config(decoder=True).vocab_size
    g = torch.Generator().manual_seed(1)
    ratios = []
    for _ in range(repeats + 1):
        _, pre = engine.admit(torch.randint(0, vocab, (context_len,), generator=g).tolist(), topk=topk)
        synchronize(engine.device)
        t0 = time.perf_counter()
        engine.verify([Draft([pre.bonus], [-1])])
        synchronize(engine.device)
        t1 = time.perf_counter()
        pre.topk_later()
        synchronize(engine.device)
        ratios.append((time.perf_counter() - t1) / (t1 - t0))
        engine.release(0)
    return statistics.median(ratios[1:])


def surface_from_rounds(rounds: dict, rows: list[int], widths: list[int]) -> CostSurface:
    """seconds(n, w) = the median one-node forward of n rows x the median ratio of w nodes to the one-node
    forward timed next to it, made non-decreasing in w (and never below the one-node forward)."""
    seconds = []
    for n in rows:
        one = statistics.median(o for w in widths for _, o in rounds[(n, w)])
        ratios = monotone([max(1.0, statistics.median(t / o for t, o in rounds[(n, w)])) for w in widths])
        seconds.append([one * r for r in ratios])
    return CostSurface(rows, widths, seconds)


def cost_surface(engine, model, device: torch.device, dtype: torch.dtype, concurrency: int,
                 attempts: int = 3, repeats: int = 5) -> CostSurface:
    """The cost surface of this model on this machine up to `concurrency` requests, measured once and cached
    (keyed as goose.drafting.budget.cost_curve, plus the rows measured)."""
    rows = surface_rows(concurrency)
    name = f"{profile_key(engine, model, device, dtype)}-surface{SURFACE_VERSION}-rows{'-'.join(map(str, rows))}.json"
    cached = cached_profile(name)
    if cached is not None:
        return CostSurface.load(cached)
    path = cache_root() / "profiles" / name
    widths = list(SURFACE_WIDTHS)
    forwards = [nodes for n in rows for w in widths for nodes in ([n] if w == 1 else [n, n * w])]  # one round's
    each = [verify_seconds(engine, nodes) for nodes in forwards]  # a batch of n rows of w nodes as n * w nodes
    per_round = len(forwards)
    estimate = None if None in each else sum(each) * (repeats + 1)
    print(f"[goose] budget=auto in a batch measures this model's batched verification cost on this machine once "
          f"(cached for every later run): {per_round * (repeats + 1)} timed forwards ({rows} requests x {widths} nodes "
          f"x {repeats + 1} rounds), {about(estimate)}; {path}", flush=True)
    with progress_bar(per_round * (repeats + 1), "cost surface") as bar:
        rounds = calmest(lambda progress: measure_rounds(engine, rows, widths, repeats=repeats, progress=progress),
                         lambda r: round_spread([[t / o for t, o in pairs] for pairs in r.values()]), attempts, bar,
                         per_round * (repeats + 1), estimate)
    surface = surface_from_rounds(rounds, rows, widths)
    surface.harvest_s = measure_harvest(engine) * surface(1, 1) / 256
    write_profile(path, surface.to_json())
    return surface
