"""The engine thread: one thread owns the batch (goose.running.batch_loop.Batch) and steps it while any request is
in flight or waiting; HTTP handlers (asyncio) never touch it.

Handlers `submit` a `Job` and `cancel` one through a thread-safe inbox; the thread takes the inbox between steps, so
a request joins the running batch at the next step (continuous refill up to the engine's rows, the rest wait in
the batch's queue). Admission is bounded: rows + queue_size requests at most, the next one is refused at once
(`QueueFull`, a 429 with Retry-After). Each step's new tokens go through the job's TextStream (detokenization and
stop strings: a stop string cancels the request in the batch at once, freeing its row) and back to the handler
through `Job.deliver` (the handler's loop.call_soon_threadsafe onto its asyncio queue). Tokens are the batch's,
untouched: a request served here returns the tokens offline decoding returns.
"""

from __future__ import annotations

import itertools
import logging
import math
import queue
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from goose.drafting.contract import Drafter
from goose.engine.batched import BatchEngine
from goose.engine.sampling import Sampling
from goose.running.batch_loop import RESERVED_DRAFT, Batch, Request, Served
from goose.running.loop import BONUS
from goose.serving.metrics import Metrics
from goose.serving.replies import Outcome
from goose.serving.text import TextStream

log = logging.getLogger("goose.serving")


class QueueFull(Exception):
    """Every row is taken and the queue is full; `retry_after`: seconds a client should wait."""

    def __init__(self, retry_after: int):
        super().__init__(f"the server is full: retry after {retry_after} s")
        self.retry_after = retry_after


class Draining(Exception):
    """The server is shutting down: it finishes the requests it has and takes no new one."""


@dataclass
class Tokens:
    """New text (possibly empty: held back) and the token ids it came from."""

    text: str
    ids: list[int]


@dataclass
class Finished:
    text: str  # what was held back until the end
    ids: list[int]
    outcome: Outcome


@dataclass
class Failed:
    message: str


@dataclass
class Job:
    """One request as the engine thread keeps it. `deliver(event)` must be safe to call from the engine thread."""

    prompt: list[int]
    max_tokens: int
    sampling: Sampling | None
    stop_ids: frozenset[int]
    text: TextStream
    deliver: Callable[[Tokens | Finished | Failed], None]
    id: int = -1
    arrived: float = field(default_factory=time.perf_counter)
    tokens: list[int] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)
    seen: int = 0  # tokens of the batch's generation taken so far
    draft_s: float = 0.0  # the generation's draft and verify seconds counted so far
    verify_s: float = 0.0
    first_token: float | None = None


