"""The claims scorecard: which of the paper's claims replicate, on what, and how sure we are.

Every claim is read per model x benchmark as one or more comparisons (GOOSE vs Iso(3), ...), each an effect
with a 95% bootstrap interval over prompts (scipy.stats.bootstrap, BCa; resampling the prompts both sides ran,
paired, or each side's own prompts where they share none) and n, and a verdict against the paper's threshold:
holds (the interval is on the claim's side of it), contradicted (on the other side), inconclusive (it straddles
the line, or n < 3). tau-based claims need no clock; the speedup claim reads the rows that timed AR beside them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from goose.analysis.bootstrap import (
    COLUMNS,
    Statistic,
    acceptance,
    alone,
    interval,
    over_best,
    ratio,
    speedup,
    tau,
)
from goose.analysis.comparable import common_prompts
from goose.analysis.paper import (
    ABLATION_RANGE_PCT,
    ABLATIONS,
    CLAIMS_BUDGET,
    FIGURE4_RANGE,
    GAP_PAIR,
    GOOSE,
    ISO_GAIN_PCT,
    ISOTROPIC,
    PAPER_BENCHMARKS,
    PEERS,
    SINGLE_SOURCES,
    SOURCE_GAP_MEDIAN,
    SOURCE_GAP_RATIO,
    SYNERGY_GAIN_PCT,
)
from goose.analysis.selection import DEFAULT, configurations, labels, not_read, paper_benchmarks, pick
from goose.storage.metrics import FIXED

HOLDS, CONTRADICTED, INCONCLUSIVE = "holds", "contradicted", "inconclusive"
NOT_LOSSLESS = "not lossless"  # a comparison whose rows are not all AR's tokens: never counted as a verdict
HALF = ("float16", "bfloat16")  # where `numerics` (a near-tie decided the other way) is as good as exact


@dataclass(frozen=True)
class Claim:
    """One claim of the paper: what it says, its number, and the line its verdict is read against."""

    number: int
    name: str
    says: str
    paper: str
    threshold: float
    above: bool = True  # holds where the effect is above the threshold (False: below it)
    strict: bool = False  # the threshold itself does not hold
    unit: str = "%"  # "%": (ratio - 1) x 100; "x": the ratio
    flattered: str = ""  # the method whose copying flatters the claim: its copy split is shown beside it

    @property
    def none(self) -> float:
        """The effect of no difference."""
        return 1.0 if self.unit == "x" else 0.0


CLAIMS = (
    Claim(1, "source gap", "context-matched drafts (PLD) are accepted per drafted token far more often than "
          "adjacency guesses (Token Recycling)", f"{SOURCE_GAP_RATIO[0]}-{SOURCE_GAP_RATIO[1]}x (median "
          f"~{SOURCE_GAP_MEDIAN}x)", SOURCE_GAP_RATIO[0], unit="x", flattered=GAP_PAIR[0]),
    Claim(2, "non-degradation", "GOOSE's tau is at least each of its single sources' at the same budget",
          ">= 0%", 0.0),
    Claim(3, "vs balanced trees", "GOOSE beats balanced trees Iso(3)/Iso(5) at equal budget",
          f"+{ISO_GAIN_PCT[0]}..+{ISO_GAIN_PCT[1]}%", ISO_GAIN_PCT[0]),
    Claim(4, "lossless speedup", "GOOSE is 1.9-4.3x faster than AR by the clock, losslessly",
          f"{FIGURE4_RANGE[0]}-{FIGURE4_RANGE[1]}x (GPU)", FIGURE4_RANGE[0], unit="x", flattered=GOOSE),
    Claim(5, "ahead of peers", "GOOSE's tau is ahead of PLD, Token Recycling, Lookahead and REST in every cell",
          "> 0% in every cell", 0.0, strict=True, flattered=GOOSE),
    Claim(6, "synergy", "GOOSE beats the better of its two sources by 16-45%",
          f"+{SYNERGY_GAIN_PCT[0]}..+{SYNERGY_GAIN_PCT[1]}%", SYNERGY_GAIN_PCT[0], flattered=GOOSE),
    Claim(7, "ablations cost tau", "each of GOOSE's parts, switched off, costs tau",
          f"{ABLATION_RANGE_PCT[0]}..{ABLATION_RANGE_PCT[1]}% each", 0.0, above=False, strict=True),
)


def verdict(claim: Claim, low: float, high: float) -> str:
    """holds / contradicted / inconclusive: where the interval lies against the claim's threshold."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return INCONCLUSIVE
    lo, hi, t = (low, high, claim.threshold) if claim.above else (-high, -low, -claim.threshold)
    if lo > t or (lo == t and not claim.strict):
        return HOLDS
    if hi < t or (hi == t and claim.strict):
        return CONTRADICTED
    return INCONCLUSIVE


