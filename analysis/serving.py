"""Serving rows (one per request, goose.measurement.guidellm_report) into what a serving benchmark reports, per
(method, profile, rate): TTFT, TPOT, ITL and end-to-end percentiles, request and output-token throughput, and
goodput at an SLO; the latency-throughput figure; where a method stops paying against a reference label.

Percentiles are numpy's (linear interpolation, as vLLM's `bench serve` computes them) over the successful requests.
Throughput divides by the group's window: from the first request's scheduled arrival (its start where the report
has no schedule) to the last successful request's end. A request meets the SLO when it succeeded, its TTFT is
within the TTFT bound and its TPOT within the TPOT bound (a one-token answer has no TPOT and is judged on TTFT);
goodput is the requests meeting it per second of the window (DistServe's and vLLM's definition), `good` their share
of every request sent. Intervals (95%, scipy's percentile bootstrap over requests) are given for TPOT p50 and the
good share where a group has 10 requests or more (MIN_REQUESTS): a tail percentile of tens of requests has none worth
printing. Knows no method by name: methods are the rows' labels.

The table of every server whose rows sit in one file (`goose.measurement.serving_load --append` adds each):

    python -m goose.analysis.serving results/serving-load/rows.csv --reference goose-auto --figure results/serving-load
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from goose.analysis.writers import save_figure

PERCENTILES = (50, 90, 99)
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
MIN_REQUESTS = 10
CONFIDENCE, RESAMPLES, SEED = 0.95, 2000, 0
KEEPS_UP = 0.9  # a rate is kept up with while the requests served per second are at least this share of it
SLO_TTFT_MS, SLO_TPOT_MS = 2000.0, 150.0  # goodput's bounds unless a command names others


@dataclass(frozen=True)
class Slo:
    """Per-request latency objectives, in seconds."""

    ttft_s: float
    tpot_s: float

    def met(self, rows: pd.DataFrame) -> pd.Series:
        ok_tpot = rows.tpot_s.isna() | (rows.tpot_s <= self.tpot_s)
        return rows.success.astype(bool) & (rows.ttft_s <= self.ttft_s) & ok_tpot


def read_rows(path) -> pd.DataFrame:
    """The rows CSV as a typed frame (booleans, floats; an empty rate is NaN)."""
    df = pd.read_csv(path)
    df["success"] = df.success.astype(str).str.lower().isin(("true", "1"))
    return df


def _interval(values: np.ndarray, statistic) -> tuple[float, float] | tuple[None, None]:
    if len(values) < MIN_REQUESTS or np.all(values == values[0]):
        return None, None
    res = stats.bootstrap((values,), statistic, confidence_level=CONFIDENCE, n_resamples=RESAMPLES,
                          method="percentile", random_state=np.random.default_rng(SEED), vectorized=True, axis=-1)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize_group(rows: pd.DataFrame, slo: Slo) -> dict:
    """One (method, profile, rate)'s numbers from its requests."""
    ok = rows[rows.success]
    starts = rows.scheduled_at.fillna(rows.started_at)
    window = float(ok.ended_at.max() - starts.min()) if len(ok) else float("nan")
    out: dict = {"requests": len(rows), "successful": len(ok), "window_s": window,
                 "request_throughput": len(ok) / window if len(ok) else 0.0,
                 "output_throughput": float(ok.output_tokens.sum()) / window if len(ok) else 0.0}
    for col in LATENCIES:
        values = ok[col].dropna().to_numpy(dtype=float)
        for p in PERCENTILES:
            out[f"{col[:-2]}_p{p}_s"] = float(np.percentile(values, p)) if len(values) else float("nan")
    tpot = ok.tpot_s.dropna().to_numpy(dtype=float)
    out["tpot_p50_low_s"], out["tpot_p50_high_s"] = _interval(tpot, lambda x, axis: np.percentile(x, 50, axis=axis))
    met = slo.met(rows).to_numpy(dtype=float)
    out["good"] = float(met.mean()) if len(met) else float("nan")
    out["good_low"], out["good_high"] = _interval(met, lambda x, axis: x.mean(axis=axis))
    out["goodput"] = float(met.sum()) / window if len(ok) else 0.0
    return out


