"""The decode loop: a drafter proposes, the engine verifies, the drafter is told the result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from goose.drafting.contract import Drafter
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.errors import NonFiniteLogits

BONUS = "bonus"


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


def _sync(engine: Engine) -> None:
    if engine.device.type == "cuda":
        torch.cuda.synchronize(engine.device)


def commit(new: list[int], room: int, stop_ids: frozenset[int]) -> tuple[list[int], bool]:
    """Cut `new` at the first stop token (kept) and at `room` tokens; say whether to stop."""
    out = []
    for t in new[:room]:
        out.append(t)
        if t in stop_ids:
            return out, True
    return out, len(out) >= room


def generate(
    engine: Engine,
    prompt: list[int],
    drafter: Drafter,
    max_new_tokens: int,
    stop_ids: frozenset[int] = frozenset(),
    sampling: Sampling | None = None,
) -> Generation:
    """Speculative decoding of one prompt; returns exactly the tokens AR decoding returns: greedy, or
    AR sampling with the same settings and seed (`sampling`, see goose.engine.sampling)."""
    _sync(engine)
    t0 = time.perf_counter()
    caps = drafter.capabilities
    sampler = sampling.for_prompt(prompt) if sampling is not None else None
    try:
        pre = engine.prefill(prompt, topk=caps.topk if caps.harvest_prefill else 0, sampler=sampler)
    except NonFiniteLogits as e:
        e.tokens = []
        raise
    out, done = commit([pre.bonus], max_new_tokens, stop_ids)
    first = time.perf_counter() - t0  # the bonus is a host int: the prefill has finished on any device
    context = list(prompt) + out
    drafter.start(context, pre)
    gen = Generation(tokens=out, steps=1, wall_s=0.0, origins=[BONUS] * len(out), margins=pre.margins[: len(out)],
                     runners_up=pre.runners_up[: len(out)], gaps=pre.gaps[: len(out)], first_token_s=first)
    profile = engine.profile
    while not done:
        t1 = time.perf_counter() if profile else 0.0
        draft = drafter.propose(context)
        if profile:
            gen.draft_s += time.perf_counter() - t1
        try:
            res = engine.verify(draft, topk=caps.topk, sampler=sampler)
        except NonFiniteLogits as e:  # the run stops: no token from that forward
            e.tokens = list(out)
            raise
        gen.steps += 1
        gen.widths.append(res.width)
        gen.forward_s += res.forward_s
        gen.overhead_s += res.overhead_s
        new = [draft.tokens[i] for i in res.path[1:]]
        new.append(res.bonus)
        new, done = commit(new, max_new_tokens - len(out), stop_ids)
        gen.origins.extend([*drafter.origins(res.path), BONUS][: len(new)])
        gen.margins.extend(res.margins[: len(new)])
        gen.runners_up.extend(res.runners_up[: len(new)])
        gen.gaps.extend(res.gaps[: len(new)])
        out.extend(new)
        context.extend(new)
        t2 = time.perf_counter() if profile else 0.0
        drafter.accepted(res, context)
        if profile:
            gen.draft_s += time.perf_counter() - t2
    drafter.stop()
    _sync(engine)
    gen.wall_s = time.perf_counter() - t0
    gen.stats = drafter.stats()
    return gen
