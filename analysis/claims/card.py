"""The claims scorecard: which of the paper's claims replicate, on what, how sure we are, and at what size.

Every claim is read per model x benchmark as one or more comparisons (GOOSE vs Iso(3), ...), each an effect
with a 95% bootstrap interval over prompts (analysis.bootstrap: paired, BCa) and n, and two verdicts: of
direction against the paper's threshold (holds / contradicted / inconclusive) and of size against the paper's
cited range (within / above / below / inconclusive; analysis.claims.verdicts). A comparison the paper gives no number
for, one that repeats another's configurations, or one the paper makes of GPUs (the clock, read on a CPU) is
shown with what it is and not counted. tau-based claims need no clock; the speedup claim reads the rows that
timed AR beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
    source_acceptance,
    speedup,
    tau,
    within,
)
from goose.analysis.claims.depths import depth_table
from goose.analysis.claims.verdicts import (
    CPU_READING,
    NOT_LOSSLESS,
    Claim,
    against_none,
    direction,
    size,
)
from goose.analysis.comparable import common_prompts
from goose.analysis.loops import stopped_at_loop, windows
from goose.analysis.paper import (
    ABLATION_DELTA_PCT,
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
    PRODUCTION_EQUAL_BUDGET,
    PRODUCTION_PEERS,
    SINGLE_SOURCES,
    SOURCE_GAP_MEDIAN,
    SOURCE_GAP_RATIO,
    SYNERGY_GAIN_PCT,
)
from goose.analysis.selection import DEFAULT, configurations, identical, labels, not_read, own_benchmarks, pick
from goose.storage.metrics import FIXED

HALF = ("float16", "bfloat16")  # where `numerics` (a near-tie decided the other way) is as good as exact


CLAIMS = (
    Claim(1, "source gap", "context-matched drafts are accepted per drafted token far more often than adjacency "
          "guesses: read inside GOOSE's own trees (spine nodes against branch nodes, same trees, same verifications)",
          f"{SOURCE_GAP_RATIO[0]}-{SOURCE_GAP_RATIO[1]}x (median ~{SOURCE_GAP_MEDIAN}x)",
          "the paper's text with its Figure 1: median acceptance 0.21 (spine) vs 0.033 (branch), a ratio of 2-18x "
          "over 5 models x 5 benchmarks", SOURCE_GAP_RATIO[0], size=SOURCE_GAP_RATIO, unit="x", flattered=GOOSE),
    Claim(2, "non-degradation", "GOOSE's tau is at least each of its single sources' at the same budget",
          ">= 0%", "the paper's property P4 (non-degradation); a direction, no size", 0.0),
    Claim(3, "vs balanced trees", "GOOSE beats balanced trees Iso(3)/Iso(5) at equal budget (the balanced trees as "
          "the official code builds them: one source, adjacency, no context-matched spine)",
          f"+{ISO_GAIN_PCT[0]}..+{ISO_GAIN_PCT[1]}%", "the paper's Table 1: +12% to +33% over eight settings "
          "(macro mean +25.4%)", ISO_GAIN_PCT[0], size=ISO_GAIN_PCT),
    Claim(4, "lossless speedup", "GOOSE is 1.9-4.3x faster than AR by the clock, losslessly, at B = 60",
          f"{FIGURE4_RANGE[0]}-{FIGURE4_RANGE[1]}x (GPU)", "the paper's Figure 4: 24 of 25 model x benchmark cells, "
          "fp16 on one GPU", FIGURE4_RANGE[0], size=FIGURE4_RANGE, unit="x", flattered=GOOSE, gpu=True),
    Claim(5, "ahead of peers", "GOOSE's tau is ahead of PLD, Token Recycling, Lookahead and REST in every cell",
          "> 0% in every cell", "the paper's main results table; a direction, no size", 0.0, strict=True,
          flattered=GOOSE),
    Claim(6, "synergy", "GOOSE beats the better of its two sources by 16-45%: claim 2's comparison against the "
          "stronger source, read for size (the same rows, so not a separate confirmation)",
          f"+{SYNERGY_GAIN_PCT[0]}..+{SYNERGY_GAIN_PCT[1]}%", "the paper's text (synergy: the spine tree over the "
          "best single-source method)", SYNERGY_GAIN_PCT[0], size=SYNERGY_GAIN_PCT, flattered=GOOSE, restates=2),
    Claim(7, "ablations cost tau", "each of GOOSE's parts, switched off, costs tau",
          f"{ABLATION_RANGE_PCT[0]}..{ABLATION_RANGE_PCT[1]}% each", "the paper's Table 2 (Qwen3-8B): each ablation's "
          "own number, the five spanning -5.1% to -2.9%", 0.0, size=ABLATION_RANGE_PCT, above=False, strict=True),
)


@dataclass
class Comparison:
    """One comparison of a claim in one model x benchmark: its sides (a side that did not run is an empty frame,
    its name says which), the statistic, and whether it is counted (else `note` says what it is)."""

    label: str
    names: list[str]
    sides: list[pd.DataFrame]
    stat: Statistic
    counted: bool = True
    note: str = ""
    paper: str = ""  # this comparison's own number, where the claim's is a band over several
    extra: dict = field(default_factory=dict)


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


def _comparisons(cell: pd.DataFrame, claim: Claim) -> list[Comparison]:
    """The comparisons of `claim` in one model x benchmark cell, in a fixed order (one per label tried)."""
    g = pick(cell, GOOSE)
    n = claim.number
    if n == 1:  # in a window reading, the rows that carry the window's counts (analysis.loops._window_counts)
        own = within(source_acceptance("spine"), source_acceptance("branch"))
        sides = (g, *(pick(cell, m) for m in GAP_PAIR))
        counted = [s[s.drafted.notna()] if "loop_free_share" in s and "drafted" in s else s for s in sides]
        return [Comparison(f"{GOOSE}: spine / branch nodes", [GOOSE], [counted[0]], own),
                Comparison(f"{GAP_PAIR[0]} / {GAP_PAIR[1]} standalone", list(GAP_PAIR),
                           counted[1:], ratio(acceptance), counted=False,
                           note="as published, standalone: a chain against a wide tree, so tree size as much as "
                           "source quality")]
    if n == 2:
        return [Comparison(f"{GOOSE} vs {s}", [GOOSE, s], [g, pick(cell, s)], ratio(tau)) for s in SINGLE_SOURCES]
    if n == 3:
        return [Comparison(f"{GOOSE} vs {s}", [GOOSE, s], [g, pick(cell, s)], ratio(tau)) for s in ISOTROPIC]
    if n == 4:
        out = []
        for budget in (CLAIMS_BUDGET, "auto"):
            timed = cell[(cell.method == GOOSE) & (cell.budget == budget) & cell.speedup.notna()
                         & ~cell.speedup_stale.eq(True)]
            paper = budget == CLAIMS_BUDGET
            out.append(Comparison(f"{GOOSE} B={budget}", [f"{GOOSE} B={budget} timed"], [pick(timed, GOOSE, budget)],
                                  alone(speedup), counted=paper,
                                  note="" if paper else "not the paper's budget (B = 60)"))
        return out
    if n == 5:
        return [Comparison(f"{GOOSE} vs {p}", [GOOSE, p], [g, pick(cell, p)], ratio(tau)) for p in PEERS] + [
            Comparison(f"{GOOSE} vs {p}", [GOOSE, p], [g, pick(cell, p)], ratio(tau), counted=False,
                       note=f"beyond the paper: {what}, not counted for the claim")
            for peers, what in ((PRODUCTION_PEERS, "a drafter a serving engine ships"),
                                (PRODUCTION_EQUAL_BUDGET, "a serving engine's drafter at GOOSE's budget"))
            for p in peers]
    if n == 6:
        return [Comparison(f"{GOOSE} vs best of {' / '.join(SINGLE_SOURCES)}", [GOOSE, *SINGLE_SOURCES],
                           [g, *(pick(cell, s) for s in SINGLE_SOURCES)], over_best(tau))]
    out = []
    for a in ABLATIONS:
        twin = next((s for s in SINGLE_SOURCES if identical(a, s)), None)
        number = ABLATION_DELTA_PCT.get(a)
        note = (f"the configuration of {twin}: counted once, under claim 2" if twin
                else "no number in the paper" if number is None else "")
        out.append(Comparison(f"{a} vs {GOOSE}", [a, GOOSE], [pick(cell, a), g], ratio(tau), counted=not note,
                              note=note, paper="" if number is None else f"{number:+.1f}%"))
    return out


def _without_undrafted(sides: list[pd.DataFrame]) -> tuple[list[pd.DataFrame], int]:
    """The sides without the prompts on which no side drafted anything (typically a one-token answer: the
    prefill's token, often the end of text, as an instruct model given a raw prompt may answer nothing), and how
    many. Such a prompt says nothing on a drafting claim: kept, it would count in n, and a resample of only such
    prompts has no acceptance rate at all."""
    def undrafted(s: pd.DataFrame) -> set:
        return set(s.prompt_id[(s.new_tokens <= 1) | (s.drafted.eq(0) if "drafted" in s else False)])

    none = set.intersection(*map(undrafted, sides))
    return [s[~s.prompt_id.isin(none)] for s in sides], len(none)


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


def _first_read(tried: list[tuple[str, list[Comparison], str]], k: int) -> tuple[str, str, Comparison] | None:
    """The first benchmark label (in the order selection.labels tries them) where comparison `k` has every side."""
    for label, comps, why in tried:
        if not any(s.empty for s in comps[k].sides):
            return label, why, comps[k]
    return None


PROTOCOL, LOOP_FREE, CHAT = "paper's protocol", "loop-free window", "chat template"
# Each claim read three ways, side by side, the one that answers the paper's question on looping stand-ins first:
# the loop-free window of raw-prompt answers, the paper's protocol (whole answers, loops included), and the chat
# template's answers through the same window (they loop too).
READINGS = (LOOP_FREE, PROTOCOL, CHAT)
WINDOWED = (LOOP_FREE, CHAT)
NO_WINDOW = (4,)  # no window reading: the clock is not per token (claim 1's: rows that carry the window's counts)


def scorecard(df: pd.DataFrame) -> pd.DataFrame:
    """One row per reading x claim x model x benchmark x comparison: n, the effect and its interval, the paper's
    number, the verdicts, losslessness of the rows behind it, the configurations read and (where copying
    flatters the claim) the copy split of the method it flatters. Three readings: the loop-free window of raw-prompt
    answers (analysis.loops.windows: runs stopped at their first loop read with their full twins), the paper's
    protocol (raw prompts, its answer lengths, whole answers; stopped runs are not its rows) and the chat template
    (rows run with chat_template=true) through the same window. Each of the paper's five benchmarks is read once
    per reading, under one label (selection.labels); each side is its method's default configuration
    (selection.pick). `attrs["read"]` / `attrs["not read"]` list the configurations read and those no comparison
    read; `attrs["twins"]` the prompts a stopped and a full run both ran, and how many of their windows are equal."""
    own_benchmarks(df)  # read like the paper's, in direction only (_read)
    rows = df
    # why: pandas keeps each text column in its own block, so every row selection below copied ~90 columns one by
    # one (most of the card's time); as plain objects they are one block, with the same values and missing cells
    rows = rows.astype({c: object for c in rows.select_dtypes("str").columns}).copy()  # copy: into few blocks
    chat = rows.chat_template.astype(bool)
    stopped = stopped_at_loop(rows)
    cards, configs, cells, twins, stale, stopped_runs, depths = [], [], [], [0, 0], {}, [], []
    for reading in READINGS:
        source = rows[~stopped] if reading == PROTOCOL else rows[chat if reading == CHAT else ~chat]
        if reading in WINDOWED and not source.empty:
            source = windows(source)
            twins = [a + b for a, b in zip(twins, source.attrs["twins"])]
            stopped_runs += source.attrs["stopped"]
        out, read, its_cells, its_stale, gap_cells = _read(source, reading)
        depths.append(depth_table(gap_cells).assign(reading=reading))
        stale |= {(reading, m): n for m, n in its_stale.items() if n}
        cards.append(pd.DataFrame(out).assign(reading=reading) if out else pd.DataFrame())
        configs += read
        cells += its_cells
    if all(c.empty for c in cards):
        raise SystemExit("claims: no claim could be read: run `make reproduce-claims` (GOOSE and the methods it is "
                         "compared with, on the same model and one of the paper's five benchmarks)")
    card = pd.concat([c for c in cards if not c.empty], ignore_index=True)
    card.attrs["read"] = pd.DataFrame(configs).drop_duplicates(ignore_index=True)
    card.attrs["twins"] = tuple(twins)
    card.attrs["stopped"] = pd.DataFrame(stopped_runs).drop_duplicates(ignore_index=True)
    card.attrs["stale timing"] = stale  # (reading, model) -> timed rows left out where the clock read nothing
    card.attrs["depths"] = pd.concat(depths, ignore_index=True)  # claim 1 at each depth (analysis.claims.depths)
    hashes = set(card.attrs["read"].config)
    skipped = [s for s in (not_read(c, hashes) for c in cells) if not s.empty]
    card.attrs["not read"] = pd.concat(skipped or [pd.DataFrame()], ignore_index=True).drop_duplicates()
    for r in card.attrs["not read"].itertuples():
        print(f"[analysis] claims: {r.model} / {r.benchmark}: not read: {r.method} B={r.budget} config {r.config} "
              f"({r.prompts} prompts): {r[-1]}")
    return card


def _stale(cell: pd.DataFrame) -> int:
    """GOOSE's rows at the claims' budget whose AR timing is stale: left out of the clock (claim 4)."""
    return int(((cell.method == GOOSE) & (cell.budget == CLAIMS_BUDGET) & cell.speedup_stale.eq(True)).sum())


def _read(df: pd.DataFrame, reading: str) -> tuple[list[dict], list[dict], list[pd.DataFrame], dict[str, int],
                                                  dict[tuple[str, str], pd.DataFrame]]:
    """One reading's comparisons: (scorecard rows, configurations read, the benchmark labels it looked at, per
    model the stale timed rows of the cells whose clock had nothing else, the cell claim 1 read per model x
    benchmark)."""
    out, configs, cells, stale, gap_cells = [], [], [], {}, {}
    say = reading == PROTOCOL  # what is left out is said once, on the paper's protocol
    for (model, bench), rows in df.groupby(["model", "benchmark_name"], sort=True):
        options = labels(rows, chat=reading == CHAT)
        if not options:
            continue
        for _, cell, _ in options:
            if say:
                say_budgets(cell)
        cells += [cell for _, cell, _ in options]
        missing: set[str] = set()
        for claim in CLAIMS:
            if reading in WINDOWED and claim.number in NO_WINDOW:
                continue
            tried = [(label, _comparisons(cell, claim), why) for label, cell, why in options]
            for k in range(len(tried[0][1])):
                chosen = _first_read(tried, k)
                if chosen is None:
                    first = tried[0][1][k]
                    missing |= {m for m, s in zip(first.names, first.sides) if s.empty}
                    if claim.gpu and first.counted:
                        stale[model] = stale.get(model, 0) + max(_stale(cell) for _, cell, _ in options)
                    continue
                label_read, why_label, comparison = chosen
                if claim.number == 1 and k == 0:
                    gap_cells[model, bench] = next(c for lab, c, _ in options if lab == label_read)
                row = _compare(claim, model, bench, comparison, say)
                if row is None:
                    continue
                if bench not in PAPER_BENCHMARKS:  # a researcher's own prompts: a direction, no paper number
                    row.update({"size": "", "counted": False, "note": "not one of the paper's five benchmarks: read "
                                "in direction, no paper number to size against"})
                configs += [{"model": model, "benchmark": row["benchmark"], **c} for c in row.pop("_configs")]
                row.update({"read as": label_read if len(options) > 1 or label_read != bench else "",
                            "why this label": why_label if len(options) > 1 else "",
                            "labels not read": ", ".join(lab for lab, _, _ in options if lab != label_read)})
                out.append(row)
        if missing and say:
            print(f"[analysis] claims: {model} / {bench}: not read where a side has no rows of its default "
                  f"configuration at the claims' budget: {', '.join(sorted(missing))}")
    return out, configs, cells, stale, gap_cells


def _compare(claim: Claim, model: str, bench: str, c: Comparison, say: bool = True) -> dict | None:
    """One comparison's row of the scorecard, or None (said why, where `say`) where its sides share no prompt."""
    kept = common_prompts(pd.concat(c.sides), f"claims {claim.number} {c.label}", say)
    sides = [kept[kept.config_hash == s.config_hash.iloc[0]].sort_values("prompt_id") for s in c.sides]
    sides, undrafted = _without_undrafted(sides)
    if sides[0].empty:
        why = ("nothing was drafted on any prompt (one-token answers)" if undrafted else
               "its sides ran no prompt in common (other prompt ids, or other texts under the same ids)")
        if say:
            print(f"[analysis] claims {claim.number} {c.label}: {model} / {bench}: {why}, not compared")
        return None
    effect, low, high = interval(c.stat, [_arrays(s) for s in sides], paired=True)
    scale = (lambda v: v) if claim.unit == "x" else (lambda v: (v - 1) * 100)
    effect, low, high = scale(effect), scale(low), scale(high)
    flat = next((s for s in sides if claim.flattered and s.method.iloc[0] == claim.flattered), sides[0])
    answer, prompt = _copy_split(flat) if claim.flattered else (float("nan"), float("nan"))
    lossless, lossy = _lossless(sides)
    verdicts = (direction(claim, low, high), size(claim.size, low, high))
    if claim.gpu and not all(str(d).startswith("cuda") for s in sides for d in s.device):
        verdicts = (CPU_READING, f"{CPU_READING}: {verdicts[1]}")  # a GPU's claim timed on a CPU
    row = {"claim": claim.number, "name": claim.name, "model": model, "benchmark": bench,
           "comparison": c.label, "n": len(sides[0]), "nothing drafted": undrafted,
           "effect": effect, "low": low, "high": high, "unit": claim.unit, "paper": c.paper or claim.paper,
           "threshold": claim.threshold, "verdict": NOT_LOSSLESS if lossy else verdicts[0],
           "size": "" if lossy else verdicts[1], "counted": c.counted,
           "note": c.note, "not counted because": lossy,
           "vs no effect": against_none(claim, low, high), "lossless": lossless,
           "copied answer %": answer, "copied prompt %": prompt, "_configs": _configs(sides)}
    row["configurations"] = "; ".join(f"{x['method']} {x['config']}" + ("" if x["settings"] == DEFAULT else
                                      f" ({x['settings']})") for x in row["_configs"])
    if claim.number == 4:
        s = sides[0]
        row.update({"tau": s.new_tokens.sum() / s.steps.sum(),
                    "AR ms/token": 1e3 * s.ar_wall_s.sum() / s.new_tokens.sum(),
                    "GOOSE ms/forward": 1e3 * s.wall_s.sum() / s.steps.sum(),
                    "nodes/forward": (s.mean_width * (s.steps - 1)).sum() / max(1, (s.steps - 1).sum())})
    return row
