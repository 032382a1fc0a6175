"""The practitioner's question (#70): GOOSE against the training-free drafters that serving engines ship (SGLang's
NGRAM, vLLM's ngram, llama.cpp's ngram-mod and ngram-simple) at their sources' defaults, the two whose defaults
draft far fewer nodes than GOOSE's budget again at that budget (sglang-ngram-budget, vllm-ngram-budget), with PLD and
GOOSE-suffix beside them, on one engine.

Per model x benchmark, GOOSE at each budget it ran against each peer, in two readings of tau (the loop-free window:
analysis.loops.windows, answers stopped at their first loop read with their full twins; the whole answer: runs not
stopped): both sides' tau and GOOSE's gain with its paired 95% BCa interval over the prompts both ran (n = those
prompts). And by the clock, from the runs timed against AR beside them (interleaved): each side's speedup over the
prompts both timed, GOOSE's gain by the clock with its interval. Each side is its method's default configuration
(analysis.selection.pick); the clock reads the timed configurations alone. `write` makes the page
(production-peers.md) and its table (production_peers.csv)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from goose.analysis.bootstrap import COLUMNS, CONFIDENCE, interval, ratio, speedup, tau
from goose.analysis.loops import stopped_at_loop, windows
from goose.analysis.paper import GOOSE, PAPER_BENCHMARKS, PRODUCTION_BESIDE, PRODUCTION_EQUAL_BUDGET, PRODUCTION_PEERS
from goose.analysis.selection import pick
from goose.analysis.writers import ran_on
from goose.storage.metrics import FIXED

WINDOW, WHOLE, CLOCK = "loop-free window", "whole answer", "clock, whole answers"
CLOCK_STOPPED = "clock, answers stopped at their first loop"  # timed runs of stop_at_loop, never beside whole ones
CLOCKS = (CLOCK_STOPPED, CLOCK)
TALLIED = (*PRODUCTION_PEERS, *PRODUCTION_EQUAL_BUDGET)  # PRODUCTION_BESIDE is shown, not counted
PEERS = (*TALLIED, *PRODUCTION_BESIDE)
GAIN, LOW, HIGH = f"goose vs peer [{CONFIDENCE:.0%} CI]", "gain low %", "gain high %"  # LOW, HIGH: the CSV's
SHORT = {WINDOW: "window (tau)", WHOLE: "whole answer (tau)", CLOCK_STOPPED: "clock, cut at the first loop",
         CLOCK: "clock, whole answer"}  # the In short table's labels


def _arrays(g: pd.DataFrame) -> dict:
    return {c: g[c].to_numpy(dtype=float) if c in g else np.full(len(g), np.nan) for c in COLUMNS}


def _gain(stat, a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """GOOSE's gain over the peer, as the page prints it and as numbers (percent; NaN where n is too small for an
    interval), so that tallies count from the numbers, not from rounded text."""
    est, low, high = interval(ratio(stat), [_arrays(a), _arrays(b)], paired=True)
    pct = lambda v: (v - 1) * 100  # noqa: E731
    said = (f"{pct(est):+.1f}% (no interval: n = {len(a)})" if not np.isfinite(low) else
            f"{pct(est):+.1f}% [{_bound(pct(low))}, {_bound(pct(high))}]")
    bound = lambda v: round(pct(v), 4) if np.isfinite(v) else np.nan  # noqa: E731
    return {GAIN: said, LOW: bound(low), HIGH: bound(high)}


def _bound(v: float) -> str:
    """An interval's end in percent, to the decimal that shows its sign (0.04% is not printed as +0.0%)."""
    return f"{v:+.2f}%" if abs(v) < 0.05 else f"{v:+.1f}%"


def _peer_sides(cell: pd.DataFrame, budget: str, peer: str) -> list[pd.DataFrame]:
    """The peer's configurations GOOSE at `budget` is read against: at a number, that budget or the peer's defaults
    (budget fixed); at budget=auto, both its own budget=auto runs (pruned as GOOSE's are) and its defaults, each
    where it ran (a practitioner switches from the defaults; the auto runs price the drafts as GOOSE's are)."""
    if budget != "auto":
        return [pick(cell, peer, budget)]
    return [pick(cell[cell.budget != FIXED], peer, "auto"), pick(cell[cell.budget == FIXED], peer, FIXED)]


