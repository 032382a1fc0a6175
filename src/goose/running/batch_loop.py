"""Continuous batching: up to N requests decoded together, each step one forward over every request in flight
(goose.engine.batched). A finished request's row takes the next prompt at once: the newcomer is prefilled, then
joins the next verification. Every request gets its own drafter (`Drafter.spawn`: what memory=run keeps is
shared by the requests in flight, and drafters are told their results in row order, so a run repeats
exactly). Each request returns exactly the tokens it returns alone, up to the last bits of a batched forward
(goose.storage.equality says which differences are numerics). A request's step after its verification is the
single-request loop's (goose.running.loop.Flight); what is the batch's own here is admission, the pause and the
widths. `Batch` is the lifecycle (add, step, cancel): `decode_batch` runs it over a list of requests, a server
over requests as they arrive.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from goose.drafting.contract import Drafter
from goose.drafting.cost_surface import DRAFT_OVERHEAD, Calibration, choose_widths, harvest_pays
from goose.engine.backends import synchronize
from goose.engine.batched import BatchEngine
from goose.engine.draft import Draft
from goose.engine.logits import non_finite
from goose.engine.sampling import Sampling
from goose.errors import NonFiniteLogits
from goose.running.loop import Flight, Generation

RESERVED_DRAFT = 128  # nodes of draft a batch's buffers hold room for up front (a wider one still fits: they grow)


@dataclass
class Request:
    prompt: list[int]
    drafter: Drafter
    max_new_tokens: int
    sampling: Sampling | None = None  # this request's own (a server's per-request temperature), else the batch's
    stop_ids: frozenset[int] | None = None  # this request's own stop tokens, else the batch's


@dataclass
class Served(Generation):
    """A request's generation in a batch, with when (seconds from the batch's start) it was admitted, gave its
    first token and was done; its `wall_s` is done - admitted (its latency)."""

    admitted_s: float = 0.0
    done_s: float = 0.0
    widths_chosen: list[int] = field(default_factory=list)

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.admitted_s

    @property
    def tpot_s(self) -> float | None:
        n = len(self.tokens)  # wall_s is the request's share of its pass: its own timeline says when it ran
        return (self.done_s - self.first_token_s) / (n - 1) if n > 1 else None


class Pause:
    """budget=auto in a batch: a step whose best width was 1 (no draft paid at n requests in flight) stops drafting
    until fewer than n requests are in flight (a smaller forward may pay for a draft) or the pause's steps have
    passed, so a batch where drafting does not pay costs what AR costs: no drafter proposes, harvests or reads its
    prompt's top-k meanwhile. The pause doubles with every look that finds width 1 again (MIN_STEPS, then 2x, up
    to MAX_STEPS) and is back to MIN_STEPS once a width pays: one weak step (every row between matches) costs a few
    steps of drafting, not 64, while a batch too large to draft at all soon looks only every 64 steps. It depends
    on the tokens only (the widths chosen), so a run repeats exactly."""

    MIN_STEPS, MAX_STEPS = 4, 64

    def __init__(self):
        self.left, self.rows, self.length = 0, 0, self.MIN_STEPS

    def drafts(self, rows: int) -> bool:
        """Whether this step, with `rows` requests in flight, drafts (counts a paused step down)."""
        if self.left and rows >= self.rows:
            self.left -= 1
            return False
        self.left = 0
        return True

    def decided(self, width: int, rows: int) -> None:
        if width == 1:
            self.left, self.rows = self.length, rows
            self.length = min(2 * self.length, self.MAX_STEPS)
        else:
            self.length = self.MIN_STEPS


class Batch:
    """Requests decoded together, as a small explicit lifecycle: `add` queues a request, `step` admits what fits
    (`admit`: a newcomer is prefilled into a free row) and runs one verification over every request in flight
    (`verify`), `cancel` drops one wherever it is. `decode_batch` steps it until every request is done; a server
    steps it as requests arrive. Times are seconds from the batch's making."""

    def __init__(self, engine: BatchEngine, stop_ids: frozenset[int] = frozenset(), sampling: Sampling | None = None,
                 cost=None, stop_at_loop: bool = False):
        self.engine, self.stop_ids, self.sampling, self.cost = engine, stop_ids, sampling, cost
        self.stop_at_loop = stop_at_loop  # every request also ends at its first loop (goose.running.loop.LoopWatch)
        self.queue: deque[tuple[int, Request]] = deque()
        self.flights: list[Flight] = []  # row order: flights[r] is in row r
        self.calibration = Calibration()
        self.pause = Pause()
        self.t0 = time.perf_counter()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.flights)

    def add(self, index: int, request: Request) -> None:
        """Queue `request` under `index` (its name in what `step` returns); it joins at the next free row."""
        self.queue.append((index, request))

    def cancel(self, index: int) -> bool:
        """Drop request `index`: from the queue, or from its row (the last active request moves into it) with its
        drafter stopped. Returns whether it was there."""
        for item in self.queue:
            if item[0] == index:
                self.queue.remove(item)
                return True
        for r, f in enumerate(self.flights):
            if f.index == index:
                self._release(r)
                f.finish()
                return True
        return False

    def step(self) -> list[tuple[int, Served, bool]]:
        """`admit`, then `verify`: (index, its generation so far, whether it is done) for every request admitted or
        verified in this step; a done one has left the batch."""
        return self.admit() + self.verify()

    def admit(self) -> list[tuple[int, Served, bool]]:
        """Admit queued requests while a row is free: each one's prefill gives its first token, returned here so a
        server can send it before the step's verification (which a wide tree makes the dearer half)."""
        events = []
        while self.queue and self.engine.active < self.engine.rows:  # fill every free row
            i, req = self.queue.popleft()
            f = self._admit(i, req)
            if f.done:
                self.engine.release(self.engine.active - 1)
                events.append((i, self._done(f), True))
            else:
                self.flights.append(f)
                events.append((i, f.gen, False))
        return events

    def verify(self) -> list[tuple[int, Served, bool]]:
        """One verification over every request in flight (none: nothing happens)."""
        return self._verify() if self.flights else []

    def _admit(self, i: int, req: Request) -> Flight:
        engine, cost = self.engine, self.cost
        caps = req.drafter.capabilities
        sampling = req.sampling if req.sampling is not None else self.sampling
        sampler = sampling.for_prompt(req.prompt) if sampling is not None else None
        admitted = self.now()
        sized = cost is not None and req.drafter.sized_by_batch  # budget=auto: the harvest must pay too
        harvest = caps.harvest_prefill and not (
            sized and not harvest_pays(cost, len(req.prompt), req.max_new_tokens, engine.rows))
        try:
            _, pre = engine.admit(req.prompt, topk=caps.topk if harvest else 0, sampler=sampler)
        except NonFiniteLogits as e:
            raise non_finite(f"the prefill forward of request {i} (row {e.row})", engine.dtype, e.row, []) from None
        stops = self.stop_ids if req.stop_ids is None else req.stop_ids
        return Flight(req.prompt, req.drafter, req.max_new_tokens, stops, pre, sampler, kind=Served, index=i,
                      profile=engine.profile, stop_at_loop=self.stop_at_loop, admitted_s=admitted,
                      first_token_s=self.now())

    def _verify(self) -> list[tuple[int, Served, bool]]:
        engine, cost, flights = self.engine, self.cost, self.flights
        drafting = self.pause.drafts(len(flights))
        if drafting:
            drafts = [f.propose() for f in flights]
        else:  # no width paid at the last look: AR's step, and no drafter is asked or told anything
            drafts = [Draft([f.context[-1]], [-1]) for f in flights]
        widths = None
        if drafting and cost is not None and all(d.gains is not None for d in drafts):
            widths = choose_widths([self.calibration.scaled(d.gains) for d in drafts], cost, len(drafts),
                                   DRAFT_OVERHEAD * cost(1, 1))
            if any(len(d.gains) > 1 for d in drafts):  # bare roots everywhere say nothing of what drafts pay
                self.pause.decided(max(widths), len(drafts))
        topk = flights[0].drafter.capabilities.topk if drafting else 0
        try:
            results = engine.verify(drafts, topk=topk, samplers=[f.sampler for f in flights], width=widths)
        except NonFiniteLogits as e:  # the run stops: which request, and what it had committed before
            f = flights[e.row]
            raise non_finite(f"batched verification {engine.verifications} (row {e.row}: request {f.index}, its "
                             f"verification {f.gen.steps})", engine.dtype, e.row, list(f.gen.tokens)) from None
        events, finished_rows = [], []
        for r, (f, d, res) in enumerate(zip(flights, drafts, results)):  # row order: shared state reproducible
            if widths is not None:
                f.gen.widths_chosen.append(widths[r])
                self.calibration.observe(d.gains, widths[r], len(res.path))
            elif not drafting:
                f.gen.widths_chosen.append(1)  # paused: AR's step
            if f.advance(d, res, drafting):
                finished_rows.append(r)
            else:
                events.append((f.index, f.gen, False))
        for r in sorted(finished_rows, reverse=True):  # the last row moves into a freed one
            f = flights[r]
            self._release(r)
            events.append((f.index, self._done(f), True))
        return events

    def _release(self, r: int) -> None:
        self.engine.release(r)
        if r != len(self.flights) - 1:
            self.flights[r] = self.flights[-1]
        self.flights.pop()

    def _done(self, f: Flight) -> Served:
        gen = f.finish()
        gen.done_s = self.now()
        gen.wall_s = gen.done_s - gen.admitted_s
        return gen


def decode_batch(engine: BatchEngine, requests: list[Request], stop_ids: frozenset[int] = frozenset(),
                 sampling: Sampling | None = None, cost=None,
                 stop_at_loop: bool = False) -> tuple[list[Served], float]:
    """Decode `requests`, up to `engine.rows` at once, in order of admission (the list's). `cost`: the cost
    surface budget=auto picks each step's widths from (drafts that carry gains), and which prompts to harvest
    (`harvest_pays`); `stop_at_loop`: each request also ends at its first loop. Returns the generations, in the
    requests' order, and the batch's wall time."""
    if requests:  # the longest request's context and a wide draft, so no buffer grows mid-batch
        engine.reserve(max(len(r.prompt) + r.max_new_tokens for r in requests) + RESERVED_DRAFT)
    synchronize(engine.device)
    batch = Batch(engine, stop_ids, sampling, cost, stop_at_loop)
    for i, req in enumerate(requests):
        batch.add(i, req)
    out: list[Served | None] = [None] * len(requests)
    while batch.busy:
        for i, gen, done in batch.step():
            if done:
                out[i] = gen
    synchronize(engine.device)
    return out, batch.now()