# --- comparisons per model x benchmark ---------------------------------------------------------------------
def say_budgets(cell: pd.DataFrame) -> None:
    """One line for rows of a model x benchmark at budgets no claim reads."""
    other = cell[~cell.budget.isin([CLAIMS_BUDGET, FIXED, "auto"])]
    if not other.empty:
        which = "; ".join(f"{m} B={', '.join(sorted(set(g.budget)))} ({len(g)})" for m, g in other.groupby("method"))
        print(f"[analysis] claims: {cell.model.iloc[0]} / {cell.benchmark.iloc[0]}: left out {len(other)} row(s) at "
              f"budgets no claim reads ({which}): the claims read B={CLAIMS_BUDGET}, and B=auto for the clock")


def _arrays(g: pd.DataFrame) -> dict:
    return {c: g[c].to_numpy(dtype=float) if c in g else np.full(len(g), np.nan) for c in COLUMNS}


def _comparisons(cell: pd.DataFrame, claim: Claim) -> list[tuple[str, list[str], list[pd.DataFrame], Statistic]]:
    """(label, side names, sides, statistic) of `claim` in one model x benchmark cell; a side that did not run is
    an empty frame (its name says which)."""
    g = pick(cell, GOOSE)
    n = claim.number
    if n == 1:
        return [(f"{GAP_PAIR[0]} / {GAP_PAIR[1]}", list(GAP_PAIR), [pick(cell, m) for m in GAP_PAIR],
                 ratio(acceptance))]
    if n == 2:
        return [(f"{GOOSE} vs {s}", [GOOSE, s], [g, pick(cell, s)], ratio(tau)) for s in SINGLE_SOURCES]
    if n == 3:
        return [(f"{GOOSE} vs {s}", [GOOSE, s], [g, pick(cell, s)], ratio(tau)) for s in ISOTROPIC]
    if n == 4:
        out = []
        for budget in (CLAIMS_BUDGET, "auto"):
            timed = cell[(cell.method == GOOSE) & (cell.budget == budget) & cell.speedup.notna()
                         & ~cell.speedup_stale.eq(True)]
            out.append((f"{GOOSE} B={budget}", [f"{GOOSE} B={budget} timed"], [pick(timed, GOOSE, budget)],
                        alone(speedup)))
        return out
    if n == 5:
        return [(f"{GOOSE} vs {p}", [GOOSE, p], [g, pick(cell, p)], ratio(tau)) for p in PEERS]
    if n == 6:
        return [(f"{GOOSE} vs best of {' / '.join(SINGLE_SOURCES)}", [GOOSE, *SINGLE_SOURCES],
                 [g, *(pick(cell, s) for s in SINGLE_SOURCES)], over_best(tau))]
    return [(f"{a} vs {GOOSE}", [a, GOOSE], [pick(cell, a), g], ratio(tau)) for a in ABLATIONS]


def _without_one_token_answers(sides: list[pd.DataFrame]) -> tuple[list[pd.DataFrame], int]:
    """The sides without the prompts whose answer was one token on every side (the prefill's token, often the
    end of text: an instruct model given a raw prompt may answer nothing), and how many. No method drafts
    there, so such a prompt says nothing on a drafting claim: kept, it would count in n, and a resample of
    only such prompts has no acceptance rate at all."""
    one = set.intersection(*(set(s.prompt_id[s.new_tokens <= 1]) for s in sides))
    return [s[~s.prompt_id.isin(one)] for s in sides], len(one)


def _copy_split(g: pd.DataFrame) -> tuple[float, float]:
    """% of the tokens `g` generated that were drafted copies of its own earlier answer / of the prompt."""
    if g.empty or "copied_answer" not in g or g.copied_answer.isna().any():
        return float("nan"), float("nan")
    total = g.new_tokens.sum()
    return 100 * g.copied_answer.sum() / total, 100 * g.copied_prompt.sum() / total