def _timed(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows.speedup.notna() & ~rows.speedup_stale.eq(True)] if "speedup" in rows else rows.iloc[0:0]


def _compare(reading: str, source: pd.DataFrame) -> list[dict]:
    out, clock = [], reading in CLOCKS
    stat, what = (speedup, "speedup") if clock else (tau, "tau")
    value = (lambda g: g.ar_wall_s.sum() / g.wall_s.sum()) if clock else (lambda g: g.new_tokens.sum() / g.steps.sum())
    for (model, bench), cell in source.groupby(["model", "benchmark_name"], sort=True):
        cell = _timed(cell) if clock else cell
        for budget in _budgets(cell.budget[cell.method == GOOSE]):
            mine = pick(cell, GOOSE, budget)
            for peer in PEERS:
                for theirs in _peer_sides(cell, budget, peer):
                    both = sorted(set(mine.prompt_id) & set(theirs.prompt_id))
                    if not both:
                        continue
                    a, b = (g[g.prompt_id.isin(both)].sort_values("prompt_id") for g in (mine, theirs))
                    out.append({"reading": reading, "model": model, "benchmark": bench, "goose budget": budget,
                                "peer": peer, "peer budget": b.budget.iloc[0], "n": len(a),
                                f"goose {what}": round(value(a), 3), f"peer {what}": round(value(b), 3),
                                **_gain(stat, a, b)})
    return out


def _budgets(values) -> list[str]:
    """Budgets in reading order: numbers ascending, then auto."""
    return sorted(set(values), key=lambda b: (not str(b).isdigit(), int(b) if str(b).isdigit() else 0, str(b)))


def production_peers(df: pd.DataFrame) -> pd.DataFrame:
    """The table: one row per reading x model x benchmark x GOOSE budget x peer (see the module docstring)."""
    rows = df[df.benchmark_name.isin(PAPER_BENCHMARKS) & ~df.chat_template.astype(bool)]
    if rows.empty:
        raise SystemExit("production_peers: no rows of the paper's five benchmarks with raw prompts: run "
                         "`make reproduce-production-peers`")
    absent = [m for m in PEERS if m not in set(rows.method)]
    if GOOSE not in set(rows.method) or len(absent) == len(PEERS):
        side = "GOOSE" if GOOSE not in set(rows.method) else f"production drafter ({', '.join(PEERS)})"
        raise SystemExit(f"production_peers: these rows have no {side}: run it on the same prompts (python run.py "
                         f"method=... results_dir=...), or `make reproduce-production-peers` for the whole comparison")
    if absent:
        print(f"[analysis] production_peers: no rows of {', '.join(absent)}: not compared")
    stop = stopped_at_loop(rows)
    out = (_compare(WINDOW, windows(rows)) + _compare(WHOLE, rows[~stop]) + _compare(CLOCK_STOPPED, rows[stop])
           + _compare(CLOCK, rows[~stop]))  # a stopped run is timed against stopped runs only
    if not out:
        raise SystemExit("production_peers: no cell holds GOOSE and a production drafter on the same prompts: run "
                         "`make reproduce-production-peers`")
    return pd.DataFrame(out)


def _side(peer_budget: str) -> str:
    """Which side of a peer a row reads: its own budget=auto runs, or its defaults (fixed; the -budget peers at
    GOOSE's B)."""
    return "their auto" if peer_budget == "auto" else "defaults"


def _counts(g: pd.DataFrame) -> tuple[int, int, int, int]:
    """Of `g`'s cells: where GOOSE's interval lies above 0, below 0, how many have an interval, how many not."""
    has = g[LOW].notna()
    return int((g[LOW] > 0).sum()), int((g[HIGH] < 0).sum()), int(has.sum()), int((~has).sum())


def _of(ahead: int, behind: int, of: int, without: int, words: bool = False) -> str:
    more = f" (+{without} without an interval)" if without else ""
    return (f"ahead in {ahead}, behind in {behind} of {of}{more}" if words else f"{ahead} / {behind} of {of}{more}")


