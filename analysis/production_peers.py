"""The practitioner's question (#70): GOOSE against the training-free drafters that serving engines ship (SGLang's
NGRAM, vLLM's ngram, llama.cpp's ngram-mod and ngram-simple), with PLD and GOOSE-suffix beside them, on one engine.

Per model x benchmark, in two readings (the whole answer, and its loop-free window: analysis.loops.windows), GOOSE
at each budget it ran against each peer: both sides' tau, GOOSE's ratio over the peer with its paired 95% bootstrap
interval over the prompts both ran (BCa; n = those prompts), and, where both timed AR beside them, the speedup of
each. Each side is its method's default configuration (analysis.selection.pick)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from goose.analysis.bootstrap import COLUMNS, interval, ratio, tau
from goose.analysis.loops import windows
from goose.analysis.paper import GOOSE, PAPER_BENCHMARKS, PRODUCTION_BESIDE, PRODUCTION_PEERS
from goose.analysis.selection import pick
from goose.storage.metrics import FIXED

WHOLE, WINDOW = "whole answer", "loop-free window"


def _arrays(g: pd.DataFrame) -> dict:
    return {c: g[c].to_numpy(dtype=float) if c in g else np.full(len(g), np.nan) for c in COLUMNS}


def _speedup(g: pd.DataFrame) -> float:
    timed = g[g.speedup.notna() & ~g.speedup_stale.eq(True)] if "speedup" in g else g.iloc[0:0]
    return float(timed.ar_wall_s.sum() / timed.wall_s.sum()) if len(timed) == len(g) and len(g) else float("nan")


def _pair(cell: pd.DataFrame, budget: str, peer: str) -> dict | None:
    mine, theirs = pick(cell, GOOSE, budget), pick(cell, peer, budget)
    if budget == "auto" and theirs.empty:
        theirs = pick(cell, peer, FIXED)
    if mine.empty or theirs.empty:
        return None
    both = sorted(set(mine.prompt_id) & set(theirs.prompt_id))
    a = mine[mine.prompt_id.isin(both)].sort_values("prompt_id")
    b = theirs[theirs.prompt_id.isin(both)].sort_values("prompt_id")
    if a.empty:
        return None
    est, low, high = interval(ratio(tau), [_arrays(a), _arrays(b)], paired=True)
    pct = lambda v: (v - 1) * 100  # noqa: E731
    return {"goose budget": budget, "peer": peer, "n": len(a),
            "goose tau": a.new_tokens.sum() / a.steps.sum(), "peer tau": b.new_tokens.sum() / b.steps.sum(),
            "goose vs peer [95% CI]": f"{pct(est):+.1f}% [{pct(low):+.1f}, {pct(high):+.1f}]"
            if np.isfinite(low) else f"{pct(est):+.1f}% (no interval: n = {len(a)})",
            "goose speedup": _speedup(a), "peer speedup": _speedup(b)}


def production_peers(df: pd.DataFrame) -> pd.DataFrame:
    """The table: one row per reading x model x benchmark x GOOSE budget x peer (see the module docstring)."""
    rows = df[df.benchmark_name.isin(PAPER_BENCHMARKS) & ~df.chat_template.astype(bool)]
    if rows.empty:
        raise SystemExit("production_peers: no rows of the paper's five benchmarks with raw prompts: run "
                         "`make reproduce-production-peers`")
    peers = (*PRODUCTION_PEERS, *PRODUCTION_BESIDE)
    absent = [m for m in peers if m not in set(rows.method)]
    if GOOSE not in set(rows.method) or len(absent) == len(peers):
        side = "GOOSE" if GOOSE not in set(rows.method) else f"production drafter ({', '.join(peers)})"
        raise SystemExit(f"production_peers: these rows have no {side}: run it on the same prompts (python run.py "
                         f"method=... results_dir=...), or `make reproduce-production-peers` for the whole comparison")
    if absent:
        print(f"[analysis] production_peers: no rows of {', '.join(absent)}: not compared")
    whole = rows[~rows.stop_at_loop.astype(bool)] if "stop_at_loop" in rows else rows
    out = []
    for reading, source in ((WHOLE, whole), (WINDOW, windows(rows))):
        for (model, bench), cell in source.groupby(["model", "benchmark_name"], sort=True):
            for budget in sorted(set(cell.budget[cell.method == GOOSE])):
                for peer in peers:
                    found = _pair(cell, budget, peer)
                    if found:
                        out.append({"reading": reading, "model": model, "benchmark": bench, **found})
    if not out:
        raise SystemExit("production_peers: no cell holds GOOSE and a production drafter on the same prompts: run "
                         "`make reproduce-production-peers`")
    return pd.DataFrame(out).round(3)