def summarize(rows: pd.DataFrame, slo: Slo) -> pd.DataFrame:
    """Every (method, profile, rate) group's numbers, one row each, in the rows' order of methods and rising rate."""
    keys = ["method", "profile", "rate"]
    groups = rows.groupby(keys, sort=False, dropna=False)
    table = pd.DataFrame([{**dict(zip(keys, k)), **summarize_group(g, slo)} for k, g in groups])
    order = {m: i for i, m in enumerate(rows.method.drop_duplicates())}
    return table.sort_values(["method", "rate"], key=lambda c: c.map(order) if c.name == "method" else c,
                             ignore_index=True)


def printable(summary: pd.DataFrame, slo: Slo) -> pd.DataFrame:
    """The summary as a reader wants it: milliseconds, requests per second, intervals in brackets."""
    def ms(v) -> str:
        return "" if pd.isna(v) else f"{1000 * v:.0f}"

    def ci(v, lo, hi, fmt) -> str:
        return fmt(v) if lo is None or pd.isna(lo) else f"{fmt(v)} [{fmt(lo)}, {fmt(hi)}]"

    out = pd.DataFrame({
        "method": summary.method, "profile": summary.profile,
        "rate": summary.rate.map(lambda r: "" if pd.isna(r) else f"{r:g}"),
        "ok/sent": [f"{s}/{n}" for s, n in zip(summary.successful, summary.requests)],
        "req/s": summary.request_throughput.map(lambda v: f"{v:.2f}"),
        "out tok/s": summary.output_throughput.map(lambda v: f"{v:.1f}")})
    for col in ("ttft", "tpot", "itl", "e2e"):
        for p in PERCENTILES:
            out[f"{col} p{p} ms"] = summary[f"{col}_p{p}_s"].map(ms)
    out["tpot p50 ms"] = [ci(v, lo, hi, ms) for v, lo, hi in
                          zip(summary.tpot_p50_s, summary.tpot_p50_low_s, summary.tpot_p50_high_s)]
    slo_name = f"SLO ttft<={1000 * slo.ttft_s:g}ms tpot<={1000 * slo.tpot_s:g}ms"
    out[f"good ({slo_name})"] = [ci(v, lo, hi, lambda x: f"{100 * x:.0f}%") for v, lo, hi in
                                 zip(summary.good, summary.good_low, summary.good_high)]
    out["goodput req/s"] = summary.goodput.map(lambda v: f"{v:.2f}")
    return out


def stops_paying(summary: pd.DataFrame, reference: str) -> list[str]:
    """Per method, in words: the highest offered rate it kept up with, and against `reference` at each rate its
    TPOT p50 and goodput, the first rate where either is no better than the reference's."""
    lines = []
    for method, g in summary.groupby("method", sort=False):
        offered = g[g.rate.notna()]  # a synchronous or throughput profile offers no rate to keep up with
        kept = offered[offered.request_throughput >= KEEPS_UP * offered.rate]
        line = (f"{method}: keeps up with {kept.rate.max():g} req/s at most" if len(kept)
                else f"{method}: keeps up with none of the rates" if len(offered)
                else f"{method}: no offered rate in these rows (a synchronous or throughput profile), so no rate "
                     "it keeps up with")
        if method != reference:
            ref = summary[summary.method == reference].set_index("rate")
            worse = [r.rate for r in g.itertuples() if r.rate in ref.index and
                     (r.tpot_p50_s >= ref.loc[r.rate, "tpot_p50_s"] or r.goodput < ref.loc[r.rate, "goodput"])]
            paying = [r.rate for r in g.itertuples() if r.rate in ref.index and r.rate not in worse]
            if not worse:
                line += f"; lower TPOT p50 and no less goodput than {reference} at every rate"
            else:
                line += (f"; stops paying against {reference} at {min(worse):g} req/s (TPOT p50 no lower or goodput "
                         f"lower){'' if not paying else '; pays at ' + ', '.join(f'{r:g}' for r in paying)}")
        lines.append(line)
    return lines