class Scheduler:
    """The batch and the thread that steps it. `template` spawns every request's drafter (goose.drafting.contract:
    spawn shares what memory=run keeps); `cost`: the cost surface budget=auto picks each step's widths from."""

    def __init__(self, engine: BatchEngine, template: Drafter, cost, queue_size: int, metrics: Metrics | None = None):
        self.engine, self.template, self.cost = engine, template, cost
        self.limit = engine.rows + queue_size
        self.metrics = metrics
        self.batch = Batch(engine, cost=cost)
        self.jobs: dict[int, Job] = {}  # the engine thread's alone
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._outstanding = 0  # submitted and not yet ended (guarded by _lock)
        self._ids = itertools.count()
        self._accepting = True
        self._stopping = threading.Event()
        self._latency = 1.0  # seconds a request took, smoothed: what Retry-After says
        self.thread = threading.Thread(target=self._run, name="goose-engine", daemon=True)

    # --- the HTTP side (any thread) ------------------------------------------------------------------------------
    @property
    def running(self) -> int:
        return len(self.batch.flights)

    @property
    def waiting(self) -> int:
        with self._lock:
            return max(0, self._outstanding - len(self.batch.flights))

    @property
    def outstanding(self) -> int:
        with self._lock:
            return self._outstanding

    def start(self) -> None:
        self.thread.start()

    def submit(self, job: Job) -> int:
        """Queue `job`; its id. Raises QueueFull (rows and queue taken) or Draining (shutting down)."""
        with self._lock:
            if not self._accepting:
                raise Draining("the server is shutting down")
            if self._outstanding >= self.limit:
                raise QueueFull(max(1, math.ceil(self._latency)))
            self._outstanding += 1
            job.id = next(self._ids)
        self._inbox.put(("add", job))
        return job.id

    def cancel(self, job_id: int) -> None:
        """Drop a request wherever it is (the client went away); its row is free at the next step."""
        self._inbox.put(("cancel", job_id))

    def stop_accepting(self) -> None:
        # No lock: SIGTERM's handler calls this on the main thread, which may be inside `submit` holding it.
        self._accepting = False

    def stop(self, timeout: float | None = None) -> bool:
        """Take no new request, finish every request in flight or waiting, then end the thread. Returns whether
        it ended within `timeout`."""
        self.stop_accepting()
        self._stopping.set()
        self._inbox.put(("wake", None))
        if self.thread.is_alive():
            self.thread.join(timeout)
        return not self.thread.is_alive()

    # --- the engine thread --------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            self._take(block=not self.batch.busy)
            if not self.batch.busy:
                if self._stopping.is_set() and self._inbox.empty():
                    return
                continue
            self._step()

    def _take(self, block: bool) -> None:
        """Everything in the inbox; waits for the first item when idle (a short timeout: see `_stopping`)."""
        try:
            item = self._inbox.get(timeout=0.2) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, x = item
            if kind == "add":
                self._add(x)
            elif kind == "cancel":
                self._cancel(x)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _add(self, job: Job) -> None:
        # Room for this request's context and a wide draft before it joins: a buffer grown mid-step copies every
        # row's cache (it is correct either way; this keeps the cost out of the steps).
        self.engine.reserve(len(job.prompt) + job.max_tokens + RESERVED_DRAFT)
        self.jobs[job.id] = job
        self.batch.add(job.id, Request(job.prompt, self.template.spawn(), job.max_tokens, job.sampling, job.stop_ids))
        if self.metrics:
            self.metrics.prompt_tokens.inc(len(job.prompt))

    def _cancel(self, job_id: int) -> None:
        job = self.jobs.pop(job_id, None)
        if job is None:  # already ended
            return
        self.batch.cancel(job_id)
        self._ended(job, "cancelled")

    def _ended(self, job: Job, outcome: str) -> None:
        with self._lock:
            self._outstanding -= 1
        if self.metrics:
            self.metrics.requests.labels(outcome).inc()

    def _step(self) -> None:
        # The newcomers' first tokens go out before the step's verification (a wide tree's forward), not with it.
        for phase in (self.batch.admit, self.batch.verify):
            try:
                events = phase()
            except Exception as e:  # the engine raised (non-finite logits, a bug): fail what it held, keep serving
                self._fail(e)
                return
            for index, gen, done in events:
                job = self.jobs.get(index)
                if job is not None:
                    self._progress(job, gen, done)
        if self.metrics:
            self.metrics.steps.inc()

    def _progress(self, job: Job, gen: Served, done: bool) -> None:
        new, origins = gen.tokens[job.seen :], gen.origins[job.seen :]
        job.seen = len(gen.tokens)
        self._count_seconds(job, gen)
        taken, stopped = [], False
        for t in new:  # one at a time: a stop string ends the answer at the token that completes it
            taken.append(t)
            if job.text.push(t):
                stopped = True
                break
        job.tokens += taken
        job.origins += origins[: len(taken)]
        if taken and job.first_token is None:
            job.first_token = time.perf_counter()
            if self.metrics:
                self.metrics.ttft.observe(job.first_token - job.arrived)
                self.metrics.prefill_s.inc(max(0.0, gen.first_token_s - gen.admitted_s))
        if stopped and not done:
            self.batch.cancel(job.id)  # its row is free for the next step
        if not (done or stopped):
            job.deliver(Tokens(job.text.take(), taken))
            return
        reason = "stop" if stopped or (job.tokens and job.tokens[-1] in job.stop_ids) else "length"
        outcome = Outcome(reason, len(job.prompt), len(job.tokens), gen.steps, _counts(job.origins))
        job.deliver(Finished(job.text.take() + job.text.finish(), taken, outcome))
        del self.jobs[job.id]
        self._finished(job, outcome)

    def _count_seconds(self, job: Job, gen: Served) -> None:
        verify = gen.forward_s + gen.overhead_s
        if self.metrics:
            self.metrics.draft_s.inc(max(0.0, gen.draft_s - job.draft_s))
            self.metrics.verify_s.inc(max(0.0, verify - job.verify_s))
        job.draft_s, job.verify_s = gen.draft_s, verify

    def _finished(self, job: Job, outcome: Outcome) -> None:
        took = time.perf_counter() - job.arrived
        self._latency = 0.8 * self._latency + 0.2 * took
        self._ended(job, "finished")
        m = self.metrics
        if m is None:
            return
        m.generation_tokens.inc(outcome.completion_tokens)
        m.forwards.inc(outcome.steps)
        for source, n in outcome.from_source.items():
            m.accepted.labels(source).inc(n)
        if outcome.steps:
            m.tau.observe(outcome.completion_tokens / outcome.steps)
        m.latency.observe(took)

    def _fail(self, error: Exception) -> None:
        """The batch raised mid-step: every request it had admitted fails (a 500 to its client), their rows are
        freed, and the requests still waiting go on in a fresh batch."""
        log.error("the engine failed; failing the requests in flight:\n%s", traceback.format_exc())
        waiting = list(self.batch.queue)
        queued = {i for i, _ in waiting}
        for f in self.batch.flights:
            try:
                f.finish()  # the drafter stops (SuffixDecoding files its response)
            except Exception:
                pass
        while self.engine.active:
            self.engine.release(self.engine.active - 1)
        self.batch = Batch(self.engine, cost=self.cost)
        for i, req in waiting:
            self.batch.add(i, req)
        for job_id in [j for j in self.jobs if j not in queued]:
            job = self.jobs.pop(job_id)
            job.deliver(Failed(f"the engine failed on this request's batch: {type(error).__name__}: {error}"))
            self._ended(job, "failed")


def _counts(origins: list[str]) -> dict[str, int]:
    out: dict[str, int] = {BONUS: 0}
    for o in origins:
        out[o] = out.get(o, 0) + 1
    return out
