"""Timed generations and honest speedups.

`speedup_reference` says where a row's AR timing comes from:
- `interleaved` (default): AR and the method run in this process, on the same prompt, back
  to back (which goes first alternates), `repeats` times each. Doubles a sweep's cost.
- `cached`: an AR timing from the store, only if it was taken by this sweep (one Hydra
  multirun) on this host with the same threads, torch, backend and device; else AR is timed
  afresh and stored.
- `none`: no timing of AR; tau only (AR still runs once, untimed, if no reference tokens exist).
Every timing records when, where and how it was taken.

At concurrency N > 1 (`BatchTimer`) a method's requests are decoded N at a time against batched AR over the same
requests at the same concurrency, the two batches back to back; a batch's speedup is its throughput over batched
AR's, and each request's row carries its share of its batch's wall time (by tokens), so pooling rows pools
batches. Both timers share who goes first (`alternating`) and where each repeat starts (`from_saved_memory`).
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import torch

from goose.core.fingerprints import digest
from goose.drafting.contract import Drafter
from goose.engine.backends import device_name
from goose.engine.batched import BatchEngine
from goose.engine.sampling import Sampling
from goose.running.batch_loop import Request, Served, decode_batch
from goose.running.loop import Generation, generate
from goose.storage.metrics import SAME_CONDITIONS
from goose.storage.result_files import ReferenceStore, TimingStore

if TYPE_CHECKING:
    from goose.storage.run_folder import RunIdentity

MODES = ("interleaved", "cached", "none")
T = TypeVar("T")


def conditions(device: torch.device, backend: str, sweep_id: str) -> dict:
    """Where and how a timing is taken; rows and stored AR timings carry these."""
    return {"host": socket.gethostname(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "backend": backend, "device_name": device_name(device), "sweep_id": sweep_id}


def combine(gens: list[Generation]) -> Generation:
    """Repeats of one generation (identical tokens): wall time and time to first token = means, its std kept."""
    walls = [g.wall_s for g in gens]
    gen = gens[-1]
    gen.wall_s = sum(walls) / len(walls)
    gen.first_token_s = sum(g.first_token_s for g in gens) / len(gens)
    gen.wall_s_std = round(statistics.pstdev(walls), 6) if len(walls) > 1 else 0.0
    return gen


def stamp(gen: Generation, repeats: int, cond: dict) -> dict:
    return {"wall_s": gen.wall_s, "wall_s_std": gen.wall_s_std, "tokens": len(gen.tokens),
            "tokens_per_s": gen.tokens_per_s, "repeats": repeats, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "pid": os.getpid(), **cond}


def reference_entry(gen: Generation) -> dict:
    """What the reference store keeps of AR's generation: its tokens and, per token, the margin of the row that
    chose it, the best other tokens there and the gaps to them (what tells a numerics difference from a bug,
    goose.storage.equality)."""
    return {"tokens": gen.tokens, "margins": [round(m, 7) for m in gen.margins], "runners_up": gen.runners_up,
            "gaps": [[round(g, 7) for g in row] for row in gen.gaps]}


@dataclass
class Measured:
    gen: Generation  # the method's generation (the last repeat's tokens and stats, mean wall time)
    reference: dict | None  # AR's tokens, margins and runners-up (from this run or the reference store)
    ar_timing: dict | None  # the AR timing the speedup divides by
    source: str  # interleaved | cached | self | none
    key: str  # the reference key both were stored under
    batch: dict | None = None  # concurrency > 1: pass_wall_s, pass_tokens, ar_pass_wall_s


def alternating(repeats: int, turn: int, method: Callable[[], T],
                ar: Callable[[], T] | None) -> tuple[list[T], list[T]]:
    """`repeats` runs of the method and of AR (None: the method alone) back to back, who goes first alternating
    with the repeat and with `turn` (so neither always runs on a warmer machine); returns (method's, AR's)."""
    mine, ars = [], []
    for r in range(repeats):
        if ar is not None and (turn + r) % 2 == 0:
            ars.append(ar())
            mine.append(method())
        else:
            mine.append(method())
            if ar is not None:
                ars.append(ar())
    return mine, ars


def from_saved_memory(drafter: Drafter, run: Callable[[], T]) -> Callable[[], T]:
    """`run` for timed repeats: under memory=run every call after the first starts from the state the first found
    (never from its own earlier answer), and the last leaves the state a single run would: repeats measure the
    same work. The state is saved now."""
    saved = drafter.save_memory() if drafter.capabilities.memory else None
    calls = 0

    def again() -> T:
        nonlocal calls
        if calls and saved is not None:
            drafter.restore_memory(saved)
        calls += 1
        return run()

    return again


class Timer:
    """Times one method against AR per prompt, under the spec's `speedup_reference` mode."""

    def __init__(self, engine, spec, stops: frozenset[int], cond: dict, refs: ReferenceStore, timings: TimingStore):
        self.engine, self.stops, self.repeats, self.mode = engine, stops, spec.repeats, spec.speedup_reference
        self.cond, self.refs, self.timings, self.trace = cond, refs, timings, spec.trace
        self.sampling = spec.sampling  # AR, the reference, samples with the method's settings and seed
        self.stop_at_loop = spec.stop_at_loop
        self.ar = Drafter()

    def _gen(self, ids: list[int], drafter: Drafter, n: int) -> Generation:
        if self.trace and drafter.capabilities.trace:
            drafter.enable_trace()  # keep the last repeat's steps only
        return generate(self.engine, ids, drafter, n, self.stops, self.sampling, self.stop_at_loop)

    def _repeated(self, ids: list[int], drafter: Drafter, n: int) -> Generation:
        return combine([self._gen(ids, drafter, n) for _ in range(self.repeats)])

    def _store(self, key: str, ar: Generation) -> dict:
        timing = stamp(ar, self.repeats, self.cond)
        self.timings.add(key, timing)
        if self.refs.get(key) != reference_entry(ar):
            self.refs.put(key, reference_entry(ar))
        return timing

    def _cached_timing(self, key: str) -> dict | None:
        keys = (*SAME_CONDITIONS, "sweep_id")
        found = [t for t in self.timings.all(key)
                 if t.get("repeats") == self.repeats and all(str(t.get(k)) == str(self.cond[k]) for k in keys)]
        return found[-1] if found else None

    def measure(self, ids: list[int], drafter: Drafter, key: str, turn: int, n: int) -> Measured:
        """`turn` alternates who goes first under `interleaved`; `n`: new tokens for this prompt (max_new_tokens,
        or fewer where the model's context ends first: the same for AR, and in `key`)."""
        if drafter.capabilities.autoregressive:
            gen = self._repeated(ids, drafter, n)
            return Measured(gen, reference_entry(gen), self._store(key, gen), "self", key)
        method = from_saved_memory(drafter, lambda: self._gen(ids, drafter, n))
        if self.mode == "interleaved":
            gens, ars = alternating(self.repeats, turn, method, lambda: self._gen(ids, self.ar, n))
            ar = combine(ars)
            return Measured(combine(gens), reference_entry(ar), self._store(key, ar), "interleaved", key)
        if self.mode == "cached":
            timing = self._cached_timing(key)
            ref = self.refs.get(key)
            if timing is None or ref is None:
                ar = self._repeated(ids, self.ar, n)
                timing, ref = self._store(key, ar), reference_entry(ar)
            gen = combine([method() for _ in range(self.repeats)])
            return Measured(gen, ref, timing, "cached", key)
        ref = self.refs.get(key)
        if ref is None:  # tau needs no timing, but losslessness needs AR's tokens
            ref = reference_entry(self._gen(ids, self.ar, n))
            self.refs.put(key, ref)
        gen = combine([method() for _ in range(self.repeats)])
        return Measured(gen, ref, None, "none", key)


