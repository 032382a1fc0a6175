"""Exact sampling on a greedy verifier: the Gumbel-max trick with noise keyed by emitted position.

The token emitted at absolute position t (the prompt holds positions 0..n-1, so the first new
token is at n) is argmax_v(filtered_t[v] + g_t[v]), where filtered_t is the logits that predict
position t divided by the temperature, then cut to the top-k, then to the top-p nucleus (Hugging
Face's order; cut entries are -inf), and g_t[v] is Gumbel(0, 1) noise, a pure function of (a hash of
(seed, prompt fingerprint, t), v): a counter-based generator, so the noise of the few tokens that can
win is drawn without the rest (`Sampler.choose`). Given the prefix, g_t is independent of it, so the
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
from typing import NamedTuple

import torch

from goose.errors import GooseError


def _finite_number(v) -> bool:
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
        if not _finite_number(self.temperature) or self.temperature < 0:
            raise GooseError(f"temperature must be a number >= 0; 0 = greedy (got {self.temperature!r}).")
        if 0 < self.temperature < MIN_TEMPERATURE:  # logits / T would overflow float32
            raise GooseError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE:g} "
                             f"(got {self.temperature!r}).")
        if not isinstance(self.top_k, int) or isinstance(self.top_k, bool) or self.top_k < 0:
            raise GooseError(f"top_k must be an integer >= 0; 0 = off (got {self.top_k!r}).")
        if not _finite_number(self.top_p) or not 0 < self.top_p <= 1:
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

    def noise_key(self) -> dict:
        """What hashes and reference keys add when sampling: the noise generator's revision (another generator
        draws other tokens for the same seed, so no row or AR reference of the old one may be reused)."""
        return {} if self.greedy else {"noise": NOISE_REVISION}

    def label(self) -> str:
        """A readable tag for folder and run names ('' when greedy)."""
        if self.greedy:
            return ""
        cut = (f"-k{self.top_k}" if self.top_k else "") + (f"-p{self.top_p:g}" if self.top_p < 1 else "")
        return f"T{self.temperature:g}{cut}-s{self.seed}"

    def for_prompt(self, prompt: list[int]) -> Sampler | None:
        """The sampler of one generation (None when greedy): its noise is keyed by this prompt."""
        return None if self.greedy else Sampler(self, prompt)


def token_ids_fingerprint(prompt: list[int]) -> str:
    """What keys a generation's sampling noise: its prompt's token ids (the prompt's text fingerprint, a row's
    `prompt_fingerprint`, is goose.core.fingerprints's)."""
    return hashlib.sha256(json.dumps([int(t) for t in prompt]).encode()).hexdigest()


def noise_seed(seed: int, fingerprint: str, position: int) -> int:
    """A generator seed from the tuple (seed, prompt fingerprint, position), hashed as a whole so that
    no two tuples collide by arithmetic (seed 1 at t is not seed 0 at t + 1)."""
    blob = json.dumps([int(seed), fingerprint, int(position)]).encode()
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little") & ((1 << 63) - 1)


# The noise of token v at one position is a pure function of (that position's seed, v): splitmix64 of
# seed + (v + 1) * golden, its top NOISE_BITS bits as a uniform in (0, 1), then -log(-log(u)). Any subset of
# the vocabulary is drawn without drawing the rest, and identically on every device (integer arithmetic,
# logs in float64 on the CPU). With NOISE_BITS bits the noise lies in [GUMBEL_MIN, GUMBEL_MAX], which bounds
# which tokens can still win once a few have been drawn.
NOISE_BITS = 24
NOISE_REVISION = 2  # 1: a torch generator per position, seeded by the hash, over the whole vocabulary
_GOLDEN, _MIX1, _MIX2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def _int64(c: int) -> int:
    """An unsigned 64-bit constant as the int64 with the same bits."""
    return c - (1 << 64) if c >= 1 << 63 else c


def _shr(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's >> is arithmetic)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _uniform_bits(seed: int, ids: torch.Tensor) -> torch.Tensor:
    """The NOISE_BITS-bit integer of each token id (int64, wrapping arithmetic as in C)."""
    z = (ids.to(torch.int64) + 1) * _int64(_GOLDEN) + _int64(seed & ((1 << 64) - 1))
    z = (z ^ _shr(z, 30)) * _int64(_MIX1)
    z = (z ^ _shr(z, 27)) * _int64(_MIX2)
    return _shr(z ^ _shr(z, 31), 64 - NOISE_BITS)


def _gumbel_of(k: torch.Tensor) -> torch.Tensor:
    u = (k.double() + 0.5) / (1 << NOISE_BITS)  # never 0 or 1
    return (-torch.log(-torch.log(u))).float()


GUMBEL_MIN = float(_gumbel_of(torch.tensor([0], device="cpu")))
GUMBEL_MAX = float(_gumbel_of(torch.tensor([(1 << NOISE_BITS) - 1], device="cpu")))


def gumbel_at(seed: int, ids: torch.Tensor) -> torch.Tensor:
    """Gumbel(0, 1) noise of the token ids `ids` at the position whose seed is `seed` (float32, on ids' device;
    computed on the CPU so every device gets the same numbers)."""
    return _gumbel_of(_uniform_bits(seed, ids.cpu())).to(ids.device)


NUCLEUS_FIRST = 64  # candidates ranked first when cutting a nucleus; more only when their mass falls short


def kept_tokens(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """What the filter keeps of a 1-D logits row: (token ids ascending, their logits / temperature in float32).

    Top-k keeps every token at least as likely as the k-th (ties with it kept, as Hugging Face does). Top-p then
    keeps the most likely tokens, in order, until the mass of those before one reaches top_p (the one that
    crosses it is kept, and every token tied with the last kept one): the nucleus of Hugging Face's TopPLogitsWarper,
    found by ranking only as many candidates as it needs, not the whole vocabulary (at an exact tie on the
    nucleus edge Hugging Face's result depends on its sort order; this keeps every tied token)."""
    x = logits.float() / temperature
    V = x.shape[-1]
    ids = None
    if top_k and top_k < V:
        kth = x.topk(top_k).values[-1]
        ids = (x >= kth).nonzero().squeeze(-1)
    if top_p < 1.0:
        pool = x if ids is None else x[ids]
        lse = torch.logsumexp(pool, -1)
        m = min(NUCLEUS_FIRST, pool.shape[-1])
        while True:
            vals, order = pool.topk(m)  # descending
            probs = (vals - lse).exp().double().cpu()
            before = probs.cumsum(0) - probs  # mass of the more likely ones (sequential: prefix-consistent)
            inside = int((before < top_p).sum())
            last = vals[max(inside, 1) - 1]
            if (inside < m and vals[-1] < last) or m == pool.shape[-1]:
                break
            m = min(m * 8, pool.shape[-1])
        chosen = (pool >= last).nonzero().squeeze(-1)
        ids = chosen if ids is None else ids[chosen]
    if ids is None:  # nothing cut: the whole row, uncopied
        return torch.arange(V, device=x.device), x
    return ids, x[ids]


def filter_logits(logits: torch.Tensor, temperature: float, top_k: int = 0, top_p: float = 1.0) -> torch.Tensor:
    """Float32 logits / temperature with every token the filter cuts (kept_tokens) set to -inf. The last
    dimension is the vocabulary; rows are filtered one by one."""
    if logits.dim() > 1:
        return torch.stack([filter_logits(r, temperature, top_k, top_p) for r in logits.reshape(-1, logits.shape[-1])]
                           ).reshape(logits.shape)
    ids, values = kept_tokens(logits, temperature, top_k, top_p)
    out = torch.full(logits.shape, -math.inf, dtype=torch.float32, device=logits.device)
    out[ids] = values
    return out


RANKS = 3  # runners-up recorded per emitted token: enough to see a three-way tie (goose.storage.equality)


class Choice(NamedTuple):
    """The token a row emits, its RANKS best other tokens (best first) and the chosen token's score minus each
    one's (the logits under greedy, the perturbed scores under sampling)."""

    token: int
    runners_up: list[int]
    gaps: list[float]

    @property
    def margin(self) -> float:
        """Top-1 minus top-2 (inf when nothing else could be chosen)."""
        return self.gaps[0] if self.gaps else math.inf


def ranked(scores: torch.Tensor, chosen: int) -> Choice:
    """`chosen` and the RANKS best other tokens of a 1-D row of scores, with the gaps to them."""
    values, ids = scores.topk(min(RANKS + 1, scores.shape[-1]))
    return choice_of(chosen, values, ids)


def choice_of(chosen: int, values: torch.Tensor, ids: torch.Tensor) -> Choice:
    """The Choice of `chosen` from a row's best scores and ids (descending; ties in any order)."""
    top = float(values[0])  # the chosen token's score: it is the best (an argmax, or the sampler's pick)
    others = [(i, top - v) for v, i in zip(values.tolist(), ids.tolist()) if i != chosen][:RANKS]
    return Choice(chosen, [i for i, _ in others], [g for _, g in others])


class Sampler:
    """Draws the tokens of one generation: the token emitted at position t is the argmax over the kept tokens of
    (filtered logit + the noise of (t, token)). Noise is drawn only for the tokens that can rank among the best
    RANKS + 1 (what is recorded of each choice): the kept ones under a top-k or top-p cut, else those whose logit
    plus GUMBEL_MAX reaches the (RANKS + 1)-th best score among the likeliest few."""

    CONTENDERS_FIRST = 16

    def __init__(self, sampling: Sampling, prompt: list[int]):
        self.sampling = sampling
        self.fingerprint = token_ids_fingerprint(prompt)

    def seed(self, position: int) -> int:
        """The key of `position`'s noise (a few microseconds: recomputed, not kept)."""
        return noise_seed(self.sampling.seed, self.fingerprint, position)

    def perturbed(self, logits: torch.Tensor, position: int) -> torch.Tensor:
        """The whole filtered row that predicts `position` plus that position's noise (cut tokens: -inf)."""
        s = self.sampling
        noise = gumbel_at(self.seed(position), torch.arange(logits.shape[-1], device=logits.device))
        return filter_logits(logits, s.temperature, s.top_k, s.top_p) + noise

    def choose(self, logits: torch.Tensor, position: int) -> Choice:
        """The token emitted at `position`, from the 1-D logits row that predicts it, with its runners-up on the
        perturbed scores (none when nothing else is kept). The same as `perturbed(...)`'s argmax and best
        RANKS + 1, ties going to the smaller token id."""
        s, seed = self.sampling, self.seed(position)
        ids, x = kept_tokens(logits, s.temperature, s.top_k, s.top_p)
        if not s.top_k and s.top_p >= 1.0 and ids.numel() > self.CONTENDERS_FIRST:
            first = x.topk(self.CONTENDERS_FIRST).indices
            last = (x[first] + gumbel_at(seed, first)).topk(RANKS + 1).values[-1]
            ids = (x + GUMBEL_MAX >= last).nonzero().squeeze(-1)  # no other token can rank in the best RANKS + 1
            x = x[ids]
        scores = x + gumbel_at(seed, ids)
        values, at = scores.topk(min(RANKS + 1, ids.numel()))
        best = int((scores == values[0]).nonzero()[0, 0])  # the smaller id among equal scores (ids ascend)
        top = float(values[0])
        others = [(int(ids[a]), top - v) for v, a in zip(values.tolist(), at.tolist()) if a != best][:RANKS]
        return Choice(int(ids[best]), [i for i, _ in others], [g for _, g in others])

    def pick(self, logits: torch.Tensor, position: int) -> int:
        return self.choose(logits, position).token