def _lossless(sides: list[pd.DataFrame]) -> tuple[str, str]:
    """(lossless rows / rows, why the comparison cannot be counted: "" where every row gave AR's tokens; in half
    precision a `numerics` row, a near-tie decided the other way, counts as AR's)."""
    rows = pd.concat(sides)
    ok = rows.lossless | (rows.dtype.astype(str).isin(HALF) & rows.equality.isin(["exact", "numerics"]))
    why = "" if ok.all() else (f"{int((~ok).sum())} of {len(rows)} rows are not AR's tokens (equality "
                               f"{', '.join(sorted(set(rows.equality[~ok].astype(str))))}): a lossy speedup or tau "
                               "is no evidence for a lossless method")
    return f"{int(rows.lossless.sum())}/{len(rows)}", why


def _configs(sides: list[pd.DataFrame]) -> list[dict]:
    """The configuration each side read: its method, budget, hash, prompts and what it sets otherwise than its
    method's default."""
    out = []
    for s in sides:
        c = configurations(s).iloc[0]
        out.append({"method": s.method.iloc[0], "budget": s.budget.iloc[0], "config": c.config_hash,
                    "settings": c.settings or "default unknown"})
    return out


def _first_read(tried: list[tuple[str, list, str]], k: int) -> tuple[str, str, tuple] | None:
    """The first benchmark label (in the order selection.labels tries them) where comparison `k` has every side."""
    for label, comps, why in tried:
        if not any(s.empty for s in comps[k][2]):
            return label, why, comps[k]
    return None


def scorecard(df: pd.DataFrame) -> pd.DataFrame:
    """One row per claim x model x benchmark x comparison: n, the effect and its interval, the paper's
    number, the verdict, losslessness of the rows behind it, the configurations read and (where copying
    flatters the claim) the copy split of the method it flatters. Each of the paper's five benchmarks is read
    once, under one label (selection.labels); each side is its method's default configuration (selection.pick).
    `attrs["not read"]` lists the configurations no comparison read."""
    out, read, cells, configs = [], set(), [], []
    for (model, bench), rows in paper_benchmarks(df).groupby(["model", "benchmark_name"], sort=True):
        options = labels(rows)
        for _, cell, _ in options:
            say_budgets(cell)
        cells += [cell for _, cell, _ in options]
        missing: set[str] = set()
        for claim in CLAIMS:
            tried = [(label, _comparisons(cell, claim), why) for label, cell, why in options]
            for k in range(len(tried[0][1])):
                chosen = _first_read(tried, k)
                if chosen is None:
                    names, sides = tried[0][1][k][1:3]
                    missing |= {m for m, s in zip(names, sides) if s.empty}
                    continue
                label_read, why_label, (label, _, sides, stat) = chosen
                row = _compare(claim, model, bench, label, sides, stat)
                if row is None:
                    continue
                read |= {s.config_hash.iloc[0] for s in sides}
                configs += [{"model": model, "benchmark": row["benchmark"], **c} for c in row.pop("_configs")]
                labels_here = [lab for lab, _, _ in options]
                row.update({"read as": label_read if len(options) > 1 or label_read != bench else "",
                            "why this label": why_label if len(options) > 1 else "",
                            "labels not read": ", ".join(lab for lab in labels_here if lab != label_read)})
                out.append(row)
        if missing:
            print(f"[analysis] claims: {model} / {bench}: not read where a side has no rows of its default "
                  f"configuration at the claims' budget: {', '.join(sorted(missing))}")
    if not out:
        raise SystemExit("claims: no claim could be read: run `make reproduce-claims` (GOOSE and the methods it is "
                         "compared with, on the same model and one of the paper's five benchmarks)")
    card = pd.DataFrame(out)
    skipped = [not_read(c, read) for c in cells]
    card.attrs["read"] = pd.DataFrame(configs).drop_duplicates(ignore_index=True)
    card.attrs["not read"] = pd.concat([s for s in skipped if not s.empty] or [pd.DataFrame()], ignore_index=True)
    for r in card.attrs["not read"].itertuples():
        print(f"[analysis] claims: {r.model} / {r.benchmark}: not read: {r.method} B={r.budget} config {r.config} "
              f"({r.prompts} prompts): {r[-1]}")
    return card


