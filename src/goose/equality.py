"""Lossless, or why not: a row's tokens against AR's, classified.

- `exact`: the same tokens.
- `numerics`: the first differing token is a swap of a near-tie: where AR chose a over b, this run chose b over a
  (each run's runner-up is the other's choice), and both margins (top-1 minus top-2 logit of the row that chose
  the token, perturbed under sampling) are within the dtype's tolerance. A margin of exactly 0 is a tie of two
  or more tokens, whose recorded runner-up is any one of them: that side's runner-up need not be the other's
  choice, so long as the other side's is (half precision ties three ways at a logit of 32). Verifying T tokens
  in one forward, or N requests in one batch, sums in another order than AR's one-token forward, which can move
  logits by a few units in the last place: at a near-tie that flips the choice, and everything after it follows
  another text.
- `diverged`: anything else; a bug until shown otherwise.

The tolerance is TOLERANCE_ULPS units in the last place of the dtype at a logit of LOGIT_SCALE, the size the
logits of the models here take (`tolerance`); every classified row reports it beside both margins.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from goose.metrics import first_divergence

LOGIT_SCALE = 32.0
TOLERANCE_ULPS = 16
EXACT, NUMERICS, DIVERGED = "exact", "numerics", "diverged"


def tolerance(dtype: torch.dtype | str) -> float:
    """TOLERANCE_ULPS units in the last place of `dtype` at a logit of LOGIT_SCALE."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""))
    return TOLERANCE_ULPS * torch.finfo(dtype).eps * LOGIT_SCALE


@dataclass(frozen=True)
class Verdict:
    kind: str  # exact | numerics | diverged
    index: int = -1  # the first differing token (-1 when exact)
    margin: float | None = None  # this run's margin at that token
    ar_margin: float | None = None  # AR's margin there
    tol: float | None = None

    def columns(self) -> dict:
        blank = "" if self.kind == EXACT else None
        return {"equality": self.kind, "margin_at_divergence": blank if self.margin is None else round(self.margin, 6),
                "ar_margin_at_divergence": blank if self.ar_margin is None else round(self.ar_margin, 6),
                "equality_tolerance": "" if self.tol is None else self.tol}


def classify(tokens: list[int], margins: list[float], runners_up: list[int], ar_tokens: list[int],
             ar_margins: list[float] | None, ar_runners_up: list[int] | None, dtype) -> Verdict:
    """The verdict on one row (see the module docstring). AR's margins are needed to call a difference
    numerics; without them (a reference of an older version) a difference is diverged."""
    i = first_divergence(tokens, ar_tokens)
    if i is None:
        return Verdict(EXACT)
    tol = tolerance(dtype)
    if i >= min(len(tokens), len(ar_tokens)) or not ar_margins or i >= len(ar_margins) or i >= len(margins):
        return Verdict(DIVERGED, i, margins[i] if i < len(margins) else None,
                       ar_margins[i] if ar_margins and i < len(ar_margins) else None, tol)
    mine, theirs = runners_up[i] == ar_tokens[i], ar_runners_up[i] == tokens[i]
    swapped = (mine or margins[i] == 0) and (theirs or ar_margins[i] == 0) and (mine or theirs)
    near = margins[i] <= tol and ar_margins[i] <= tol
    return Verdict(NUMERICS if swapped and near else DIVERGED, i, margins[i], ar_margins[i], tol)
