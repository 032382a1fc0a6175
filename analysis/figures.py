"""The paper's figures 1 and 4, the budget sweep and spine continuation, from result rows."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from goose.analysis.paper import BUDGET_SWEEP, FIGURE1_MEDIANS, FIGURE1_SOURCES, FIGURE4_RANGE, GOOSE
from goose.analysis.pooling import by, pooled
from goose.storage.metrics import FIXED


def _cells(t: pd.DataFrame) -> list[str]:
    return [f"{m}\n{b}" for m, b in zip(t.model, t.benchmark)]


def lacking_speedup(rows: pd.DataFrame) -> str:
    """What rows without a measured speedup lack, in words: no AR timing asked for (speedup_source none), or one
    taken under other conditions (the row's speedup_stale)."""
    untimed = int(rows.speedup_source.astype(str).eq("none").sum()) if "speedup_source" in rows else 0
    other = int(rows.speedup_stale.eq(True).sum()) if "speedup_stale" in rows else 0
    said = [f"{untimed} rows speedup_reference=none: tau only" if untimed else "",
            f"{other} rows' AR timing stale, left out" if other else ""]
    return "; ".join(s for s in said if s) or "no AR timing"


def plot_figure1(df: pd.DataFrame):
    """Per-source acceptance: context-matched spine vs adjacency branches, per model x benchmark."""
    t = by(df[df.method == GOOSE], ["model", "benchmark"])
    spine, branch = FIGURE1_SOURCES
    if t.empty or f"{spine}_rate" not in t or f"{branch}_rate" not in t:
        raise SystemExit(f"figure1: no {GOOSE} rows counting {spine} and {branch} nodes; run `make reproduce-figure1`")
    t = t.assign(spine_rate=t[f"{spine}_rate"], branch_rate=t[f"{branch}_rate"])
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(t) + 2), 5.5))
    x = range(len(t))
    w = 0.38
    ax.bar([i - w / 2 for i in x], t.spine_rate, w, label=f"{spine} (context match)", color="#1f77b4")
    ax.bar([i + w / 2 for i in x], t.branch_rate, w, label=f"{branch} (adjacency)", color="#ff7f0e")
    ax.axhline(FIGURE1_MEDIANS[0], color="#1f77b4", ls="--", lw=1, label=f"paper median, spine ({FIGURE1_MEDIANS[0]})")
    ax.axhline(FIGURE1_MEDIANS[1], color="#ff7f0e", ls="--", lw=1,
               label=f"paper median, branch ({FIGURE1_MEDIANS[1]})")
    for i, (s, b) in enumerate(zip(t.spine_rate, t.branch_rate)):
        if pd.isna(s) or pd.isna(b):  # a source that drafted nothing has no bar: say so where it would stand
            for offset, rate, name in ((-w / 2, s, spine), (w / 2, b, branch)):
                if pd.isna(rate):
                    ax.annotate(f"no {name}\ndrafted", (i + offset, 0), ha="center", va="bottom", fontsize=7,
                                xytext=(0, 3), textcoords="offset points")
        elif b > 0:
            ax.annotate(f"{s / b:.1f}x", (i, max(s, b)), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 3), textcoords="offset points")
        else:
            ax.annotate("no branch\naccepted", (i, s), ha="center", va="bottom", fontsize=7, xytext=(0, 3),
                        textcoords="offset points")
    ax.set_xticks(list(x), _cells(t), fontsize=8)
    ax.set_xlim(-0.75, len(t) - 0.25)  # one cell too: its bars in the middle, not across the axis
    ax.set_ylabel("acceptance rate (accepted / drafted nodes)")
    ax.set_title("Figure 1: per-source acceptance of GOOSE's drafts\n(label above bars: spine / branch ratio)")
    ax.set_ylim(0, max(0.3, float(t.spine_rate.max()) * 1.25))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    return fig


