"""The paper's comparison tables (1 and 2) and the all-methods tables, from result rows."""

from __future__ import annotations

import pandas as pd

from goose.analysis.comparable import all_scope
from goose.analysis.paper import (
    ABLATION_DELTA_PCT,
    ABLATIONS,
    GOOSE,
    SUFFIX_METHODS,
    TABLE1,
    TABLE1_MACRO_GAIN_PCT,
    TABLE1_TAU,
)
from goose.analysis.pooling import CONFIG, by, lossless_cell, method_rank
from goose.storage.metrics import FIXED


def _at(df: pd.DataFrame) -> str:
    budgets = sorted(set(df.budget.astype(str)) - {FIXED})
    return f" at budget {', '.join(budgets)}" if budgets else ""


def table1(df: pd.DataFrame) -> pd.DataFrame:
    """GOOSE vs balanced Iso(3)/Iso(5) at equal budget: tau and GOOSE's gain."""
    goose, isos = TABLE1
    missing = [m for m in (goose, *isos) if m not in set(df.method)]
    if missing:
        raise SystemExit(f"table1: no rows of {', '.join(missing)}{_at(df)} (it compares {goose} with "
                         f"{' and '.join(isos)} at one budget); run `make reproduce-table1`")
    t = by(df[df.method.isin([goose, *isos])], ["model", "benchmark", "budget", "method"])
    wide = t.pivot_table(index=["model", "benchmark", "budget"], columns="method", values="tau").reset_index()
    n = t.groupby(["model", "benchmark", "budget"]).prompts.min().rename("n").reset_index()
    missing = [m for m in (goose, *isos) if m not in wide]
    if missing:
        raise SystemExit(f"table1: no cell has {goose}, {' and '.join(isos)} together; run `make reproduce-table1`")
    for k in isos:
        wide[f"gain_vs_{k}_%"] = (wide[goose] / wide[k] - 1) * 100
    wide["gain_vs_best_iso_%"] = (wide[goose] / wide[list(isos)].max(axis=1) - 1) * 100
    wide["paper_goose"] = [TABLE1_TAU.get((m, b), (None, None))[0] for m, b in zip(wide.model, wide.benchmark)]
    wide["paper_iso"] = [TABLE1_TAU.get((m, b), (None, None))[1] for m, b in zip(wide.model, wide.benchmark)]
    wide = wide.merge(n, on=["model", "benchmark", "budget"])
    names = df.drop_duplicates("benchmark").set_index("benchmark").benchmark_name
    same = wide.assign(_name=wide.benchmark.map(names)).groupby(["model", "budget", "_name"]).benchmark
    twice = wide[same.transform("nunique") > 1]
    if not twice.empty:  # one benchmark in two configurations (lengths, templates, prompt files): not averaged twice
        print(f"[analysis] table1: no macro mean: {', '.join(sorted(set(twice.benchmark)))} are one benchmark in "
              "several configurations; compare them per row")
        return wide
    macro = {"model": "macro mean", "benchmark": "", "budget": "",
             **{c: wide[c].mean() for c in wide.columns if c.startswith("gain_")},
             "paper_gain_%": TABLE1_MACRO_GAIN_PCT}
    return pd.concat([wide, pd.DataFrame([macro])], ignore_index=True)


def table2(df: pd.DataFrame) -> pd.DataFrame:
    """Ablations: tau of each switch and its change vs full GOOSE, per benchmark and pooled."""
    sub = df[df.method.isin([GOOSE, *ABLATIONS])]
    if GOOSE not in set(sub.method) or set(sub.method) == {GOOSE}:
        missing = "full GOOSE" if GOOSE not in set(sub.method) else "an ablation"
        raise SystemExit(f"table2: no rows of {missing}{_at(df)} (it compares GOOSE with its ablations, goose-no-*, "
                         "at one budget); run `make reproduce-table2`")
    parts = [by(sub, ["model", "benchmark", "method"]),
             by(all_scope(sub, "table2"), ["model", "method"]).assign(benchmark="all")]
    t = pd.concat(parts, ignore_index=True)
    wide = t.pivot_table(index=["model", "method"], columns="benchmark", values="tau")
    n = t.pivot_table(index=["model", "method"], columns="benchmark", values="prompts")
    rows = []
    for model in wide.index.get_level_values(0).unique():
        if (model, GOOSE) not in wide.index:
            continue
        full = wide.loc[(model, GOOSE)]
        for m in [GOOSE, *ABLATIONS]:
            if (model, m) not in wide.index:
                continue
            row = {"model": model, "variant": ABLATIONS.get(m, "GOOSE (full)")}
            for b, v in wide.loc[(model, m)].items():
                row[f"tau_{b}"] = v
                row[f"n_{b}"] = n.loc[(model, m)].get(b)
                if m != GOOSE:
                    row[f"delta_{b}_%"] = (v / full[b] - 1) * 100
            row["paper_delta_%"] = ABLATION_DELTA_PCT.get(m)
            rows.append(row)
    t = pd.DataFrame(rows)
    cols = ["model", "variant"] + sorted(c for c in t if c.startswith("tau_")) + \
        sorted(c for c in t if c.startswith("delta_")) + ["paper_delta_%"] + sorted(c for c in t if c.startswith("n_"))
    return t[cols]


def all_methods(df: pd.DataFrame) -> pd.DataFrame:
    """tau and speedup of every configuration (method, its variant where a cell has several, budget, memory
    mode), per benchmark and pooled ("all"), with how many prompts were lossless."""
    if df.empty:
        raise SystemExit("no rows of these methods")
    t = pd.concat([by(df, [*CONFIG, "benchmark"]), by(all_scope(df, "all_methods"), CONFIG).assign(benchmark="all")])
    wide = t.pivot(index=CONFIG, columns="benchmark", values=["tau", "speedup", "prompts"])
    benches = [b for b in wide.columns.get_level_values(1).unique() if b != "all"] + ["all"]
    wide = wide[[(v, b) for v in ("tau", "speedup", "prompts") for b in benches if (v, b) in wide.columns]]
    wide.columns = [f"{'n' if v == 'prompts' else v} {b}" for v, b in wide.columns]
    wide = wide.dropna(axis=1, how="all").reset_index()
    every = by(df, CONFIG)  # losslessness counts every row of a configuration, whatever "all" pools
    every["lossless"] = [lossless_cell(*v) for v in zip(every.lossless, every.prompts, every.numerics, every.diverged)]
    wide = wide.merge(every[[*CONFIG, "lossless"]], on=CONFIG, how="left")
    wide["_order"] = wide.method.map(method_rank)
    wide["_auto"] = wide.budget.eq("auto")
    keys = ["model", "_order", "method", "variant", "_auto", "budget", "memory"]
    wide = wide.sort_values(keys).drop(columns=["_order", "_auto"]).reset_index(drop=True).round(3)
    return wide if wide.variant.ne("").any() else wide.drop(columns="variant")


def suffix(df: pd.DataFrame) -> pd.DataFrame:
    """SuffixDecoding (chain and tree) vs GOOSE, GOOSE with a suffix-tree spine, Token Recycling and
    PLD: every budget and memory mode kept apart."""
    if not df.method.isin(SUFFIX_METHODS).any():
        raise SystemExit(f"suffix: needs rows of {', '.join(SUFFIX_METHODS)}; run `make reproduce-suffix`")
    return all_methods(df[df.method.isin(SUFFIX_METHODS)])


