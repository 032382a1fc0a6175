"""Synergy: GOOSE against its two sources at equal budget and against PLD / Token Recycling as published,
the source gap, and the synergy figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from goose.analysis.comparable import all_scope
from goose.analysis.load import cell_text, paper_settings
from goose.analysis.paper import (
    GAP_PAIRS,
    GOOSE,
    OWN_SWITCHES,
    PUBLISHED,
    SINGLE_SOURCES,
    SOURCE_GAP_RATIO,
    SYNERGY_GAIN_PCT,
)
from goose.analysis.pooling import pooled
from goose.analysis.writers import ALERT


def _matched(cell: pd.DataFrame, methods: tuple[str, ...], same_drafter: bool = False
             ) -> tuple[dict[str, pd.DataFrame], str]:
    """Each method's rows in one cell, or why they cannot be compared: a method missing, runs over
    different prompts (a shorter run is not a smaller sample of the same thing) or, with
    `same_drafter`, GOOSE and its sources run with different hyperparameters."""
    found = {m: cell[cell.method == m] for m in methods}
    missing = [m for m, g in found.items() if g.empty]
    if missing:
        return found, f"no {' or '.join(missing)} run here"
    ids = {m: frozenset(zip(g.benchmark, g.prompt_id.astype(str))) for m, g in found.items()}
    if len(set(ids.values())) > 1:
        counts = ", ".join(f"{m} {len(v)}" for m, v in ids.items())
        return found, f"different prompts ({counts}): rerun them with the same n_prompts"
    if same_drafter:
        differ = [c for c in cell if c.startswith("method.drafter.") and c not in OWN_SWITCHES
                  and len({cell_text(v) for g in found.values() for v in g[c].unique()}) > 1]
        if differ:
            return found, f"different hyperparameters ({', '.join(differ)}): not the same budget and sources"
    return found, ""


def _width(g: pd.DataFrame) -> str:
    """Nodes per verification (incl. the root) a method really used: mean (max where recorded)."""
    checks = (g.steps - 1).clip(lower=1)
    mean = (g.mean_width * checks).sum() / checks.sum() if "mean_width" in g and g.mean_width.notna().all() else None
    top = g.max_width.max() if "max_width" in g and g.max_width.notna().all() else None
    if mean is None:
        return ""
    return f"{mean:.1f}" + (f" (max {int(top)})" if top is not None else "")


def _refused(where: dict, why: str) -> dict:
    print(f"[analysis] not compared: {', '.join(f'{k}={v}' for k, v in where.items())}: {why}")
    return {**where, "not compared": why}


def _gain(found: dict[str, pd.DataFrame], others: tuple[str, ...], alert: bool = True) -> dict:
    """GOOSE's tau over the best of `others` on the same prompts, and whether it is at least each
    (`alert`: a shortfall breaks a claim and is set in bold)."""
    tau = {m: pooled(g)["tau"] for m, g in found.items()}
    best = max(others, key=tau.get)
    low = [f"GOOSE {tau[GOOSE]:.3f} < {m} {tau[m]:.3f}" for m in others if tau[GOOSE] < tau[m]]
    verdict = (f"{ALERT}: " if alert else "below: ") + "; ".join(low) if low else "holds"
    return {"prompts": len(found[GOOSE]), **{f"tau {m}": tau[m] for m in found},
            "best single source": best, "gain %": (tau[GOOSE] / tau[best] - 1) * 100,
            "gain (tau points)": tau[GOOSE] - tau[best],
            "GOOSE >= each": verdict,
            **{f"nodes/verify {m}": _width(g) for m, g in found.items()}}


def _per_benchmark(df: pd.DataFrame, group: list[str], methods: tuple[str, ...], row,
                   same_drafter: bool = False) -> pd.DataFrame:
    """One row per benchmark of every group that has GOOSE, then one ("all compared") pooling the
    benchmarks whose runs could be compared; `row(found)` computes a compared row."""
    rows = []
    for key, g in df[df.method.isin(methods)].groupby(group):
        if GOOSE not in set(g.method):
            continue
        where = dict(zip(group, key if isinstance(key, tuple) else (key,)))
        fine = []
        for bench, cell in g.groupby("benchmark"):
            found, why = _matched(cell, methods, same_drafter)
            if why:
                rows.append(_refused({**where, "benchmark": bench}, why))
                continue
            fine.append(found)
            rows.append({**where, "benchmark": bench, **row(found)})
        poolable = set(all_scope(g, "synergy").benchmark)  # never two configurations of one benchmark
        fine = [f for f in fine if set(f[GOOSE].benchmark) <= poolable]
        if len(fine) > 1:
            together = {m: pd.concat([f[m] for f in fine]) for m in methods}
            rows.append({**where, "benchmark": "all compared", **row(together)})
    if not any("not compared" not in r for r in rows):
        why = f" ({rows[0]['not compared']})" if rows else ""
        raise SystemExit(f"needs GOOSE runs beside {', '.join(methods[1:])} on the same prompts{why}; run "
                         "`make reproduce-synergy`")
    t = pd.DataFrame(rows)
    t["prompts"] = t.get("prompts", pd.Series(index=t.index, dtype=float)).astype("Int64")
    return t[[c for c in t if c != "not compared"] + (["not compared"] if "not compared" in t else [])]


def synergy(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's synergy at equal budget: GOOSE's tau over the better of its two sources, each given
    GOOSE's whole budget (spine-only, branches-only), per model, budget, memory mode and benchmark, on
    the same prompts; whether GOOSE is at least each (P4, non-degradation); and the mechanism: tokens
    accepted after the spine broke, per forward (tau points GOOSE gets from spine continuation)."""
    band = f"{SYNERGY_GAIN_PCT[0]} to {SYNERGY_GAIN_PCT[1]}"

    def row(found):
        g = found[GOOSE]
        rescue = g.continuation_tokens.sum() / g.steps.sum() if "continuation_tokens" in g else float("nan")
        return {**_gain(found, SINGLE_SOURCES), "paper gain %": band, "spine-break rescue (tau points)": rescue}

    return _per_benchmark(df, ["model", "budget", "memory"], (GOOSE, *SINGLE_SOURCES), row,
                          same_drafter=True).round(3)


