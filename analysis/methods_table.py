"""Methods x benchmarks table from result CSVs (never reruns a model).

tau = generated tokens / target forwards incl. prefill, pooled over prompts (AR = 1.0).
Spine/branch acceptance = accepted / drafted nodes of each source, pooled.

    python analysis/methods_table.py RESULTS_DIR [--budget 60] [--out table.md]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def load_rows(root: str | Path) -> pd.DataFrame:
    files = sorted(Path(root).rglob("results.csv"))
    if not files:
        raise SystemExit(f"no results.csv under {root}: run the sweep first")
    return pd.concat([pd.read_csv(f) for f in files], ignore_index=True)


def pooled(df: pd.DataFrame) -> pd.Series:
    out = {
        "prompts": len(df),
        "tau": df.new_tokens.sum() / df.steps.sum(),
        "speedup": (df.new_tokens / df.ar_tokens_per_s).sum() / df.wall_s.sum(),
        "lossless": f"{int(df.lossless.astype(str).eq('True').sum())}/{len(df)}",
    }
    if "spine_drafted" in df:
        sd, sa = df.spine_drafted.sum(), df.spine_accepted.sum()
        bd, ba = df.branch_drafted.sum(), df.branch_accepted.sum()
        out["spine_rate"] = sa / sd if sd else float("nan")
        out["branch_rate"] = ba / bd if bd else float("nan")
        out["ratio"] = out["spine_rate"] / out["branch_rate"] if bd and ba else float("nan")
    return pd.Series(out)


def methods_table(df: pd.DataFrame, budget: int | None = None) -> pd.DataFrame:
    if budget is not None:
        df = df[(df.budget == budget) | (df.method.isin(["ar", "pld", "tr"]))]
    parts = []
    for (method, bench), g in df.groupby(["method", "benchmark"]):
        parts.append(pooled(g).rename((method, bench)))
    for method, g in df.groupby("method"):
        parts.append(pooled(g).rename((method, "all")))
    table = pd.DataFrame(parts)
    table.index = pd.MultiIndex.from_tuples(table.index, names=["method", "benchmark"])
    return table.sort_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--budget", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    table = methods_table(load_rows(args.results), args.budget)
    tau = table["tau"].unstack("benchmark")
    text = ["## tau by method and benchmark (tokens / forwards incl. prefill, pooled)", "",
            tau.to_markdown(floatfmt=".3f"), "", "## all columns", "", table.to_markdown(floatfmt=".3f")]
    goose = [m for m in tau.index if m.startswith("goose-")]
    if "goose" in tau.index and goose:
        delta = (tau.loc[goose] / tau.loc["goose"] - 1) * 100
        text += ["", "## ablations: tau change vs goose (%)", "", delta.to_markdown(floatfmt="+.1f")]
    out = "\n".join(text)
    print(out)
    if args.out:
        Path(args.out).write_text(out + "\n")


if __name__ == "__main__":
    main()
