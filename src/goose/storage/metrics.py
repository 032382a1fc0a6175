"""Metrics over generations and result rows (tau convention: tokens / forwards incl. prefill).

A row's speedup counts only when its AR timing was taken under the same conditions as the
method's own: same host, threads, torch, backend and device, and, for a timing reused from
the reference store (`cached`), the same sweep. Anything else is stale: tau still counts,
the speedup does not.
"""

from __future__ import annotations

import math

FIXED = "fixed"  # the budget a row records for a method no numeric budget changes (ar, pld, tr)
SAME_CONDITIONS = ("host", "threads", "torch", "backend", "device_name")
MEASURED = ("interleaved", "cached", "self")  # speedup sources with an AR timing behind them


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or None when the sequences are identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


SPLIT_N = 4  # a drafted token repeats earlier text when it ends an n-gram of this size found there


def copy_split(prompt: list[int], out: list[int], drafted: list[bool]) -> list[int]:
    """Of the accepted drafted tokens of `out`: [how many end a SPLIT_N-gram that the answer itself already
    contained before (the model repeating its own output), how many one the prompt contains (and the answer
    did not), the rest]. Small models' greedy text loops over long answers; this says how much of a
    method's gain is that loop."""
    n = SPLIT_N
    seq = prompt + out
    in_prompt = {tuple(prompt[i : i + n]) for i in range(len(prompt) - n + 1)}
    in_answer: set[tuple] = set()
    split = [0, 0, 0]
    for j, is_drafted in enumerate(drafted):
        at = len(prompt) + j  # seq[at] == out[j]
        gram = tuple(seq[at - n + 1 : at + 1]) if at >= n - 1 else None
        if is_drafted:
            split[0 if gram in in_answer else 1 if gram in in_prompt else 2] += 1
        if gram is not None and at - n + 1 >= len(prompt):
            in_answer.add(gram)  # wholly inside the answer
    return split


def _true(v) -> bool:
    return v is True or str(v).lower() == "true"


def _as_float(v) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x


def speedup_stale(row: dict) -> bool | None:
    """None: no speedup was measured (speedup_reference=none). True: the AR timing behind it was
    not taken under this row's conditions (or the row predates timing provenance)."""
    source = str(row.get("speedup_source", ""))
    if source in ("none", "nan", ""):
        return None if source == "none" else True
    if source not in MEASURED or not _as_float(row.get("ar_wall_s")) > 0:
        return True
    if source == "self":
        return False
    if any(str(row.get(k)) != str(row.get(f"ar_{k}")) for k in SAME_CONDITIONS):
        return True
    return source == "cached" and str(row.get("sweep_id")) != str(row.get("ar_sweep_id"))


def summarize(rows: list[dict]) -> dict:
    """Pooled numbers over result rows: tau = sum tokens / sum forwards; speedup = summed AR wall
    time / summed wall time over the rows whose speedup is not stale (`speedup_prompts` of them)."""
    tokens = sum(int(r["new_tokens"]) for r in rows)
    steps = sum(int(r["steps"]) for r in rows)
    wall = sum(float(r["wall_s"]) for r in rows)
    timed = [r for r in rows if speedup_stale(r) is False]
    t_wall = sum(float(r["wall_s"]) for r in timed)
    t_ar = sum(float(r["ar_wall_s"]) for r in timed)
    t_tokens = sum(int(r["new_tokens"]) for r in timed)
    n = len(rows)
    return {
        "prompts": n,
        "new_tokens": tokens,
        "steps": steps,
        "tau": tokens / steps if steps else 0.0,
        "mean_tau": sum(float(r["tau"]) for r in rows) / n if n else 0.0,
        "tokens_per_s": tokens / wall if wall else 0.0,
        "ar_tokens_per_s": t_tokens / t_ar if t_ar else math.nan,
        "speedup": t_ar / t_wall if t_wall and t_ar else math.nan,
        "speedup_prompts": len(timed),
        "speedup_stale": sum(speedup_stale(r) is True for r in rows),
        "lossless": sum(_true(r["lossless"]) for r in rows),
        # the rows that differ from AR, by cause (goose.storage.equality): a near-tie swapped, or anything else
        "numerics": sum(str(r.get("equality")) == "numerics" for r in rows),
        "diverged": sum(not _true(r["lossless"]) and str(r.get("equality")) != "numerics" for r in rows),
        # drafted nodes over the rows (None where a drafter counts none: AR): a run that drafted nothing says so
        "drafted": sum(int(float(r["drafted"])) for r in rows) if all(str(r.get("drafted", "")) not in ("", "nan")
                                                                      for r in rows) and rows else None,
    }