def synergy_published(df: pd.DataFrame) -> pd.DataFrame:
    """GOOSE against PLD and Token Recycling as published (PLD's 10-token chain, TR's 81-node template
    with its hot start): not an equal-budget comparison, the one users make. Each method in its paper
    memory mode; nodes per verification say what each really used."""
    goose = df[df.method == GOOSE]
    if goose.empty or not df.method.isin(PUBLISHED).any():
        raise SystemExit(f"synergy_published: needs {GOOSE} beside {' or '.join(PUBLISHED)} on one model; "
                         "run `make reproduce-synergy`")
    rows, why = [], ""
    for (model, budget), g in goose.groupby(["model", "budget"]):
        peers = df[(df.model == model) & df.method.isin(PUBLISHED)]
        try:
            part = _per_benchmark(pd.concat([g, peers]), ["model"], (GOOSE, *PUBLISHED),
                                  lambda found: _gain(found, PUBLISHED, alert=False))
        except SystemExit as e:  # nothing compared for this model and budget: the others still are
            why = str(e.code)
            continue
        rows.append(part.assign(budget=budget))
    if not rows:
        raise SystemExit(f"synergy_published: {why}")
    t = pd.concat(rows, ignore_index=True)
    t = t[["model", "budget", *[c for c in t if c not in ("model", "budget")]]]
    return t.rename(columns={"best single source": "best published", "gain %": "gain vs best published %"}).round(3)


def _rate(g: pd.DataFrame, source: str = "") -> float:
    d, a = (f"{source}_drafted", f"{source}_accepted") if source else ("drafted", "accepted")
    n = g[d].sum() if d in g else 0
    return g[a].sum() / n if n else float("nan")


