"""Speedup against concurrency: every configuration's rows at each concurrency, against batched AR at the same
concurrency (the rows' speedups divide by it: goose.running.timing.BatchTimer), with aggregate throughput, time per
output token and how many requests were exact, numerics or diverged against unbatched AR."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from goose.analysis.comparable import all_scope
from goose.analysis.pooling import method_rank, pooled

KEY = ["model", "benchmark", "method", "variant", "budget", "memory"]


def _tpot_ms(g: pd.DataFrame) -> pd.Series:
    """Time per output token after the first (the row's tpot_s: the prefill excluded, at every concurrency);
    rows written before that column have it from their timeline where they kept one."""
    timeline = ((g.done_s - g.first_token_s) / (g.new_tokens - 1)).where(g.new_tokens > 1)
    return (g.tpot_s.fillna(timeline) * 1e3).dropna()


def concurrency_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and concurrency, benchmarks pooled ("all") and each on its own."""
    rows = []
    for bench in [None, *sorted(df.benchmark.unique())]:
        sub = all_scope(df, "concurrency") if bench is None else df[df.benchmark == bench]
        for key, g in sub.groupby([k for k in KEY if k != "benchmark"] + ["concurrency"]):
            cfg = dict(zip([k for k in KEY if k != "benchmark"] + ["concurrency"], key))
            p = pooled(g)
            tpot, ttft = _tpot_ms(g), g.ttft_s.dropna() * 1e3
            kinds = g.equality.value_counts() if "equality" in g else pd.Series(dtype=int)
            rows.append({**cfg, "benchmark": "all" if bench is None else bench, "prompts": p["prompts"],
                         "tokens/s": p["tokens_per_s"], "x AR (same concurrency)": p["speedup"], "tau": p["tau"],
                         "TPOT p50 ms": tpot.median() if len(tpot) else None,
                         "TPOT p95 ms": tpot.quantile(0.95) if len(tpot) else None,
                         "TTFT p50 ms": ttft.median() if len(ttft) else None,
                         "exact / numerics / diverged": "{} / {} / {}".format(
                             *(int(kinds.get(k, 0)) for k in ("exact", "numerics", "diverged")))})
    t = pd.DataFrame(rows)
    t["_rank"] = t.method.map(method_rank)
    t["_all"] = t.benchmark.ne("all")
    t = t.sort_values(["model", "_all", "benchmark", "_rank", "method", "budget", "memory", "concurrency"])
    t = t.drop(columns=["_rank", "_all"]).reset_index(drop=True).round(3)
    return t if t.variant.ne("").any() else t.drop(columns="variant")


def plot_concurrency(df: pd.DataFrame):
    """Speedup over batched AR against concurrency, one line per configuration, AR = 1."""
    t = concurrency_table(df)
    t = t[t.benchmark == "all"]
    if t.concurrency.nunique() < 2:
        raise SystemExit(f"concurrency_figure: needs rows at two or more concurrencies, the rows have "
                         f"{', '.join(map(str, sorted(t.concurrency.unique())))}; sweep concurrency=1,4,16 "
                         "(`make reproduce-concurrency`)")
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, g in t.groupby(["model", "method", "budget", "memory"], sort=False):
        g = g.sort_values("concurrency")
        ax.plot(g.concurrency, g["x AR (same concurrency)"], marker="o", label=f"{key[1]} (B={key[2]}, {key[3]})")
    ax.axhline(1.0, color="black", lw=0.8, label="batched AR")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(t.concurrency.unique()), [str(c) for c in sorted(t.concurrency.unique())])
    ax.set_xlabel("requests in one forward (concurrency)")
    ax.set_ylabel("speedup over batched AR at the same concurrency (x)")
    ax.set_title("Does speculation still pay when requests share a forward?")
    ax.legend(fontsize=7)
    return fig


def plot_bench(data: dict):
    """The figure of a `bench.py --concurrency ... --json` file: x batched AR against concurrency, one line per method,
    titled with what it was measured on."""
    cells = pd.DataFrame(data["cells"])
    fig, ax = plt.subplots(figsize=(8, 5))
    for method, g in cells.groupby("method", sort=False):
        g = g.sort_values("concurrency")
        ax.plot(g.concurrency, g.x_ar, marker="o", label=method)
    ax.axhline(1.0, color="black", lw=0.8)
    levels = sorted(cells.concurrency.unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.set_xlabel("requests in one forward (concurrency)")
    ax.set_ylabel("tokens/s over batched AR at the same concurrency (x)")
    ax.set_title(f"{data['model']} {data.get('dtype', '')} on {data.get('device', '')} "
                 f"({data.get('threads', '?')} threads, engine.backend={data.get('backend', '?')}), "
                 f"{data['prompts']} prompts x {data['max_new_tokens']} tokens, median of {data['repeats']} repeats, "
                 f"{data['when'][:10]}", fontsize=8)
    ax.legend(fontsize=8)
    return fig


if __name__ == "__main__":  # python -m goose.analysis.concurrency BENCH.json FIGURE.png
    import json
    import sys
    from pathlib import Path

    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m goose.analysis.concurrency BENCH.json FIGURE.png (a bench.py --json file)")
    plot_bench(json.loads(Path(sys.argv[1]).read_text())).savefig(sys.argv[2], dpi=120, bbox_inches="tight")
