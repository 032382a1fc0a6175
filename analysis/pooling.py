"""Pooled numbers over groups of rows, the same pooling as the run summaries (goose.storage.metrics.summarize)."""

from __future__ import annotations

import pandas as pd

from goose.analysis.paper import METHOD_ORDER
from goose.storage.metrics import summarize

CONFIG = ["model", "method", "variant", "budget", "memory"]  # one configuration of a method
_RANK = {m: i for i, m in enumerate(METHOD_ORDER)}


def method_rank(method: str) -> int:
    """Where a method goes in tables and legends: the paper's order, others last."""
    return _RANK.get(str(method), len(_RANK))


def sources(g: pd.DataFrame) -> list[str]:
    """The draft sources the rows count (columns <source>_drafted, as goose.drafting.tree.SourceStats writes them)."""
    return [c[: -len("_drafted")] for c in g.columns if c.endswith("_drafted") and c != "window_drafted"
            and f"{c[: -len('_drafted')]}_accepted" in g]


def pooled(g: pd.DataFrame) -> dict:
    s = summarize(g.to_dict("records"))
    out = {k: s[k] for k in ("prompts", "tau", "speedup", "tokens_per_s", "lossless", "numerics", "diverged")}
    for src in sources(g):
        d = g[f"{src}_drafted"].sum()
        out[f"{src}_rate"] = g[f"{src}_accepted"].sum() / d if d else float("nan")
    if "continuation_tokens" in g:
        out["continuation_tokens_per_step"] = g.continuation_tokens.sum() / (g.steps.sum() - len(g))
        out["continuation_share"] = g.continuation_tokens.sum() / g.new_tokens.sum()
    return out


def lossless_cell(lossless: int, prompts: int, numerics: int = 0, diverged: int = 0) -> str:
    """`12/12`, or where rows differ from AR, by cause: `10/12 (2 numerics)`, `10/12 (1 numerics, 1 diverged)`."""
    why = ", ".join(f"{n} {k}" for n, k in ((numerics, "numerics"), (diverged, "diverged")) if n)
    return f"{int(lossless)}/{int(prompts)}" + (f" ({why})" if why else "")


def by(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rows = [{**dict(zip(keys, k if isinstance(k, tuple) else (k,))), **pooled(g)} for k, g in df.groupby(keys)]
    return pd.DataFrame(rows)
