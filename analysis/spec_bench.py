"""Spec-Bench's table and figure from result rows: per category and overall, mean +- std over full passes.

A pass is one run of a configuration over the questions (`trial=1,2,3`: Spec-Bench reports the mean of
three). Within a pass each number is pooled over the questions as the run summaries pool them; the
table then gives the mean and the std (sample, ddof=1) of those per-pass numbers.

Mean accepted tokens (MAT), Spec-Bench's convention: the tokens the decoding forwards produced over the
decoding forwards, the prefill and its one token excluded, so AR = 1.00 exactly. tau (ours) counts the
prefill's token and forward too. Both count generated token ids, the same way for every method and AR.
"""

from __future__ import annotations

import math
import statistics

import pandas as pd

from goose.analysis.paper import SPEC_BENCH_VICUNA7B
from goose.analysis.pooling import method_rank
from goose.benchmarks.builtin import CATEGORY_ORDER
from goose.storage.metrics import summarize

SHORT = {  # column names, as Spec-Bench's leaderboard abbreviates them
    "multi-turn conversation": "MT",
    "translation": "Trans",
    "summarization": "Sum",
    "question answering": "QA",
    "mathematical reasoning": "Math",
    "retrieval-augmented generation": "RAG",
}
OVERALL = "overall"
METRICS = ("speedup", "mean accepted tokens", "tau", "tokens/s")
CONFIG = ["model", "benchmark", "method", "variant", "budget", "memory"]  # benchmark: a questions file, token limit


def spec_bench_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of the spec_bench benchmark (every model, method, budget and memory mode); load_rows gave each its
    pass (`trial`)."""
    sub = df[df.benchmark_name.eq("spec_bench")].copy()
    if sub.empty:
        raise SystemExit("no rows of benchmark=spec_bench; run `make reproduce-spec-bench`")
    if sub.category.eq("").any():
        raise SystemExit("rows without a category (written before rows carried one); rerun those "
                         "configurations in a new results_dir")
    return sub


def categories(sub: pd.DataFrame) -> list[str]:
    """Spec-Bench's six in its order, then any other category a questions file named, sorted."""
    found = set(sub.category)
    return [c for c in CATEGORY_ORDER if c in found] + sorted(found - set(CATEGORY_ORDER))


def mean_accepted(rows: pd.DataFrame) -> float:
    decoding = int((rows.steps - 1).sum())
    return float((rows.new_tokens - 1).sum()) / decoding if decoding else math.nan


def per_pass(g: pd.DataFrame) -> dict[str, float]:
    s = summarize(g.to_dict("records"))
    return {"speedup": s["speedup"], "mean accepted tokens": mean_accepted(g), "tau": s["tau"],
            "tokens/s": s["tokens_per_s"]}


def _complete_trials(g: pd.DataFrame) -> tuple[list[int], str]:
    """The passes that decoded every question the fullest pass decoded; the others are left out (named)."""
    ids = {t: frozenset(p.prompt_id) for t, p in g.groupby("trial")}
    full = max(ids.values(), key=len)
    kept = sorted(t for t, s in ids.items() if s == full)
    left = [f"trial {t} has {len(s)}/{len(full)} rows" for t, s in sorted(ids.items()) if t not in kept]
    return kept, "; ".join(left)


def _cell(values: list[float], digits: int) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return ""
    mean = statistics.fmean(values)
    if len(values) == 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def spec_bench_long(df: pd.DataFrame) -> pd.DataFrame:
    """One record per (configuration, metric, category or overall) with the per-pass values."""
    sub = spec_bench_rows(df)
    cats = categories(sub)
    out = []
    for key, g in sub.groupby(CONFIG):
        trials, left = _complete_trials(g)
        g = g[g.trial.isin(trials)]
        parts = [(c, g[g.category == c]) for c in cats] + [(OVERALL, g)]
        for category, rows in parts:
            if rows.empty:
                continue
            passes = [per_pass(p) for _, p in rows.groupby("trial")]
            for metric in METRICS:
                out.append({**dict(zip(CONFIG, key)), "metric": metric, "category": category,
                            "values": [p[metric] for p in passes], "trials": len(trials), "left out": left,
                            "questions": rows[rows.trial == trials[0]].prompt_id.str.split("#").str[0].nunique(),
                            "lossless": f"{int(g.lossless.sum())}/{len(g)}"})
    return pd.DataFrame(out)


