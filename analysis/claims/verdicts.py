"""What a claim is and how an interval is judged against it: a verdict of direction (against the paper's
threshold), a verdict of size (against the paper's cited range), and where it lies against no effect at all."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOLDS, CONTRADICTED, INCONCLUSIVE = "holds", "contradicted", "inconclusive"
NOT_LOSSLESS = "not lossless"  # a comparison whose rows are not all AR's tokens: never counted as a verdict
WITHIN, ABOVE, BELOW = "within", "above", "below"  # size: the interval against the paper's range
CPU_READING = "CPU reading"  # a claim the paper makes of GPUs, read on a CPU: reported, never a verdict


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: what it says, its number and where the number comes from, the line its direction
    verdict is read against, and the range its size verdict is read against (None: the paper gives a direction
    only)."""

    number: int
    name: str
    says: str
    paper: str
    source: str
    threshold: float
    size: tuple[float, float] | None = None
    above: bool = True  # holds where the effect is above the threshold (False: below it)
    strict: bool = False  # the threshold itself does not hold
    unit: str = "%"  # "%": (ratio - 1) x 100; "x": the ratio
    flattered: str = ""  # the method whose copying flatters the claim: its copy split is shown beside it
    gpu: bool = False  # the paper's number is a GPU's clock: a CPU reads it, it cannot settle it
    restates: int = 0  # the claim whose comparison this one reads again (for size): not a separate confirmation

    @property
    def none(self) -> float:
        """The effect of no difference."""
        return 1.0 if self.unit == "x" else 0.0


def _finite(low: float, high: float) -> bool:
    return bool(np.isfinite(low) and np.isfinite(high))


def direction(claim: Claim, low: float, high: float) -> str:
    """holds / contradicted / inconclusive: where the interval lies against the claim's threshold."""
    if not _finite(low, high):
        return INCONCLUSIVE
    lo, hi, t = (low, high, claim.threshold) if claim.above else (-high, -low, -claim.threshold)
    if lo > t or (lo == t and not claim.strict):
        return HOLDS
    if hi < t or (hi == t and claim.strict):
        return CONTRADICTED
    return INCONCLUSIVE


def size(paper: tuple[float, float] | None, low: float, high: float) -> str:
    """within / above / below / inconclusive: the interval against the paper's range, in the effect's own units
    ("" where the paper gives no range). within: the whole interval inside the range; above or below: the whole
    interval past one end; inconclusive: it overlaps the range and reaches past it (or has no bounds)."""
    if paper is None:
        return ""
    if not _finite(low, high):
        return INCONCLUSIVE
    lo, hi = sorted(paper)
    if lo <= low and high <= hi:
        return WITHIN
    if low > hi:
        return ABOVE
    if high < lo:
        return BELOW
    return INCONCLUSIVE


def against_none(claim: Claim, low: float, high: float) -> str:
    """Where the interval lies against no difference (1x or 0%), whatever the paper's size of effect."""
    if not _finite(low, high):
        return "unclear"
    if low == high == claim.none:
        return "none"
    if low >= claim.none:
        return "above" if low > claim.none else "at or above"
    if high <= claim.none:
        return "below" if high < claim.none else "at or below"
    return "straddles"
