"""Continuous batching: up to N requests decoded together, each step one forward over every request in flight
(goose.batch_engine). A finished request's row takes the next prompt at once: the newcomer is prefilled, then
joins the next verification. Every request gets its own drafter (`Drafter.spawn`: what memory=run keeps is
shared by the requests in flight, and drafters are told their results in row order, so a run repeats
exactly). Each request returns exactly the tokens it returns alone, up to the last bits of a batched forward
(goose.equality says which differences are numerics).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from goose.batch_engine import BatchEngine
from goose.cost_surface import Calibration, choose_width
from goose.decode import BONUS, Generation, commit
from goose.drafter import Drafter
from goose.engine import _sync
from goose.sampling import Sampling


@dataclass
class Request:
    prompt: list[int]
    drafter: Drafter
    max_new_tokens: int


@dataclass
class Served(Generation):
    """A request's generation in a batch, with when (seconds from the batch's start) it was admitted, gave its
    first token and was done; its `wall_s` is done - admitted (its latency)."""

    admitted_s: float = 0.0
    first_token_s: float = 0.0
    done_s: float = 0.0
    widths_chosen: list[int] = field(default_factory=list)


@dataclass
class _Flight:
    index: int
    request: Request
    gen: Served
    context: list[int]
    sampler: object


def decode_batch(engine: BatchEngine, requests: list[Request], stop_ids: frozenset[int] = frozenset(),
                 sampling: Sampling | None = None, cost=None) -> tuple[list[Served], float]:
    """Decode `requests`, up to `engine.rows` at once, in order of admission (the list's). `cost`: the cost
    surface budget=auto picks each step's width from (drafts that carry gains). Returns the generations, in the
    requests' order, and the batch's wall time."""
    _sync(engine.device)
    t0 = time.perf_counter()
    now = lambda: time.perf_counter() - t0  # noqa: E731
    queue = deque(enumerate(requests))
    flights: list[_Flight] = []  # row order: flights[r] is in row r
    out: list[Served | None] = [None] * len(requests)
    calibration = Calibration()

    def done(f: _Flight) -> None:
        f.request.drafter.stop()
        f.gen.done_s = now()
        f.gen.wall_s = f.gen.done_s - f.gen.admitted_s
        f.gen.stats = f.request.drafter.stats()
        out[f.index] = f.gen

    while queue or flights:
        while queue and engine.active < engine.rows:  # fill every free row
            i, req = queue.popleft()
            caps = req.drafter.capabilities
            sampler = sampling.for_prompt(req.prompt) if sampling is not None else None
            admitted = now()
            _, pre = engine.admit(req.prompt, topk=caps.topk if caps.harvest_prefill else 0, sampler=sampler)
            first, finished = commit([pre.bonus], req.max_new_tokens, stop_ids)
            gen = Served(tokens=first, steps=1, wall_s=0.0, origins=[BONUS] * len(first), margins=pre.margins[:1],
                         runners_up=pre.runners_up[:1], admitted_s=admitted, first_token_s=now())
            f = _Flight(i, req, gen, list(req.prompt) + first, sampler)
            req.drafter.start(f.context, pre)
            if finished:
                engine.release(engine.active - 1)
                done(f)
            else:
                flights.append(f)
        if not flights:
            continue
        drafts = [f.request.drafter.propose(f.context) for f in flights]
        width = choose_width([calibration.scaled(d.gains) for d in drafts], cost, len(drafts)) \
            if cost is not None and all(d.gains is not None for d in drafts) else None
        topk = flights[0].request.drafter.capabilities.topk
        results = engine.verify(drafts, topk=topk, samplers=[f.sampler for f in flights], width=width)
        finished_rows = []
        for r, (f, d, res) in enumerate(zip(flights, drafts, results)):  # row order: shared state reproducible
            g = f.gen
            g.steps += 1
            g.widths.append(res.width)
            if width is not None:
                g.widths_chosen.append(width)
                calibration.observe(d.gains, width, len(res.path))
            new = [d.tokens[i] for i in res.path[1:]] + [res.bonus]
            new, finished = commit(new, f.request.max_new_tokens - len(g.tokens), stop_ids)
            g.origins.extend([*f.request.drafter.origins(res.path), BONUS][: len(new)])
            g.margins.extend(res.margins[: len(new)])
            g.runners_up.extend(res.runners_up[: len(new)])
            g.tokens.extend(new)
            f.context.extend(new)
            f.request.drafter.accepted(res, f.context)
            if finished:
                finished_rows.append(r)
        for r in sorted(finished_rows, reverse=True):  # the last row moves into a freed one
            f = flights[r]
            engine.release(r)
            if r != len(flights) - 1:
                flights[r] = flights[-1]
            flights.pop()
            done(f)
    _sync(engine.device)
    return out, time.perf_counter() - t0
