"""The decode loop: a drafter proposes, the engine verifies, the drafter is told the result.

`Flight` is one request being decoded and `Flight.advance` the step after a verification (commit, bookkeeping,
what the drafter is told), written once for both loops: `generate` here (one prompt on the single-request
engine, the bit-exact reference) and goose.running.batch_loop.decode_batch (many requests in one forward)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from goose.drafting.contract import Drafter
from goose.engine.backends import synchronize
from goose.engine.draft import Draft, Verification
from goose.engine.sampling import Sampler, Sampling
from goose.engine.single import Engine
from goose.errors import NonFiniteLogits

BONUS = "bonus"
LOOP_SPAN = 32  # tokens: a repeat this long is a loop, not a phrase the answer reuses
# Why an answer ended (Generation.ended): a stop token, its length limit, or its first loop (stop_at_loop).
STOPPED, CAPPED, LOOPED = "stop", "cap", "loop"


@dataclass
class Generation:
    tokens: list[int]
    steps: int  # target forwards, prefill included
    wall_s: float
    wall_s_std: float = 0.0  # over timed repeats (goose.running.timing.combine)
    widths: list[int] = field(default_factory=list)
    forward_s: float = 0.0
    overhead_s: float = 0.0  # engine work around the forward: mask, top-k, walk, compaction
    draft_s: float = 0.0  # drafter work: propose + accepted (harvest, bookkeeping)
    stats: dict = field(default_factory=dict)
    # Per token, where it came from: a draft source of the drafter (GOOSE: spine, branch) or "bonus",
    # the target's own token after the accepted path (the prefill's first token too).
    origins: list[str] = field(default_factory=list)
    # Per token, the top-1 minus top-2 logit of the row that chose it (goose.engine.single.Verification.margins).
    margins: list[float] = field(default_factory=list)
    runners_up: list[list[int]] = field(default_factory=list)  # ... the best other tokens there (RANKS)
    gaps: list[list[float]] = field(default_factory=list)  # ... and the chosen token's score minus each one's
    first_token_s: float = 0.0  # seconds from the start to the first new token (the prefill's)
    ended: str = ""  # STOPPED | CAPPED | LOOPED
    loop_free: int = 0  # tokens before the answer's first loop (LoopWatch.start; all of them where none repeats)

    @property
    def ttft_s(self) -> float:
        """Time to first token: the prefill and its token."""
        return self.first_token_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (prefill excluded); None with one token."""
        n = len(self.tokens)
        return (self.wall_s - self.first_token_s) / (n - 1) if n > 1 else None

    @property
    def tau(self) -> float:
        return len(self.tokens) / self.steps if self.steps else 0.0

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.wall_s if self.wall_s > 0 else 0.0


class LoopWatch:
    """Where an answer starts repeating itself, told its tokens one by one: the first position p whose next `span`
    tokens already occurred, contiguously, starting at an earlier position of the same answer (`start`; None until
    found). It is found when token p + span - 1 arrives, the same token for every lossless method."""

    def __init__(self, span: int = LOOP_SPAN):
        self.span, self.tokens, self.seen, self.start = span, [], set(), None

    def push(self, token: int) -> bool:
        """Add the answer's next token; whether it completes the answer's first repeated run."""
        self.tokens.append(token)
        p = len(self.tokens) - self.span
        if self.start is not None or p < 0:
            return False
        gram = tuple(self.tokens[p:])
        if gram in self.seen:
            self.start = p
            return True
        self.seen.add(gram)
        return False

    @property
    def loop_free(self) -> int:
        """Tokens before the first loop: all of them while none is found."""
        return len(self.tokens) if self.start is None else self.start


def loop_start(tokens: list[int], span: int = LOOP_SPAN) -> int:
    """The answer's loop-free length (`LoopWatch.loop_free` after all of `tokens`)."""
    watch = LoopWatch(span)
    for t in tokens:
        watch.push(t)
    return watch.loop_free


def loop_stop(tokens: list[int], span: int = LOOP_SPAN) -> int:
    """How many of `tokens` an answer that stops at its first loop keeps: up to the token that completes it."""
    watch = LoopWatch(span)
    for i, t in enumerate(tokens):
        if watch.push(t):
            return i + 1
    return len(tokens)


def commit(new: list[int], room: int, stop_ids: frozenset[int], watch: LoopWatch,
           stop_at_loop: bool = False) -> tuple[list[int], str]:
    """Cut `new` at the first stop token (kept), at `room` tokens and, with `stop_at_loop`, at the token that
    completes the answer's first loop (kept); say why the answer ended ("" while it goes on)."""
    out = []
    for t in new[:room]:
        out.append(t)
        looped = watch.push(t)  # every kept token is watched, a stop token too: the window counts it
        if t in stop_ids:
            return out, STOPPED
        if looped and stop_at_loop:
            return out, LOOPED
    return out, CAPPED if len(out) >= room else ""