def _groups(t: pd.DataFrame):
    """(reading, GOOSE budget, peer side, rows): the tallied peers' rows, in reading order."""
    tallied = t[t.peer.isin(TALLIED)]
    for reading in (WINDOW, WHOLE, *CLOCKS):
        here = tallied[tallied.reading == reading]
        for budget in _budgets(here["goose budget"]):
            at = here[here["goose budget"] == budget]
            for side in ("defaults", "their auto"):
                g = at[at["peer budget"].map(_side) == side]
                if not g.empty:
                    yield reading, budget, side, g


def _tally(g: pd.DataFrame) -> str:
    """GOOSE against each production drafter in `g` (one reading, budget and side): cells above / below 0."""
    return "; ".join(f"{peer} " + _of(*_counts(g[g.peer == peer]), words=True)
                     for peer in TALLIED if (g.peer == peer).any())


def _span(n: pd.Series) -> str:
    """The prompts a cell's comparison read, over the cells: "10", or "3-10"."""
    lo, hi = int(n.min()), int(n.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _in_short(t: pd.DataFrame, speedups: str) -> list[str]:
    """The answer first: per reading, GOOSE budget and peer side, cells ahead / behind against each production
    drafter (a table), and one sentence per budget naming where GOOSE is behind, or that it is behind nowhere."""
    table, behind = [], {}
    for reading, budget, side, g in _groups(t):
        row = {"reading": SHORT[reading], "GOOSE B": budget, "peers at": side, "n a cell": _span(g.n)}
        for peer in TALLIED:
            ahead, lost, of, without = _counts(g[g.peer == peer])
            row[peer] = _of(ahead, lost, of, without) if of + without else "not run"
            if lost:
                at = "at B" if peer in PRODUCTION_EQUAL_BUDGET else side
                behind.setdefault(budget, []).append(f"{peer} ({at}) in {lost} of {of} cells ({SHORT[reading]})")
        table.append(row)
    if not table:
        return ["## In short", "", "No production drafter ran on the prompts GOOSE ran: nothing to tally.", ""]
    said = [f"GOOSE B={budget}'s interval lies below 0 against " + ("; ".join(behind[budget]) if budget in behind else
                                                                   "no production drafter in any cell, in any reading")
            + "." for budget in _budgets(t["goose budget"][t.peer.isin(TALLIED)])]
    return ["## In short", "",
            "tau: tokens per forward of the model (verified drafts; 1 is AR). A cell is one model on one benchmark; in "
            f"each, GOOSE's gain over a peer has a paired {CONFIDENCE:.0%} interval over prompts. Counted: cells whose "
            "interval lies above 0 / below 0, of the cells read; n a cell: the prompts each read. Readings: the "
            "loop-free window (each answer up to its first repeated 32 tokens), the whole answer (the paper's "
            "protocol), and the clock on this CPU "
            "against AR (answers cut at their first loop, or whole). Peers at their defaults as their engines ship "
            "them (the -budget columns: at GOOSE's B), or at their own budget=auto (drafts pruned as GOOSE's are).",
            "", pd.DataFrame(table).to_markdown(index=False), "",
            " ".join(said) + speedups + " The clock prices every verified node, which costs more on a CPU "
            "than on a GPU. budget=auto is GOOSE's default (`python run.py method=goose`).", ""]


def _own_speedups(rows: pd.DataFrame, stop: pd.Series, readings: set[str]) -> str:
    """GOOSE's own speedup over AR by the clock, per clock reading the tables hold and budget, across the cells
    where a peer was timed beside it (one sentence): over all of its timed prompts in a cell, not only those a peer
    shares."""
    parts = []
    for reading, kind in ((CLOCK_STOPPED, rows[stop]), (CLOCK, rows[~stop])):
        timed = _timed(kind) if reading in readings else kind.iloc[0:0]
        for budget in _budgets(timed.budget[timed.method == GOOSE]):
            v = pd.Series([g.ar_wall_s.sum() / g.wall_s.sum() for _, cell in timed.groupby(["model", "benchmark_name"])
                           if cell.method.isin(TALLIED).any() and not (g := pick(cell, GOOSE, budget)).empty],
                          dtype=float)
            if v.empty:
                continue
            parts.append(f"B={budget} {v.min():.2f}x to {v.max():.2f}x (median {v.median():.2f}x, {len(v)} cells "
                         f"with a peer timed; {SHORT[reading]})")
    return (" GOOSE's own speedup over AR by this CPU's clock: " + "; ".join(parts) + ".") if parts else ""


def _lacking(rows: pd.DataFrame, models: list[str]) -> str:
    """Per model, the paper's benchmarks `rows` has nothing on ("" when none is lacking)."""
    parts = []
    for model in models:
        have = set(rows.benchmark_name[rows.model == model])
        lacking = [b for b in PAPER_BENCHMARKS if b not in have]
        if lacking:
            parts.append(f"{model} on {', '.join(lacking)}" if len(lacking) < len(PAPER_BENCHMARKS)
                         else f"{model} on all five")
    return "; ".join(parts)


def _missing(rows: pd.DataFrame) -> str:
    """Which of the paper's benchmarks each model has no production drafter's rows on yet (one sentence)."""
    lacking = _lacking(rows[rows.method.isin(PRODUCTION_PEERS)], sorted(set(rows.model)))
    return f"Not run yet (no production drafter's rows): {lacking}." if lacking else \
        "Every model read here has production drafters' rows on all five benchmarks."


def _untimed(timed: pd.DataFrame, models: list[str]) -> str:
    """Which benchmarks the clock has not timed a production drafter on yet, per model, and which of those it has
    are timed in part (one sentence): a cell where only GOOSE is timed is not timed yet, not timed in part."""
    peers = timed[timed.method.isin(PRODUCTION_PEERS)]
    lacking = _lacking(peers, models)
    said = f"Not timed yet: {lacking}." if lacking else "Timed on all five benchmarks for every model read here."
    configs = timed.groupby(["model", "benchmark_name"]).config_hash.nunique()
    part = configs[(configs < configs.max()) & configs.index.isin(
        peers.set_index(["model", "benchmark_name"]).index.unique())] if len(configs) else configs
    if len(part):
        said += " Timed in part (configurations timed, of the most any cell has): " + "; ".join(
            f"{m} on {b} ({k} of {configs.max()})" for (m, b), k in part.items()) + "."
    return said


def _whole_clock_cost(rows: pd.DataFrame, stop: pd.Series) -> str:
    """What timing the whole answers not timed yet costs, from the rows' own clocks (one sentence, "" without an
    estimate): per whole configuration (model x benchmark x method x budget) timed on fewer prompts than a stopped
    configuration was (n; the whole-answer sweep times such a configuration anew, on all n), n prompts, each costing
    its answer's core seconds plus AR's beside it (the model's AR core seconds per token in the stopped clock rows
    times the answer's tokens)."""
    num = lambda s: pd.to_numeric(s, errors="coerce")  # noqa: E731
    stopped, whole = _timed(rows[stop]), rows[~stop]
    if stopped.empty or whole.empty:
        return ""
    key = ["model", "benchmark_name", "method", "budget"]
    n = int(stopped.groupby("config_hash").size().max())
    timed = _timed(whole).groupby(key).prompt_id.nunique()
    todo = whole[[timed.get(k, 0) < n for k in whole.set_index(key).index]]
    if todo.empty:
        return ""
    ar = (num(stopped.ar_wall_s) * num(stopped.threads) / num(stopped.new_tokens).clip(lower=1)).groupby(
        stopped.model).median()
    per = num(todo.wall_s) * num(todo.threads) + num(todo.new_tokens) * todo.model.map(ar)
    configs = per.groupby([todo[k] for k in key]).mean()
    many = "s" * (len(configs) > 1)
    by_model = configs.groupby(level=0).sum() * n / 3600
    split = f" ({', '.join(f'{m} {h:.1f}' for m, h in by_model.items())})" if len(by_model) > 1 else ""
    return (f"Timing the {len(configs)} whole-answer configuration{many} not yet timed on all {n} prompts costs about "
            f"{configs.sum() * n / 3600:.1f} core-hours{split} by the rows' own clocks (each prompt: its answer's "
            "core seconds, plus AR's beside it at the model's AR seconds per token in the stopped clock "
            "rows).")


def _noise(timed: pd.DataFrame) -> tuple[float, int]:
    """The clock's own noise, from the rows: a row whose method landed one token a forward (tau 1) did AR's work
    or more, so its speedup over AR is at most 1 on a steady machine; the largest excess among them, and how many."""
    same = timed[timed.steps.astype(float) == timed.new_tokens.astype(float)]
    excess = (same.speedup.astype(float) - 1).clip(lower=0)
    return (float(excess.max()) if len(same) else 0.0), len(same)


def _above_tau(rows: pd.DataFrame) -> str:
    """The timed configurations whose speedup exceeds their tau by more than the clock's own noise: a verification
    costs at least an AR step, so on a quiet machine speedup <= tau; above it, AR's timing was slowed by other work
    (its many small forwards pay more for a busy machine than a method's few), and the clock flatters every method.
    Pooled over a configuration's prompts (as the tables read them), against one prompt's noise: a single row past
    the largest of k noise samples is what noise alone gives about once in k + 1 rows."""
    timed = _timed(rows)
    if timed.empty:
        return "No timed rows."
    noise, k = _noise(timed)
    said = (f"+{noise:.1%}, the largest speedup over AR of the {k} rows that did AR's work, tau 1" if k else
            "unmeasured: no row did AR's work, tau 1")
    pooled = timed.groupby("config_hash").agg(method=("method", "first"), ar=("ar_wall_s", "sum"),
                                              wall=("wall_s", "sum"), tokens=("new_tokens", "sum"),
                                              steps=("steps", "sum"))
    above = pooled[pooled.ar / pooled.wall > pooled.tokens / pooled.steps * (1 + noise)]
    if above.empty:
        return (f"Every timed configuration's speedup is at most its tau, up to the clock's own noise "
                f"({len(pooled)} configurations, {len(timed)} rows; noise {said}), as on a quiet machine.")
    return (f"**Not trustworthy yet:** {len(above)} of {len(pooled)} timed configurations have a speedup above their "
            f"tau ({', '.join(sorted(set(above.method)))}) by more than the clock's own noise ({said}); a quiet "
            "machine cannot give that (a verification costs at least an AR step): AR's timing was slowed by other "
            "work beside it. Read this section as a ranking at most, until `make reproduce-production-peers` is "
            "rerun on an idle machine.")


def markdown(t: pd.DataFrame, rows: pd.DataFrame) -> str:
    stop = stopped_at_loop(rows)
    lines = ["# GOOSE against the drafters serving engines ship, on one engine", "",
             f"{ran_on(rows)}. Rows read: {len(rows)}, lossless {int(rows.lossless.astype(bool).sum())}/{len(rows)}. "
             "Regenerate: `make reproduce-production-peers` (it resumes the sweeps, then writes this page from "
             "their rows and the claims sweep's production rows); from the committed rows alone: `python -m "
             "goose.analysis.reproduce production_peers --results results/production-peers-local "
             "results/claims-local --out docs/results`.", "",
             *_in_short(t, _own_speedups(rows, stop, set(t.reading))), "## How it is read", "",
             "Every drafter drafts and is verified by the same engine (docs/baselines.md says what each is and what "
             "differs from its engine's own integration), so tau compares drafts alone. GOOSE's gain over a peer is "
             f"tau (or speedup) over the prompts both ran, with its paired {CONFIDENCE:.0%} BCa bootstrap interval "
             "over prompts; n = those prompts. The **loop-free window** is each answer before it first repeats 32 "
             "tokens (the small models loop on raw prompts, and a loop flatters every copying drafter); the **whole "
             "answer** is the paper's protocol; the **clock** is wall time against AR timed beside each run "
             "(interleaved; runs stopped at their first loop against stopped runs, whole answers against whole) on "
             "this CPU, where verifying many nodes costs more than one (a GPU prices them closer); "
             "the rows do not record what else ran on the machine, so read it as a CPU reading and tau as the "
             "comparison. A configuration timed in two results folders (this sweep's and the claims sweep's, on "
             "another setup) is read on one setup, the one with the most prompts; its other rows count for tau only "
             "(so the scorecard's claim 4, which reads the claims sweep alone, can show another n and speedup).", "",
             "Each production drafter runs at its source's defaults: SGLang drafts a tree of 12 nodes; vLLM a chain "
             "of up to 5 tokens after a 5-token match (vLLM has no default num_speculative_tokens: 5 is its n-gram "
             "example's, which also sets prompt_lookup_max 4; docs/baselines.md); llama.cpp's ngram-simple up to 48 "
             "tokens and ngram-mod up to 64. So the first two are also run at "
             "GOOSE's budget (**sglang-ngram-budget**: a tree of B nodes; **vllm-ngram-budget**: a chain of B - 1 "
             "tokens, which holds the default chain as its prefix, so its tau is the chain's best); llama.cpp's "
             "defaults are about B = 60 already. PLD (the research drafter, as Hugging Face wrote it) and GOOSE-suffix "
             "(GOOSE whose spine is SuffixDecoding's best path) are shown beside them and not counted in the "
             "tallies. At B=auto GOOSE is read against each peer at its defaults (what a practitioner would switch "
             "from) and, where it ran them, at its own budget=auto runs (drafts pruned as GOOSE's are); the column "
             "peer budget says which. budget=auto prunes each tree against the verification cost measured on the "
             "machine it runs on (docs/budget-auto.md), so its trees, tau and speedups here are this CPU's: on a GPU, "
             "where verifying 60 tokens costs about as much as one, it keeps larger trees than here; B=60 drafts "
             "the same trees anywhere.", "",
             "llama.cpp's two draft only after a long exact match (12 tokens for ngram-simple, 24 for ngram-mod), "
             "so on these answers they often draft nothing (peer tau near 1), and GOOSE's gain over them is close to "
             "its gain over AR. The scorecard beside claim 5 (claims.md) leaves out prompts on which neither side "
             "drafted a token, so its n and intervals there can differ slightly from this page's.", "",
             _missing(rows), ""]
    for reading in (WINDOW, WHOLE, *CLOCKS):
        part = t[t.reading == reading]
        lines += [f"## {reading[0].upper()}{reading[1:]}", ""]
        cost = _whole_clock_cost(rows, stop) if reading == CLOCK else ""
        if part.empty:
            lines += ["No rows read this way yet" + (": `make reproduce-production-peers` times whole answers after "
                                                     "the stopped runs." if reading == CLOCK else "."), ""]
            lines += [cost, ""] if cost else []
            continue
        if reading in CLOCKS:
            kind = rows[stop] if reading == CLOCK_STOPPED else rows[~stop]
            lines += [_above_tau(kind), "", _untimed(_timed(kind), sorted(set(rows.model))), ""]
            lines += [cost, ""] if cost else []
            if reading == CLOCK_STOPPED:
                lines += ["A stopped answer ends just after its first repeated 32 tokens, past the loop-free "
                          "window's end, so its tau is above the window's; the check above reads each run's speedup "
                          "against that run's own tau.", ""]
        for _, budget, side, g in _groups(part):  # PLD's n is not the tally's: not in g
            lines.append(f"- GOOSE B={budget} against peers at {side} (n {g.n.min()}" +
                         (f"-{g.n.max()}" if g.n.max() != g.n.min() else "") +
                         f" a cell): interval above 0 / below 0, per production drafter: {_tally(g)}.")
        shown = part.drop(columns=["reading", LOW, HIGH]).dropna(axis=1, how="all")
        shown["peer budget"] = shown["peer budget"].replace(FIXED, "defaults")  # the CSV keeps the rows' value
        lines += ["", shown.to_markdown(index=False), ""]
    return "\n".join(lines)


def write(rows: pd.DataFrame, out: Path, name: str = "production_peers") -> list[Path]:
    t = production_peers(rows)
    out.mkdir(parents=True, exist_ok=True)
    md, csv = out / "production-peers.md", out / f"{name}.csv"
    md.write_text(markdown(t, rows[rows.method.isin([GOOSE, *PEERS])]))
    t.to_csv(csv, index=False)
    return [md, csv]
