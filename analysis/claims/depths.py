"""Claim 1 at each depth, the paper's way: inside GOOSE's own trees, the acceptance of context-matched (spine) nodes
over that of adjacency (branch) nodes at depth 1, 2, ... (the rows' `<source>_by_depth`; over the loop-free window,
`loop_free_<source>_by_depth`, which analysis.loops puts in its place). Per model x benchmark and depth: each
source's pooled acceptance, their ratio with its paired 95% BCa interval over the prompts (n: GOOSE's prompts whose
rows carry the counts and drafted both sources at that depth), and where it lies against the paper's 2-18x."""

from __future__ import annotations

import numpy as np
import pandas as pd

from goose.analysis.bootstrap import MIN_PROMPTS, interval, source_acceptance, within
from goose.analysis.loops import parse
from goose.analysis.paper import GOOSE, SOURCE_GAP_RATIO
from goose.analysis.selection import pick

SPINE, BRANCH = "spine", "branch"


def _order(depth: str) -> int:
    return int(depth.rstrip("+"))


def _where(low: float, high: float) -> str:
    lo, hi = SOURCE_GAP_RATIO
    if not (np.isfinite(low) and np.isfinite(high)):
        return "inconclusive"
    return "within" if lo <= low and high <= hi else "above" if low > hi else "below" if high < lo else "inconclusive"


def _why_none(n: int) -> str:
    if n < MIN_PROMPTS:
        return f"n = {n}, below {MIN_PROMPTS}"
    return f"n = {n}: the resamples give no finite bound (too few accepted branch nodes to resample)"


def depth_table(cells: dict[tuple[str, str], pd.DataFrame]) -> pd.DataFrame:
    """One row per model x benchmark x depth from each cell's rows (the claims' cells of one reading)."""
    out = []
    for (model, bench), cell in sorted(cells.items()):
        g = pick(cell, GOOSE)
        if g.empty or f"{SPINE}_by_depth" not in g or f"{BRANCH}_by_depth" not in g:
            continue
        g = g[g[f"{SPINE}_by_depth"].map(lambda v: isinstance(v, str)) & g[f"{BRANCH}_by_depth"].notna()]
        spine, branch = g[f"{SPINE}_by_depth"].map(parse).tolist(), g[f"{BRANCH}_by_depth"].map(parse).tolist()
        for depth in sorted({d for p in spine + branch for d in p}, key=_order):
            keep = [i for i in range(len(g)) if spine[i].get(depth, (0, 0))[1] and branch[i].get(depth, (0, 0))[1]]
            if not keep:
                continue
            side = {"steps": np.ones(len(keep))}
            for name, counts in ((SPINE, spine), (BRANCH, branch)):
                side[f"{name}_accepted"] = np.array([counts[i][depth][0] for i in keep], dtype=float)
                side[f"{name}_drafted"] = np.array([counts[i][depth][1] for i in keep], dtype=float)
            rate = {s: side[f"{s}_accepted"].sum() / side[f"{s}_drafted"].sum() for s in (SPINE, BRANCH)}
            if not rate[BRANCH]:
                out.append({"model": model, "benchmark": bench, "depth": depth, "n": len(keep),
                            "spine acceptance": round(rate[SPINE], 3), "branch acceptance": 0.0,
                            "spine / branch [95% CI]": "no branch node accepted", "size": "inconclusive"})
                continue
            est, low, high = interval(within(source_acceptance(SPINE), source_acceptance(BRANCH)), [side], paired=True)
            out.append({"model": model, "benchmark": bench, "depth": depth, "n": len(keep),
                        "spine acceptance": round(rate[SPINE], 3), "branch acceptance": round(rate[BRANCH], 3),
                        "spine / branch [95% CI]": f"{est:.1f}x [{low:.1f}, {high:.1f}]" if np.isfinite(low)
                        else f"{est:.1f}x (no interval: {_why_none(len(keep))})", "size": _where(low, high)})
    return pd.DataFrame(out)