class Flight:
    """One request in flight: its drafter, its generation so far and its context. Made from its prefill (the first
    token committed, the drafter started); each verification then `advance`s it, until `done`; `finish` stops
    the drafter. `profile`: time the drafter's work (Generation.draft_s). `stop_at_loop`: the answer also ends at
    its first loop (LoopWatch)."""

    def __init__(self, prompt: list[int], drafter: Drafter, limit: int, stops: frozenset[int], prefill: Verification,
                 sampler: Sampler | None = None, kind: type[Generation] = Generation, index: int = 0,
                 profile: bool = False, stop_at_loop: bool = False, **times: float):
        self.drafter, self.limit, self.stops, self.sampler = drafter, limit, stops, sampler
        self.index, self.profile = index, profile  # index: the request's place in its batch
        self.watch, self.stop_at_loop = LoopWatch(), stop_at_loop
        tokens, ended = commit([prefill.bonus], limit, stops, self.watch, stop_at_loop)
        self.done = bool(ended)
        n = len(tokens)
        self.gen = kind(tokens=tokens, steps=1, wall_s=0.0, origins=[BONUS] * n, margins=prefill.margins[:n],
                        runners_up=prefill.runners_up[:n], gaps=prefill.gaps[:n], ended=ended, **times)
        self.context = list(prompt) + tokens
        drafter.start(self.context, prefill)

    def propose(self) -> Draft:
        t = time.perf_counter() if self.profile else 0.0
        draft = self.drafter.propose(self.context)
        if self.profile:
            self.gen.draft_s += time.perf_counter() - t
        return draft

    def advance(self, draft: Draft, res: Verification, drafted: bool = True) -> bool:
        """Commit what the verification of `draft` accepted and its bonus, keep each token's origin and margins,
        tell the drafter (`skipped` where the step drafted nothing for it: a paused batch); returns `done`."""
        g = self.gen
        g.steps += 1
        g.widths.append(res.width)
        g.forward_s += res.forward_s
        g.overhead_s += res.overhead_s
        new = [draft.tokens[i] for i in res.path[1:]] + [res.bonus]
        new, g.ended = commit(new, self.limit - len(g.tokens), self.stops, self.watch, self.stop_at_loop)
        self.done = bool(g.ended)
        g.origins.extend([*(self.drafter.origins(res.path) if drafted else []), BONUS][: len(new)])
        g.margins.extend(res.margins[: len(new)])
        g.runners_up.extend(res.runners_up[: len(new)])
        g.gaps.extend(res.gaps[: len(new)])
        g.tokens.extend(new)
        self.context.extend(new)
        t = time.perf_counter() if self.profile else 0.0
        if drafted:
            self.drafter.accepted(res, self.context)
        else:
            self.drafter.skipped(self.context)
        if self.profile:
            g.draft_s += time.perf_counter() - t
        return self.done

    def finish(self) -> Generation:
        """The request is done: the drafter stops (SuffixDecoding files its response) and gives its counters."""
        self.drafter.stop()
        self.gen.loop_free = self.watch.loop_free
        window = {f"loop_free_{k}": v for k, v in self.drafter.window_stats(self.gen.loop_free).items()}
        self.gen.stats = {**self.drafter.stats(), **window}
        return self.gen


def generate(
    engine: Engine,
    prompt: list[int],
    drafter: Drafter,
    max_new_tokens: int,
    stop_ids: frozenset[int] = frozenset(),
    sampling: Sampling | None = None,
    stop_at_loop: bool = False,
) -> Generation:
    """Speculative decoding of one prompt; returns exactly the tokens AR decoding returns: greedy, or
    AR sampling with the same settings and seed (`sampling`, see goose.engine.sampling), ended where AR's would
    end (`stop_at_loop`: also at the answer's first loop)."""
    synchronize(engine.device)
    t0 = time.perf_counter()
    caps = drafter.capabilities
    sampler = sampling.for_prompt(prompt) if sampling is not None else None
    try:
        pre = engine.prefill(prompt, topk=caps.topk if caps.harvest_prefill else 0, sampler=sampler)
    except NonFiniteLogits as e:
        e.tokens = []
        raise
    # the bonus is a host int: the prefill has finished on any device
    f = Flight(prompt, drafter, max_new_tokens, stop_ids, pre, sampler, profile=engine.profile,
               stop_at_loop=stop_at_loop, first_token_s=time.perf_counter() - t0)
    while not f.done:
        draft = f.propose()
        try:
            res = engine.verify(draft, topk=caps.topk, sampler=sampler)
        except NonFiniteLogits as e:  # the run stops: no token from that forward
            e.tokens = list(f.gen.tokens)
            raise
        f.advance(draft, res)
    gen = f.finish()
    synchronize(engine.device)
    gen.wall_s = time.perf_counter() - t0
    return gen