def figure(summary: pd.DataFrame, slo: Slo):
    """TPOT p50 (solid) and p99 (dashed) against output-token throughput, goodput and TTFT p99 against the offered
    rate, one colour per method."""
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for i, (method, g) in enumerate(summary.groupby("method", sort=False)):
        c = f"C{i}"
        axes[0].plot(g.output_throughput, 1000 * g.tpot_p50_s, "o-", color=c, label=f"{method} p50")
        axes[0].plot(g.output_throughput, 1000 * g.tpot_p99_s, "s--", color=c, label=f"{method} p99")
        axes[1].plot(g.rate, g.goodput, "o-", color=c, label=method)
        axes[2].plot(g.rate, 1000 * g.ttft_p99_s, "o-", color=c, label=method)
    rates = summary.rate.dropna()
    if len(rates):
        axes[1].plot([rates.min(), rates.max()], [rates.min(), rates.max()], ":", color="grey", label="offered")
    axes[0].set(xlabel="output tokens / s", ylabel="TPOT (ms)", title="TPOT against throughput")
    axes[1].set(xlabel="offered rate (req/s)", ylabel="goodput (req/s)",
                title=f"goodput (TTFT <= {1000 * slo.ttft_s:g} ms, TPOT <= {1000 * slo.tpot_s:g} ms)")
    axes[2].set(xlabel="offered rate (req/s)", ylabel="TTFT p99 (ms)", title="TTFT p99 against rate")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.analysis.serving", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", type=Path, help="a serving rows CSV (goose.measurement.serving_load's OUT/rows.csv)")
    ap.add_argument("--reference", default=None,
                    help="a label the others are compared with: where each stops paying against it")
    ap.add_argument("--figure", type=Path, default=None, metavar="DIR",
                    help="also draw the latency-throughput figure into DIR/serving.png and .pdf")
    ap.add_argument("--slo-ttft-ms", type=float, default=SLO_TTFT_MS,
                    help="goodput's TTFT bound (default %(default)g ms)")
    ap.add_argument("--slo-tpot-ms", type=float, default=SLO_TPOT_MS,
                    help="goodput's TPOT bound (default %(default)g ms)")
    args = ap.parse_args(argv)
    if args.slo_ttft_ms <= 0 or args.slo_tpot_ms <= 0:
        ap.error("--slo-ttft-ms and --slo-tpot-ms must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    """Every label of a rows file side by side: one table, and where each stops paying against --reference."""
    args = parse(sys.argv[1:] if argv is None else argv)
    if not args.rows.is_file():
        raise SystemExit(f"error: no rows file {args.rows} (python -m goose.measurement.serving_load --out DIR "
                         "writes DIR/rows.csv; --append adds another server's)")
    slo = Slo(args.slo_ttft_ms / 1000, args.slo_tpot_ms / 1000)
    summary = summarize(read_rows(args.rows), slo)
    labels = list(dict.fromkeys(summary.method))
    if args.reference is not None and args.reference not in labels:
        raise SystemExit(f"error: --reference {args.reference!r} is no label of {args.rows} (its labels: "
                         f"{', '.join(labels)})")
    print(printable(summary, slo).to_markdown(index=False))
    if args.reference is not None:
        print("\n" + "\n".join(stops_paying(summary, args.reference)))
    if args.figure is not None:
        print(f"figure: {', '.join(map(str, save_figure(figure(summary, slo), args.figure, 'serving')))}")


if __name__ == "__main__":
    main()