@dataclass
class Pass:
    """One batch decoded: every request's generation (in the requests' order), its wall time, the drafters."""

    gens: list[Served]
    wall_s: float
    drafters: list[Drafter]


@dataclass
class BatchMeasurement:
    """A method's batch timed `repeats` times (against batched AR where `source` is interleaved): the last
    repeat's generations and drafters (their traces), each gen's wall_s its share of the mean pass by tokens."""

    gens: list[Served]
    drafters: list[Drafter]
    wall_s: float  # the method's pass, mean over repeats
    tokens: int
    repeats: int
    source: str  # self (AR is the method: its own pass is AR's timing) | interleaved (batched AR beside it) | none
    ar_wall_s: float | None = None  # batched AR's pass, mean over repeats
    ar_tokens: list[int] | None = None  # per request, the tokens of the AR pass that wall time is shared by

    def ar_timing(self, i: int, cond: dict) -> dict | None:
        """The AR timing request i's row divides by: its share of batched AR's wall time, with where and how."""
        if self.ar_wall_s is None:
            return None
        total = sum(self.ar_tokens)
        return {"wall_s": self.ar_wall_s * self.ar_tokens[i] / total, "tokens_per_s": total / self.ar_wall_s,
                "repeats": self.repeats, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **cond}

    def measured(self, i: int, reference: dict, key: str, cond: dict) -> Measured:
        """Request i's measurement, as a row takes it (its batch's columns blank where AR was not timed)."""
        batch = {"pass_wall_s": self.wall_s, "pass_tokens": self.tokens,
                 "ar_pass_wall_s": "" if self.ar_wall_s is None else self.ar_wall_s}
        return Measured(self.gens[i], reference, self.ar_timing(i, cond), self.source, key, batch)