def spec_bench_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per configuration and metric: the six categories and overall (mean ± std over passes), the passes
    and questions behind them, losslessness over every row, and Spec-Bench's published Vicuna-7B A100
    number where it has the method."""
    long = spec_bench_long(df)
    rows = []
    for key, g in long.groupby([*CONFIG, "metric"], sort=False):
        cfg = dict(zip([*CONFIG, "metric"], key))
        digits = 1 if cfg["metric"] == "tokens/s" else 2
        row = {**cfg, **{SHORT.get(c, c): _cell(v, digits) for c, v in zip(g.category, g["values"])}}
        published = SPEC_BENCH_VICUNA7B.get(cfg["method"])
        row["Spec-Bench (Vicuna-7B, A100)"] = (
            "" if published is None or cfg["metric"] not in ("speedup", "mean accepted tokens") else
            f"{published[0]:.2f}x" if cfg["metric"] == "speedup" else f"{published[1]:.2f}")
        first = g[g.category == OVERALL].iloc[0]
        row.update({"passes": first.trials, "questions": first.questions, "lossless": first.lossless})
        if first["left out"]:
            row["left out"] = first["left out"]
        rows.append(row)
    t = pd.DataFrame(rows)
    named = [SHORT.get(c, c) for c in categories(spec_bench_rows(df))]
    columns = [*CONFIG, "metric", *named, OVERALL, "Spec-Bench (Vicuna-7B, A100)",
               "passes", "questions", "lossless", *(["left out"] if "left out" in t else [])]
    for c in columns:
        if c not in t:
            t[c] = ""
    t = t[columns].fillna("")
    t["_rank"] = t.method.map(method_rank)
    t["_auto"] = t.budget.eq("auto")
    t["_metric"] = t.metric.map(METRICS.index)
    t = t.sort_values(["model", "benchmark", "_rank", "method", "variant", "_auto", "budget", "memory", "_metric"])
    t = t.drop(columns=["_rank", "_auto", "_metric"]).reset_index(drop=True)
    return t if t.variant.ne("").any() else t.drop(columns="variant")


def plot_spec_bench(df: pd.DataFrame):
    """Speedup and mean accepted tokens per category, one bar group per configuration but AR (error bars:
    std over passes); Spec-Bench's published Vicuna-7B A100 overall numbers as marks where it has the method."""
    import matplotlib.pyplot as plt

    long = spec_bench_long(df[df.speedup_source != "self"])  # AR itself: 1.00 by definition, the table has it
    if long.empty:
        raise SystemExit("spec_bench_figure: no method but AR has spec_bench rows")
    configs = sorted({tuple(k) for k in long[CONFIG].itertuples(index=False)},
                     key=lambda k: (k[0], k[1], method_rank(k[2]), k[2], k[3], k[4] == "auto", k[4], k[5]))
    models = {k[0] for k in configs}
    cats = [*dict.fromkeys(long.category[long.category != OVERALL]), OVERALL]
    colors = plt.get_cmap("tab10").colors
    fig, axes = plt.subplots(2, 1, figsize=(max(9, 1.3 * len(configs) + 3), 8.5), sharex=True)
    w = 0.8 / len(cats)
    for ax, metric in zip(axes, ("speedup", "mean accepted tokens")):
        cell = long[long.metric == metric].set_index([*CONFIG, "category"])["values"]
        for j, c in enumerate(cats):
            xs, ys, es = [], [], []
            for i, k in enumerate(configs):
                if (*k, c) in cell.index:
                    v = [x for x in cell[(*k, c)] if not math.isnan(x)]
                    if v:
                        xs.append(i - 0.4 + w * (j + 0.5))
                        ys.append(statistics.fmean(v))
                        es.append(statistics.stdev(v) if len(v) > 1 else 0.0)
            ax.bar(xs, ys, w, yerr=es, capsize=2, color="black" if c == OVERALL else colors[j % 10],
                   label=SHORT.get(c, c) if c != OVERALL else "overall")
        published = [(i, SPEC_BENCH_VICUNA7B[k[2]]) for i, k in enumerate(configs) if k[2] in SPEC_BENCH_VICUNA7B]
        if published:
            value = 0 if metric == "speedup" else 1
            ax.scatter([i + 0.4 - w / 2 for i, _ in published], [p[value] for _, p in published], marker="*",
                       s=90, color="red", zorder=3, label="Spec-Bench, Vicuna-7B A100 (overall)")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_ylabel("speedup over AR (x)" if metric == "speedup" else "mean accepted tokens (prefill excluded)")
    one = len(models) == 1 and len({k[1] for k in configs}) == 1
    labels = [f"{m}{' ' + v if v else ''}\nB={b}, {mem}" if one else f"{model}\n{bench}\n{m}\nB={b}, {mem}"
              for model, bench, m, v, b, mem in configs]
    axes[1].set_xticks(range(len(configs)), labels, fontsize=8)
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    where = ", ".join(sorted(models))
    fig.suptitle(f"Spec-Bench per category ({where}): mean over passes, error bars = std")
    return fig
