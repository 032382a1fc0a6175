"""What the two engines share: the model and where it runs, the prefill's first token, the profile's clock.

`Engine` (goose.engine.single, one request: the bit-exact reference) and `BatchEngine` (goose.engine.batched, many
rows in one forward) differ in their cache layout and in how a forward is laid out; everything here is the same for
both, so it is written once.
"""

from __future__ import annotations

import time

import torch

from goose.engine.backends import backend_of, synchronize
from goose.engine.draft import Verification
from goose.engine.layouts import check_supported, sliding_window, text_config
from goose.engine.logits import choose_token, non_finite
from goose.engine.sampling import Sampler
from goose.errors import GooseError, NonFiniteLogits


class EngineBase:
    """The model, its device and dtype, its context, the masks' minimum, its sliding window, and how many
    verifications have run (which forward a NaN came from)."""

    def __init__(self, model, profile: bool = False):
        check_supported(model.config)
        self.model = model
        self.profile = profile
        self.backend = backend_of(model)  # how the forward runs (goose.engine.backends); in every reference/timing key
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.mask_min = torch.finfo(self.dtype).min
        self.max_positions = getattr(text_config(model.config), "max_position_embeddings", None)
        self.window = sliding_window(model.config)  # W where some layers see the last W positions only
        self.verifications = 0

    def first_token(self, last: torch.Tensor, length: int, sampler: Sampler | None, finite: torch.Tensor,
                    where: str, row: int | None = None) -> Verification:
        """The prefill's result from its last position's logits: the bonus is the argmax, or the sampler's draw for
        position `length`; NaN or inf (`finite`: goose.engine.logits.finite_rows) is one line naming `where`."""
        try:
            choice = choose_token(last, length, sampler, finite)
        except NonFiniteLogits:
            raise non_finite(where, self.dtype, row) from None
        res = Verification(path=[0], bonus=choice.token, width=length)
        res.record([choice])
        return res

    def clock(self) -> ProfileClock:
        return ProfileClock(self.profile, self.device)


def check_prompt(prompt: list[int]) -> None:
    if not prompt:
        raise GooseError("empty prompt: nothing to condition on.")


class ProfileClock:
    """A verification's phases when profiling: building its inputs (mark 0 to 1), the forward (1 to 2), the walk
    and compaction (2 to 3); the device is synchronised at every mark after the first. Off, it reads no clock."""

    def __init__(self, on: bool, device: torch.device):
        self.on, self.device = on, device
        self.marks = [time.perf_counter()] if on else []

    def mark(self) -> None:
        if self.on:
            synchronize(self.device)
            self.marks.append(time.perf_counter())

    def split(self, requests: int = 1) -> tuple[float, float]:
        """(forward seconds, overhead seconds), each a request's share of the forward's."""
        t0, t1, t2, t3 = self.marks
        return (t2 - t1) / requests, ((t1 - t0) + (t3 - t2)) / requests