def source_gap(df: pd.DataFrame) -> pd.DataFrame:
    """Acceptance per drafted token of context-matched vs adjacency drafts, measured three ways, per
    model and benchmark (and pooled): standalone PLD vs TR, standalone spine-only vs branches-only, and
    GOOSE's own spine vs branch nodes (Figure 1); the paper's 2-18x beside them. A pair is shown only
    where both ran on the same prompts."""
    rows = []
    for model, m in df.groupby("model"):
        benches = sorted(m.benchmark.unique())
        pool = all_scope(m, "source_gap")  # never two configurations of one benchmark in "all"
        for bench in [*benches, "all"]:
            cell = pool if bench == "all" else m[m.benchmark == bench]
            if cell.empty:
                continue
            row = {"model": model, "benchmark": bench}
            for label, ((ma, sa), (mb, sb)) in GAP_PAIRS.items():
                methods = tuple(dict.fromkeys((ma, mb)))
                found, why = _matched(cell, methods)
                if why:
                    continue
                a, b = _rate(found[ma], sa), _rate(found[mb], sb)
                row.update({f"{label}: context": a, f"{label}: adjacency": b, f"{label}: ratio": a / b if b else None,
                            f"{label}: n": len(found[ma])})
            if len(row) > 2:
                rows.append({**row, "paper ratio": f"{SOURCE_GAP_RATIO[0]}-{SOURCE_GAP_RATIO[1]}x"})
    if not rows:
        raise SystemExit("source_gap: needs a pair of sources on the same prompts (pld and tr, spine-only and "
                         "branches-only, or goose counting spine and branch nodes); run `make reproduce-synergy`")
    return pd.DataFrame(rows).round(4)


def _or_none(table, df: pd.DataFrame) -> pd.DataFrame | None:
    try:
        return table(df)
    except SystemExit:
        return None


def plot_synergy(df: pd.DataFrame):
    """GOOSE's gain over the better single source at equal budget, per benchmark (one bar per model,
    budget and memory mode), beside its gain over PLD / TR as published, the paper's band shaded.
    Bars below zero break non-degradation (P4)."""
    eq, pub = _or_none(synergy, df), _or_none(synergy_published, paper_settings(df))
    if eq is None and pub is None:
        raise SystemExit("synergy_figure: needs GOOSE beside spine-only and branches-only, or beside PLD or TR, on "
                         "the same prompts; run `make reproduce-synergy`")
    eq = eq[eq["gain %"].notna()] if eq is not None and "gain %" in eq else pd.DataFrame(
        columns=["model", "budget", "memory", "benchmark", "gain %"])
    pub = pub[pub["gain vs best published %"].notna()] if pub is not None and "gain vs best published %" in pub \
        else pd.DataFrame(columns=["model", "budget", "benchmark", "gain vs best published %"])
    benches = list(dict.fromkeys([*eq.benchmark, *pub.benchmark]))
    series = [(f"equal budget: {m}, B={b}, memory={mem}", g.set_index("benchmark")["gain %"], None)
              for (m, b, mem), g in eq.groupby(["model", "budget", "memory"])]
    series += [(f"vs published PLD / TR: {m}, GOOSE B={b}", g.set_index("benchmark")["gain vs best published %"], "//")
               for (m, b), g in pub.groupby(["model", "budget"])]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(benches) + 3), 5))
    w = 0.8 / max(1, len(series))
    for k, (label, gain, hatch) in enumerate(series):
        xs = [i - 0.4 + w * (k + 0.5) for i, b in enumerate(benches) if b in gain.index]
        ys = [gain[b] for b in benches if b in gain.index]
        bars = ax.bar(xs, ys, w, label=label, hatch=hatch, alpha=0.6 if hatch else 1.0)
        for rect, y in zip(bars, ys):
            if y < 0 and not hatch:
                rect.set_edgecolor("red")
                rect.set_linewidth(2)
            ax.annotate(f"{y:+.0f}%", (rect.get_x() + rect.get_width() / 2, max(y, 0)), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.axhspan(*SYNERGY_GAIN_PCT, color="grey", alpha=0.15, zorder=0,
               label=f"paper: +{SYNERGY_GAIN_PCT[0]}% to +{SYNERGY_GAIN_PCT[1]}% over the best single source")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(benches)), benches)
    ax.set_ylabel("GOOSE tau over the best single source (%)")
    ax.set_title("Synergy: GOOSE vs its sources at equal budget (solid; red edge: below a source)\n"
                 "and vs PLD / Token Recycling as published (hatched)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1)
    return fig


