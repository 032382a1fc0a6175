"""Timed batches: a method's requests decoded `concurrency` at a time, against batched AR over the same requests
at the same concurrency, timed in the same process back to back (who goes first alternates), `repeats` times.
A batch's speedup is its throughput over batched AR's: AR's wall time over the method's, for the same tokens.
Each request's row carries its share of its batch's wall time (by tokens), so pooling rows pools batches.
"""

from __future__ import annotations

import statistics
import time

from goose.drafting.contract import Drafter, autoregressive
from goose.engine.batched import BatchEngine
from goose.engine.sampling import Sampling
from goose.running.batch_loop import Request, Served, decode_batch


class BatchTimer:
    def __init__(self, engine: BatchEngine, stops: frozenset[int], repeats: int, mode: str,
                 sampling: Sampling | None, cost=None, trace: bool = False):
        self.engine, self.stops, self.repeats, self.mode = engine, stops, repeats, mode
        self.sampling, self.cost, self.trace = sampling, cost, trace

    def _pass(self, items: list[tuple[list[int], int]], make) -> tuple[list[Served], float, list[Drafter]]:
        drafters = [make() for _ in items]
        if self.trace:
            for d in drafters:
                if d.capabilities.trace:
                    d.enable_trace()
        gens, wall = decode_batch(self.engine, [Request(ids, d, n) for (ids, n), d in zip(items, drafters)],
                                  self.stops, self.sampling, self.cost)
        return gens, wall, drafters

    def measure(self, items: list[tuple[list[int], int]], template: Drafter, turn: int = 0) -> dict:
        """Every request of `items` ((prompt ids, new-token limit), admitted in this order) decoded by drafters
        spawned from `template`; returns the method's generations (of the last repeat, each wall_s its share of
        the batch's mean wall time), the batch's mean wall time and tokens, batched AR's (when timed), and the
        drafters of the last repeat (their traces)."""
        saved = template.save_memory() if template.capabilities.memory else None
        method_walls, ar_walls, gens, ar_gens, drafters = [], [], [], None, []
        own = autoregressive(template)
        timed_ar = self.mode == "interleaved" and not own
        for r in range(self.repeats):
            ar_first = (turn + r) % 2 == 0
            for which in (("ar", "method") if ar_first else ("method", "ar")):
                if which == "method":
                    if r and saved is not None:  # every repeat starts from the state the batch found
                        template.restore_memory(saved)
                    gens, wall, drafters = self._pass(items, template.spawn)
                    method_walls.append(wall)
                elif timed_ar:
                    ar_gens, wall, _ = self._pass(items, Drafter)
                    ar_walls.append(wall)
        wall = statistics.fmean(method_walls)
        tokens = sum(len(g.tokens) for g in gens)
        for g in gens:
            g.wall_s = wall * len(g.tokens) / tokens
            g.wall_s_std = round(statistics.pstdev(method_walls), 6) * len(g.tokens) / tokens if len(method_walls) > 1 \
                else 0.0
        out = {"gens": gens, "pass_wall_s": wall, "pass_tokens": tokens, "drafters": drafters}
        if own:
            out.update(ar_pass_wall_s=wall, ar_tokens=tokens)
        elif ar_walls:
            out.update(ar_pass_wall_s=statistics.fmean(ar_walls), ar_tokens=sum(len(g.tokens) for g in ar_gens),
                       ar_gens=ar_gens)
        return out

    def ar_timing(self, measured: dict, i: int, cond: dict) -> dict | None:
        """The AR timing request i's row divides by: its share of batched AR's wall time, with where and how."""
        if "ar_pass_wall_s" not in measured:
            return None
        gens = measured.get("ar_gens") or measured["gens"]
        share = measured["ar_pass_wall_s"] * len(gens[i].tokens) / measured["ar_tokens"]
        return {"wall_s": share, "tokens_per_s": measured["ar_tokens"] / measured["ar_pass_wall_s"],
                "repeats": self.repeats, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **cond}
