"""Lossless, or why not: a row's tokens against AR's, classified.

- `exact`: the same tokens.
- `numerics`: the first differing token is a near-tie read two ways: where AR chose a, this run chose b, and
  each run scored the other's token within the dtype's tolerance of its own (this run's score of b minus its
  score of a, and AR's score of a minus its score of b: the gaps, logits under greedy, perturbed scores under
  sampling). Each run records, per token, its RANKS best other tokens and the gaps to them, so a two-way swap
  and a tie of three or four tokens (half precision rounds logits near 32 to steps of 0.125-0.25) are both
  seen. Verifying T tokens in one forward, or N requests in one batch, sums in another order than AR's
  one-token forward, which can move logits by a few units in the last place: at a near-tie that flips the
  choice, and everything after it follows another text.
- `diverged`: anything else (a gap beyond the tolerance, or the other's token not among a run's best): a bug
  until shown otherwise.

The tolerance is TOLERANCE_ULPS units in the last place of the dtype at a logit of LOGIT_SCALE, the size the
logits of the models here take (`tolerance`); every classified row reports it beside both runs' top-1 minus
top-2 margins and both gaps. Two runs in different dtypes are held to the coarser one's (`coarser`: by machine
epsilon, so bfloat16's 8-bit mantissa is coarser than float16's 11).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from goose.storage.metrics import first_divergence

LOGIT_SCALE = 32.0
# Room above the largest gap measured in half precision on SmolLM2, for larger logits (docs/results/numerics.md,
# "Third run").
TOLERANCE_ULPS = 4
EXACT, NUMERICS, DIVERGED = "exact", "numerics", "diverged"


def as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """A floating-point torch dtype from itself or its name (`bfloat16`, `torch.float16`); ValueError else."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.strip().replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"not a floating-point dtype: {dtype!r}")
    return dtype


def coarser(*dtypes: torch.dtype | str) -> torch.dtype:
    """The least precise of `dtypes`, by their machine epsilon (float32 < float16 < bfloat16): two runs in
    different dtypes are held to the coarser one's tolerance."""
    return max(map(as_dtype, dtypes), key=lambda d: torch.finfo(d).eps)


def tolerance(dtype: torch.dtype | str) -> float:
    """TOLERANCE_ULPS units in the last place of `dtype` at a logit of LOGIT_SCALE."""
    return TOLERANCE_ULPS * torch.finfo(as_dtype(dtype)).eps * LOGIT_SCALE


@dataclass(frozen=True)
class Ranks:
    """What a run recorded per token: the token, top-1 minus top-2, the best other tokens and the gaps to them."""

    tokens: list[int]
    margins: list[float]
    runners_up: list[list[int]]
    gaps: list[list[float]]

    @classmethod
    def of(cls, run) -> Ranks:
        """From a generation, a reference entry or a stored record (a dict). A record of an older version has one
        runner-up per token (an int) and no gaps: read as that runner-up at the margin."""
        get = run.get if isinstance(run, dict) else lambda k, d=None: getattr(run, k, d)
        margins, ups, gaps = list(get("margins") or []), list(get("runners_up") or []), get("gaps")
        if gaps is None:
            ups, gaps = [[u] if u >= 0 else [] for u in ups], [[m] for m in margins]
        return cls(list(get("tokens") or []), margins, [list(u) for u in ups], [list(g) for g in gaps])

    def gap(self, i: int, other: int) -> float | None:
        """This run's score of its token at i minus its score of `other` (None: not among its recorded best)."""
        if i >= len(self.runners_up) or other not in self.runners_up[i]:
            return None
        return self.gaps[i][self.runners_up[i].index(other)]


@dataclass(frozen=True)
class Verdict:
    kind: str  # exact | numerics | diverged
    index: int = -1  # the first differing token (-1 when exact)
    margin: float | None = None  # this run's top-1 minus top-2 there
    ar_margin: float | None = None  # AR's
    tol: float | None = None
    gap: float | None = None  # this run's score of its token minus its score of AR's token there
    ar_gap: float | None = None  # AR's score of its token minus its score of this run's

    def columns(self) -> dict:
        def num(v: float | None):
            return ("" if self.kind == EXACT else None) if v is None else round(v, 6)

        return {"equality": self.kind, "margin_at_divergence": num(self.margin),
                "ar_margin_at_divergence": num(self.ar_margin), "gap_at_divergence": num(self.gap),
                "ar_gap_at_divergence": num(self.ar_gap), "equality_tolerance": "" if self.tol is None else self.tol}


def classify(run, ar, dtype) -> Verdict:
    """The verdict on one run's tokens against AR's (see the module docstring): each side anything `Ranks.of`
    reads. AR's ranks are needed to call a difference numerics; without them (a reference of an older version)
    a difference is diverged."""
    run, ar = Ranks.of(run), Ranks.of(ar)
    i = first_divergence(run.tokens, ar.tokens)
    tol = tolerance(dtype)
    if i is None:
        return Verdict(EXACT, tol=tol)  # every row says which tolerance it was held to

    def at(xs: list[float]) -> float | None:
        return xs[i] if i < len(xs) else None

    if i >= min(len(run.tokens), len(ar.tokens)):  # one stopped where the other went on
        return Verdict(DIVERGED, i, at(run.margins), at(ar.margins), tol)
    gap, ar_gap = run.gap(i, ar.tokens[i]), ar.gap(i, run.tokens[i])
    near = gap is not None and ar_gap is not None and gap <= tol and ar_gap <= tol
    return Verdict(NUMERICS if near else DIVERGED, i, at(run.margins), at(ar.margins), tol, gap, ar_gap)
