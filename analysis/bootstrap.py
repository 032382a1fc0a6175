"""Paired bootstrap intervals of pooled statistics over prompts: the arithmetic every claim is read with.

A side is one configuration's per-prompt arrays (tokens, forwards, drafted and accepted tokens, seconds); a
statistic pools the prompts a resample draws (sums, then a ratio), so a long answer weighs as much as its tokens.
The interval is scipy's BCa bootstrap, resampling prompts: one set of indices for every side when they hold the
same prompts (paired), else each side its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from scipy import stats

CONFIDENCE, RESAMPLES, SEED = 0.95, 9999, 0
MIN_PROMPTS = 3  # fewer give no interval: two prompts have three distinct resamples, an interval of nothing
COLUMNS = ("new_tokens", "steps", "accepted", "drafted", "wall_s", "ar_wall_s", "spine_accepted", "spine_drafted",
           "branch_accepted", "branch_drafted")


def _sum(side: dict, key: str, i: np.ndarray) -> np.ndarray:
    return side[key][i].sum(axis=-1)


def tau(side: dict, i: np.ndarray) -> np.ndarray:
    """Pooled tau of the prompts `i` (tokens / forwards)."""
    return _sum(side, "new_tokens", i) / _sum(side, "steps", i)


def acceptance(side: dict, i: np.ndarray) -> np.ndarray:
    """Accepted drafted tokens / drafted tokens over the prompts `i`."""
    return _sum(side, "accepted", i) / _sum(side, "drafted", i)


def speedup(side: dict, i: np.ndarray) -> np.ndarray:
    """AR's summed wall time / the method's over the prompts `i` (each timed beside the other)."""
    return _sum(side, "ar_wall_s", i) / _sum(side, "wall_s", i)


Statistic = Callable[[list[dict], list[np.ndarray]], np.ndarray]  # the sides, each side's prompt indices


def ratio(of: Callable, a: int = 0, b: int = 1) -> Statistic:
    return lambda sides, ix: of(sides[a], ix[a]) / of(sides[b], ix[b])


def alone(of: Callable) -> Statistic:
    return lambda sides, ix: of(sides[0], ix[0])


def over_best(of: Callable) -> Statistic:
    """Side 0 over the better of the others (chosen in every resample)."""
    return lambda sides, ix: of(sides[0], ix[0]) / np.maximum.reduce([of(s, i) for s, i in zip(sides[1:], ix[1:])])


def interval(statistic: Statistic, sides: list[dict], paired: bool) -> tuple[float, float, float]:
    """(estimate, low, high): the statistic on every prompt, and its 95% BCa bootstrap interval, resampling
    prompts: one set of indices for every side when `paired` (the sides hold the same prompts in the same
    order), else each side its own. NaN bounds where n < MIN_PROMPTS or every resample agrees with no spread
    to read."""
    sizes = [len(s["steps"]) for s in sides]
    if paired:
        assert len(set(sizes)) == 1, "paired sides hold the same prompts"

        def f(i, axis=-1):
            return statistic(sides, [i] * len(sides))

        data = (np.arange(sizes[0]),)
    else:
        def f(*ix, axis=-1):
            return statistic(sides, list(ix))

        data = tuple(np.arange(n) for n in sizes)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = float(f(*data))
        if min(sizes) < MIN_PROMPTS:
            return point, float("nan"), float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for method in ("BCa", "percentile"):  # BCa has no answer where every resample is alike
                ci = stats.bootstrap(data, f, vectorized=True, paired=False, n_resamples=RESAMPLES, method=method,
                                     confidence_level=CONFIDENCE, rng=np.random.default_rng(SEED)).confidence_interval
                if np.isfinite(ci.low) and np.isfinite(ci.high):
                    return point, float(ci.low), float(ci.high)
    return point, float("nan"), float("nan")


def source_acceptance(source: str) -> Callable:
    """Accepted / drafted tokens of one draft source (`spine`, `branch`) inside the same trees, over the prompts `i`."""
    return lambda side, i: _sum(side, f"{source}_accepted", i) / _sum(side, f"{source}_drafted", i)


def within(of: Callable, over: Callable) -> Statistic:
    """Two statistics of one side, the first over the second (one source's acceptance over another's, same trees)."""
    return lambda sides, ix: of(sides[0], ix[0]) / over(sides[0], ix[0])
