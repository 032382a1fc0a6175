"""Metrics over generations and result rows (tau convention: tokens / forwards incl. prefill)."""

from __future__ import annotations


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token, or None when the sequences are identical."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def _true(v) -> bool:
    return v is True or str(v).lower() == "true"


def summarize(rows: list[dict]) -> dict:
    """Pooled numbers over result rows: tau = sum tokens / sum forwards; speedup from summed times."""
    tokens = sum(int(r["new_tokens"]) for r in rows)
    steps = sum(int(r["steps"]) for r in rows)
    wall = sum(float(r["wall_s"]) for r in rows)
    ar_wall = sum(int(r["new_tokens"]) / float(r["ar_tokens_per_s"]) for r in rows if float(r["ar_tokens_per_s"]))
    n = len(rows)
    return {
        "prompts": n,
        "new_tokens": tokens,
        "steps": steps,
        "tau": tokens / steps if steps else 0.0,
        "mean_tau": sum(float(r["tau"]) for r in rows) / n if n else 0.0,
        "tokens_per_s": tokens / wall if wall else 0.0,
        "ar_tokens_per_s": tokens / ar_wall if ar_wall else 0.0,
        "speedup": ar_wall / wall if wall else 0.0,
        "lossless": sum(_true(r["lossless"]) for r in rows),
    }
