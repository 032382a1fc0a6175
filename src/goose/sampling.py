"""Exact sampling on a greedy verifier: the Gumbel-max trick with noise keyed by emitted position.

The token emitted at absolute position t (the prompt holds positions 0..n-1, so the first new
token is at n) is argmax_v(filtered_t[v] + g_t[v]), where filtered_t is the logits that predict
position t divided by the temperature, then cut to the top-k, then to the top-p nucleus (Hugging
Face's order; cut entries are -inf), and g_t is Gumbel(0, 1) noise drawn from a generator seeded
by a hash of (seed, prompt fingerprint, t). Given the prefix, g_t is independent of it, so the
token is an exact draw from the filtered softmax; and because g_t depends on t alone, a draft
node that predicts position t sees the same noise whichever step or sibling verifies it. The
engine's walk therefore stays a greedy walk on perturbed logits, and every method emits exactly
the tokens AR sampling with the same seed emits: `lossless` keeps its meaning.

temperature 0 means greedy decoding: no sampler exists and the engine runs its greedy path.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import torch

from goose.errors import GooseError


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


MIN_TEMPERATURE = 1e-3


@dataclass(frozen=True)
class Sampling:
    """What a run samples with. temperature 0 = greedy (top_k and top_p then change nothing)."""

    temperature: float = 0.0
    top_k: int = 0  # 0 = no top-k cut
    top_p: float = 1.0  # 1.0 = no nucleus cut
    seed: int = 0

    def __post_init__(self) -> None:
        if not _number(self.temperature) or self.temperature < 0:
            raise GooseError(f"temperature must be a number >= 0; 0 = greedy (got {self.temperature!r}).")
        if 0 < self.temperature < MIN_TEMPERATURE:  # logits / T would overflow float32
            raise GooseError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g} "
                             f"(got {self.temperature!r}).")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise GooseError(f"top_k must be an integer >= 0; 0 = off (got {self.top_k!r}).")
        if not _number(self.top_p) or not 0 < self.top_p <= 1:
            raise GooseError(f"top_p must be a number in (0, 1]; 1.0 = off (got {self.top_p!r}).")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise GooseError(f"seed must be an integer (got {self.seed!r}).")

    @classmethod
    def from_config(cls, cfg) -> Sampling:
        return cls(cfg.get("temperature", 0.0), cfg.get("top_k", 0), cfg.get("top_p", 1.0), cfg.get("seed", 0))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def settings(self) -> dict:
        """What decides a sampled token beyond the model and the prompt (empty when greedy)."""
        if self.greedy:
            return {}
        return {"temperature": float(self.temperature), "top_k": self.top_k, "top_p": float(self.top_p),
                "seed": self.seed}

    def label(self) -> str:
        """A readable tag for folder and run names ('' when greedy)."""
        if self.greedy:
            return ""
        cut = (f"-k{self.top_k}" if self.top_k else "") + (f"-p{self.top_p:g}" if self.top_p < 1 else "")
        return f"T{self.temperature:g}{cut}-s{self.seed}"

    def for_prompt(self, prompt: list[int]) -> Sampler | None:
        """The sampler of one generation (None when greedy): its noise is keyed by this prompt."""
        return None if self.greedy else Sampler(self, prompt)


def prompt_fingerprint(prompt: list[int]) -> str:
    return hashlib.sha256(json.dumps([int(t) for t in prompt]).encode()).hexdigest()


def noise_seed(seed: int, fingerprint: str, position: int) -> int:
    """A generator seed from the tuple (seed, prompt fingerprint, position), hashed as a whole so that
    no two tuples collide by arithmetic (seed 1 at t is not seed 0 at t + 1)."""
    blob = json.dumps([int(seed), fingerprint, int(position)]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little") & ((1 << 63) - 1)


def gumbel(seed: int, size: int) -> torch.Tensor:
    """Gumbel(0, 1) noise, float32 on the CPU (the same numbers on every device)."""
    u = torch.rand(size, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)
    return -torch.log(-torch.log(u))  # u = 0 gives -inf: never chosen, as it should be


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Float32 logits / temperature, then the top-k cut (ties with the k-th kept), then the top-p cut
    (the least likely tokens whose probabilities sum to at most 1 - top_p are removed; the most
    likely one always stays); cut entries are -inf. The last dimension is the vocabulary."""
    x = logits.float() / temperature
    if top_k and top_k < x.shape[-1]:
        kth = x.topk(top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, -math.inf)
    if top_p < 1.0:
        ascending, order = x.sort(dim=-1)
        below = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        below[..., -1] = False
        x = x.masked_fill(below.scatter(-1, order, below), -math.inf)
    return x


class Sampler:
    """Draws the tokens of one generation. Noise is made once per position and reused, so every step
    and every sibling that predicts a position sees the same noise."""

    def __init__(self, sampling: Sampling, prompt: list[int]):
        self.sampling = sampling
        self.fingerprint = prompt_fingerprint(prompt)
        self._noise: dict[int, torch.Tensor] = {}

    def noise(self, position: int, size: int, device: torch.device) -> torch.Tensor:
        g = self._noise.get(position)
        if g is None or g.device != device or g.numel() != size:
            g = gumbel(noise_seed(self.sampling.seed, self.fingerprint, position), size).to(device)
            self._noise[position] = g
        return g

    def forget_through(self, position: int) -> None:
        """Drop the noise of positions already emitted (no later step predicts them again)."""
        for p in [p for p in self._noise if p <= position]:
            del self._noise[p]

    def perturbed(self, logits: torch.Tensor, position: int) -> torch.Tensor:
        """The filtered logits of the row that predicts `position`, plus that position's noise."""
        s = self.sampling
        return filter_logits(logits, s.temperature, s.top_k, s.top_p) + self.noise(position, logits.shape[-1],
                                                                                  logits.device)

    def choose(self, logits: torch.Tensor, position: int) -> tuple[int, float, int]:
        """The token emitted at `position`, from the 1-D logits row that predicts it, the margin of its
        perturbed score over the runner-up, and the runner-up."""
        from goose.engine import top_two

        scores = self.perturbed(logits, position)
        return top_two(scores, int(scores.argmax()))

    def pick(self, logits: torch.Tensor, position: int) -> int:
        return self.choose(logits, position)[0]