def _compare(claim: Claim, model: str, bench: str, label: str, sides: list[pd.DataFrame],
             stat: Statistic) -> dict | None:
    """One comparison's row of the scorecard, or None (said why) where its sides share no prompt to compare."""
    kept = common_prompts(pd.concat(sides), f"claims {claim.number} {label}")
    sides = [kept[kept.config_hash == s.config_hash.iloc[0]].sort_values("prompt_id") for s in sides]
    sides, one_token = _without_one_token_answers(sides)
    if sides[0].empty:
        why = ("every prompt's answer is one token (the prefill's): nothing drafted" if one_token else
               "its sides ran no prompt in common (other prompt ids, or other texts under the same ids)")
        print(f"[analysis] claims {claim.number} {label}: {model} / {bench}: {why}, not compared")
        return None
    effect, low, high = interval(stat, [_arrays(s) for s in sides], paired=True)
    scale = (lambda v: v) if claim.unit == "x" else (lambda v: (v - 1) * 100)
    effect, low, high = scale(effect), scale(low), scale(high)
    flat = next((s for s in sides if claim.flattered and s.method.iloc[0] == claim.flattered), sides[0])
    answer, prompt = _copy_split(flat) if claim.flattered else (float("nan"), float("nan"))
    lossless, lossy = _lossless(sides)
    row = {"claim": claim.number, "name": claim.name, "model": model, "benchmark": bench,
           "comparison": label, "n": len(sides[0]), "one-token answers": one_token,
           "effect": effect, "low": low, "high": high,
           "unit": claim.unit, "paper": claim.paper, "threshold": claim.threshold,
           "verdict": NOT_LOSSLESS if lossy else verdict(claim, low, high), "not counted because": lossy,
           "vs no effect": _direction(claim, low, high), "lossless": lossless,
           "copied answer %": answer, "copied prompt %": prompt, "_configs": _configs(sides)}
    row["configurations"] = "; ".join(f"{c['method']} {c['config']}" + ("" if c["settings"] == DEFAULT else
                                      f" ({c['settings']})") for c in row["_configs"])
    if claim.number == 4:
        s = sides[0]
        row.update({"tau": s.new_tokens.sum() / s.steps.sum(),
                    "AR ms/token": 1e3 * s.ar_wall_s.sum() / s.new_tokens.sum(),
                    "GOOSE ms/forward": 1e3 * s.wall_s.sum() / s.steps.sum(),
                    "nodes/forward": (s.mean_width * (s.steps - 1)).sum() / max(1, (s.steps - 1).sum())})
    return row


def _direction(claim: Claim, low: float, high: float) -> str:
    """Where the interval lies against no difference (1x or 0%), whatever the paper's size of effect."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return "unclear"
    if low == high == claim.none:
        return "none"
    if low >= claim.none:
        return "above" if low > claim.none else "at or above"
    if high <= claim.none:
        return "below" if high < claim.none else "at or below"
    return "straddles"


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Per claim (every one, read or not) and model: of its comparisons over the paper's five benchmarks, how many
    hold, are inconclusive, are contradicted; a cell read on fewer than the five says on how many, and one whose
    rows were not all lossless counts those comparisons apart."""
    counts = card.groupby(["claim", "model"]).verdict.value_counts().unstack(fill_value=0)
    read_on = card.groupby(["claim", "model"]).benchmark.nunique()
    models = sorted(card.model.unique())
    rows = []
    for claim in CLAIMS:
        row = {"claim": f"{claim.number}. {claim.name}", "paper": claim.paper}
        for m in models:
            if (claim.number, m) not in counts.index:
                row[m] = "not run"
                continue
            c, k = counts.loc[(claim.number, m)], int(read_on.loc[(claim.number, m)])
            row[m] = " / ".join(str(int(c.get(v, 0))) for v in (HOLDS, INCONCLUSIVE, CONTRADICTED))
            if int(c.get(NOT_LOSSLESS, 0)):
                row[m] += f" (+{int(c.get(NOT_LOSSLESS, 0))} not lossless, not counted)"
            if k < len(PAPER_BENCHMARKS):
                row[m] += f" ({k} of {len(PAPER_BENCHMARKS)} benchmarks)"
        rows.append(row)
    return pd.DataFrame(rows)