def plot_figure4(df: pd.DataFrame):
    """GOOSE's wall-clock speedup over AR per model x benchmark (and its tau)."""
    rows = df[df.method == GOOSE]
    t = by(rows, ["model", "benchmark"])
    if t.empty:
        raise SystemExit(f"figure4: no {GOOSE} rows; run `make reproduce-figure4`")
    if t.speedup.isna().all():
        raise SystemExit(f"figure4: these {GOOSE} rows have no speedup ({lacking_speedup(rows)}); time them with "
                         "speedup_reference=interleaved, or run `make reproduce-figure4`")
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(t) + 2), 5.5))
    bars = ax.bar(range(len(t)), t.speedup, color="#2ca02c", label="GOOSE speedup (this run)")
    ax.axhspan(*FIGURE4_RANGE, color="grey", alpha=0.15, label=f"paper: {FIGURE4_RANGE[0]}-{FIGURE4_RANGE[1]}x (GPU)")
    ax.axhline(1.0, color="black", lw=0.8)
    for rect, tau in zip(bars, t.tau):
        ax.annotate(f"tau {tau:.2f}", (rect.get_x() + rect.get_width() / 2, rect.get_height()), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(range(len(t)), _cells(t), fontsize=8)
    ax.set_ylabel("speedup over AR (x, wall clock)")
    ax.set_title("Figure 4: GOOSE speedup over autoregressive decoding")
    ax.set_ylim(0, max(FIGURE4_RANGE[1] * 1.1, float(t.speedup.max()) * 1.2))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    return fig


def plot_budget_sweep(df: pd.DataFrame):
    """tau and speedup vs budget B for GOOSE and the balanced trees; a method no budget changes (TR's template),
    and a method at budget=auto, as one level across the range."""
    sub = df[df.method.isin(BUDGET_SWEEP)].copy()
    levels = sub[sub.budget.isin([FIXED, "auto"])]
    sub = sub.drop(levels.index)
    if sub.empty:
        found = ", ".join(sorted(set(df.budget))) or "none"
        raise SystemExit(f"budget_sweep: needs {', '.join(BUDGET_SWEEP)} at numeric budgets (budget=16,32,60); the "
                         f"rows have budget {found}; run `make reproduce-budget-sweep`")
    sub["B"] = sub.budget.astype(int)
    t = by(sub, ["method", "B"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for m, g in t.groupby("method"):
        g = g.sort_values("B")
        for ax, col in zip(axes, ("tau", "speedup")):
            ax.plot(g.B, g[col], marker="o", label=m)
    span = (t.B.min(), t.B.max())
    for (m, budget), g in levels.groupby(["method", "budget"]):
        level = pooled(g)
        label = f"{m} (no budget changes it)" if budget == FIXED else f"{m} (budget=auto)"
        for ax, col in zip(axes, ("tau", "speedup")):
            ax.hlines(level[col], *span, linestyles="--" if budget == FIXED else ":", colors="gray", label=label)
    axes[0].set_ylabel("tau (tokens per forward)")
    axes[1].set_ylabel("speedup over AR (x)")
    axes[1].axhline(1.0, color="black", lw=0.8)
    for ax, name in zip(axes, ("tau", "speedup")):
        ax.set_xlabel("budget B (nodes per verification, incl. root)")
        ax.set_title(f"{name} vs budget")
        ax.legend(fontsize=8)
    fig.suptitle("Budget sweep")
    return fig


def plot_spine_continuation(df: pd.DataFrame):
    """The synergy's mechanism: tokens GOOSE accepted after the walk left the spine for a branch."""
    t = by(df[df.method == GOOSE], ["model", "benchmark"])
    if t.empty or "continuation_share" not in t:
        raise SystemExit(f"spine_continuation: no {GOOSE} rows counting spine continuations; run "
                         "`make reproduce-figure1`")
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(t) + 2), 4.5))
    ax.bar(range(len(t)), t.continuation_share * 100, color="#9467bd")
    ax.set_xticks(range(len(t)), _cells(t), fontsize=8)
    ax.set_ylabel("share of generated tokens (%)")
    ax.set_title("Spine continuation: tokens accepted after the spine broke")
    return fig