class BatchTimer:
    """Times a method's batches against batched AR over the same requests at the same concurrency."""

    def __init__(self, engine: BatchEngine, stops: frozenset[int], repeats: int, mode: str,
                 sampling: Sampling | None, cost=None, trace: bool = False, stop_at_loop: bool = False):
        self.engine, self.stops, self.repeats, self.mode = engine, stops, repeats, mode
        self.sampling, self.cost, self.trace, self.stop_at_loop = sampling, cost, trace, stop_at_loop

    def decode(self, items: list[tuple[list[int], int]], make: Callable[[], Drafter]) -> Pass:
        """One batch of `items` ((prompt ids, new-token limit), admitted in this order), a drafter from `make`
        for each: a timed repeat's pass, or a warmup's."""
        drafters = [make() for _ in items]
        if self.trace:
            for d in drafters:
                if d.capabilities.trace:
                    d.enable_trace()
        gens, wall = decode_batch(self.engine, [Request(ids, d, n) for (ids, n), d in zip(items, drafters)],
                                  self.stops, self.sampling, self.cost, self.stop_at_loop)
        return Pass(gens, wall, drafters)

    def measure(self, items: list[tuple[list[int], int]], template: Drafter, turn: int = 0) -> BatchMeasurement:
        """Every request of `items` decoded by drafters spawned from `template`, `repeats` times, beside batched
        AR under `interleaved` (`turn` alternates who goes first)."""
        own = template.capabilities.autoregressive
        timed_ar = self.mode == "interleaved" and not own
        method = from_saved_memory(template, lambda: self.decode(items, template.spawn))
        passes, ars = alternating(self.repeats, turn, method, (lambda: self.decode(items, Drafter)) if timed_ar
                                  else None)
        walls = [p.wall_s for p in passes]
        gens, wall = passes[-1].gens, statistics.fmean(walls)
        tokens = sum(len(g.tokens) for g in gens)
        for g in gens:
            g.wall_s = wall * len(g.tokens) / tokens
            g.wall_s_std = round(statistics.pstdev(walls), 6) * len(g.tokens) / tokens if len(walls) > 1 else 0.0
        if own:  # AR's rows: its own pass is the timing
            source, ar_wall, ar_tokens = "self", wall, [len(g.tokens) for g in gens]
        elif ars:
            source, ar_wall = "interleaved", statistics.fmean(p.wall_s for p in ars)
            ar_tokens = [len(g.tokens) for g in ars[-1].gens]
        else:
            source, ar_wall, ar_tokens = "none", None, None
        return BatchMeasurement(gens, passes[-1].drafters, wall, tokens, self.repeats, source, ar_wall, ar_tokens)


def reference_key(spec, ident: RunIdentity, ids: list[int], stops: frozenset[int], env: dict, n: int) -> str:
    """Everything that decides AR's tokens for this input (goose.running.spec marks the settings: reference=True) and
    the conditions its timing is compared under; `n` is this prompt's new-token limit."""
    return digest({**spec.settings("reference"), "max_new_tokens": n, "model": ident.model.fingerprint,
                   "prompt": list(ids), "device_name": env["device_name"], "threads": ident.conditions["threads"],
                   "stops": sorted(stops), "torch": env["torch"], "transformers": env["transformers"],
                   **spec.sampling.noise_key()}, 24)
