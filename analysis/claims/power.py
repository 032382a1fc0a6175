"""How sure the scorecard can be, and what more would make it surer: the n each comparison reached and its interval's
width, against the prompts its sweeps ask for (the results folder's claims-plan.csv, written by
goose.experiments.claims_plan), and what the prompts still missing cost, in core-hours measured from the rows.

The cost of the rest is an estimate from the rows already there: a missing prompt of a job costs what its job's
prompts cost so far (the generation's seconds, AR's beside it where timed, times the repeats and the threads); a job
with no rows yet, what its configuration cost at other repeats; a job stopped at its loop with no rows yet, its
whole twin's cost times what stopping saved where it was measured (per model and benchmark, the median over the
methods that ran both ways of a stopped prompt's cost over a whole one's; the whole cost where none did); else with
the other template (chat or raw); an untimed prompt new to a model x benchmark x template also needs AR's reference
once (the model's AR seconds per token in its clock rows, times the mean answer length in the cell, else with the
other template)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from goose.analysis.claims.card import WINDOWED
from goose.paths import CLAIMS_PLAN
from goose.storage.metrics import FIXED

KEY = ["model", "benchmark", "method", "budget", "chat_template", "timed", "stop_at_loop"]
TAU, CLOCK = "tau (one core a run)", "clock (an idle machine)"


PLAN_COLUMNS = [*KEY, "repeats", "n_prompts"]
OPTIONAL = {"stop_at_loop": False}  # a plan written before the column: no job stopped at its loop


def find_plan(rows: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """The claims-plan.csv of the results folder the rows were read from (the nearest one above their run
    folders), one job a line (a job listed twice: its largest ask), or None and why not: there is none, several
    that differ, or one that is not a plan (its columns, or a count that is not a whole number >= 0)."""
    found = set()
    for run_dir in rows.run_dir.drop_duplicates():
        found |= {str(d / CLAIMS_PLAN) for d in Path(run_dir).parents if (d / CLAIMS_PLAN).is_file()}
    texts = {Path(f).read_text() for f in found}
    if len(texts) != 1:
        return None, f"no {CLAIMS_PLAN} beside the rows" if not texts else f"{len(texts)} {CLAIMS_PLAN} that differ"
    text = texts.pop()
    try:
        plan = pd.read_csv(io.StringIO(text), comment="#", dtype={"budget": str})
    except (ValueError, pd.errors.ParserError) as e:
        return None, f"{CLAIMS_PLAN} could not be read ({str(e).splitlines()[0]})"
    plan = plan.assign(**{c: v for c, v in OPTIONAL.items() if c not in plan})
    lacks = [c for c in PLAN_COLUMNS if c not in plan]
    counts = pd.to_numeric(plan.n_prompts, errors="coerce") if "n_prompts" in plan else pd.Series(dtype=float)
    if lacks or plan.empty or counts.isna().any() or (counts < 0).any() or (counts % 1 != 0).any():
        why = (f"lacks the column(s) {', '.join(lacks)}" if lacks else "lists no job" if plan.empty
               else "has an n_prompts that is not a whole number >= 0")
        return None, f"{CLAIMS_PLAN} {why}: rewrite it with goose.experiments.claims_plan --write-plan"
    plan = plan.assign(chat_template=plan.chat_template.astype(str).eq("True"), timed=plan.timed.astype(str).eq("True"),
                       stop_at_loop=plan.stop_at_loop.astype(str).eq("True"),
                       budget=plan.budget.astype(str), repeats=pd.to_numeric(plan.repeats, errors="coerce")
                       .fillna(1).astype(int), n_prompts=counts.astype(int))
    plan = plan.groupby([*KEY, "repeats"], as_index=False, sort=False).n_prompts.max()
    plan.attrs["sweeps"] = text.splitlines()[0].removeprefix("# sweeps: ") if text.startswith("#") else "not named"
    return plan, ""


def _column(r: pd.DataFrame, name: str, default) -> pd.Series:
    return r[name] if name in r else pd.Series(default, index=r.index)


def _number(r: pd.DataFrame, name: str, default: float) -> pd.Series:
    return pd.to_numeric(_column(r, name, default), errors="coerce").fillna(default)


def _keyed(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows a plan can name (greedy, one request at a time, at the paper's lengths), with the plan's key:
    the model's and benchmark's config names, and a FIXED budget read as any budget (PLD, TR: no budget)."""
    paper_length = _column(rows, "max_new_tokens", "").astype(str).eq(
        _column(rows, "benchmark.paper_max_new_tokens", "").astype(str))
    r = rows[rows.temperature.eq(0) & rows.concurrency.eq(1) & paper_length]
    name = _column(r, "model.name", "").astype(str)
    repeats, ar_wall_s, threads = _number(r, "repeats", 1).astype(int), _number(r, "ar_wall_s", 0.0), \
        _number(r, "threads", 1)
    return r.assign(model=name.where(name.ne("") & name.ne("nan"), r.model), benchmark=r.benchmark_name,
                    chat_template=_column(r, "chat_template", False).astype(str).eq("True"),
                    stop_at_loop=_column(r, "stop_at_loop", False).astype(str).eq("True"),
                    timed=~_column(r, "speedup_reference", "none").fillna("none").isin(["", "none"]),
                    repeats=repeats, ar_wall_s=ar_wall_s, threads=threads,
                    core_s=(r.wall_s + ar_wall_s) * repeats * threads)


def _match(job, rows: pd.DataFrame) -> pd.DataFrame:
    same = (rows.model.eq(job.model) & rows.benchmark.eq(job.benchmark) & rows.method.eq(job.method)
            & rows.chat_template.eq(job.chat_template) & rows.timed.eq(job.timed)
            & rows.stop_at_loop.eq(job.stop_at_loop))
    return rows[same & (rows.budget.eq(str(job.budget)) | rows.budget.eq(FIXED))]


def _other_template(job, rows: pd.DataFrame) -> pd.DataFrame:
    """A job's configuration with the other template (chat or raw): what a job with no rows yet is costed by."""
    return _match(job._replace(chat_template=not job.chat_template), rows)


def stop_shares(rows: pd.DataFrame) -> dict[tuple[str, str], float]:
    """Per model x benchmark (raw prompts, untimed): what a prompt stopped at its loop costs against the same
    method's whole prompt, the median over the methods that ran both ways (the stopped runs' own costs)."""
    r = rows[~rows.timed & ~rows.chat_template]
    per = r.groupby(["model", "benchmark", "method", "stop_at_loop"]).core_s.mean().unstack("stop_at_loop")
    if True not in per or False not in per:
        return {}
    share = (per[True] / per[False]).dropna()
    return {k: float(v) for k, v in share.groupby(level=["model", "benchmark"]).median().items()}


def cost(rows: pd.DataFrame, plan: pd.DataFrame) -> pd.DataFrame:
    """Per planned job: prompts asked, prompts in the rows (its largest run folder), core-hours the rows took,
    and the core-hours its missing prompts need (an estimate: see the module's docstring)."""
    rows = _keyed(rows)
    shares = stop_shares(rows)
    ar_s = {m: float(np.median(g.ar_wall_s * g.threads / g.new_tokens.clip(lower=1)))
            for m, g in rows[rows.timed & rows.ar_wall_s.gt(0)].groupby("model")}
    out, cells = [], {}
    for job in plan.itertuples():
        mine = _match(job, rows)
        own = mine[mine.repeats.eq(job.repeats)]
        biggest = own.groupby("config_hash").size()
        done = int(biggest.max()) if len(biggest) else 0
        other = _other_template(job, rows)
        whole = _match(job._replace(stop_at_loop=False), rows) if job.stop_at_loop else other.iloc[0:0]
        per_prompt = (own.core_s.mean() if len(own)
                      else mine.core_s.mean() / mine.repeats.mean() * job.repeats if len(mine)
                      else whole.core_s.mean() * shares.get((job.model, job.benchmark), 1.0) if len(whole)
                      else other.core_s.mean() if len(other) else np.nan)
        missing = max(0, int(job.n_prompts) - done)
        out.append({**{k: getattr(job, k) for k in KEY}, "repeats": job.repeats, "asked": int(job.n_prompts),
                    "done": done, "core_h_taken": own.core_s.sum() / 3600,
                    "core_h_left": missing * per_prompt / 3600 if missing else 0.0,
                    "part": CLOCK if job.timed else TAU, "references": 0})
        if not job.timed:  # AR's references: one per prompt of the cell that no configuration has run yet
            cell = (job.model, job.benchmark, job.chat_template, job.stop_at_loop)  # a stop is another reference
            asked, ran = cells.get(cell, (0, 0))
            cells[cell] = (max(asked, int(job.n_prompts)), max(ran, done))
    for (model, bench, chat, stop), (asked, ran) in cells.items():
        cell = rows[rows.model.eq(model) & rows.benchmark.eq(bench)]
        cell = cell[cell.stop_at_loop.eq(stop)] if cell.stop_at_loop.eq(stop).any() else cell
        cell = cell[cell.chat_template.eq(chat)] if cell.chat_template.eq(chat).any() else cell
        if asked > ran:
            seconds = cell.new_tokens.mean() * ar_s[model] if model in ar_s and len(cell) else np.nan
            out.append({"model": model, "benchmark": bench, "method": "ar (references)", "chat_template": chat,
                        "timed": False, "stop_at_loop": stop, "asked": 0, "done": 0, "core_h_taken": 0.0, "part": TAU,
                        "references": asked - ran, "core_h_left": (asked - ran) * seconds / 3600})
    return pd.DataFrame(out)


def _fmt_width(values: pd.Series, unit: str) -> str:
    v = values[np.isfinite(values)]
    if v.empty:
        return "no interval"
    f = (lambda x: f"{x:.2f}x") if unit == "x" else (lambda x: f"{x:.0f} pts")
    return f"{f(v.median())} ({f(v.max())})"


def _planned_n(card: pd.DataFrame, rows: pd.DataFrame, plan: pd.DataFrame) -> pd.Series:
    """Per comparison, the prompts its sweeps ask for: the fewest over its sides (a side's job: its read
    configuration's model, benchmark, method, budget, template and timing, any repeats; in a window reading, whole
    or stopped at the loop, whichever asks more: analysis.loops.windows reads them as one)."""
    keyed = _keyed(rows).drop_duplicates("config_hash").set_index("config_hash")
    asked = plan.groupby(KEY).n_prompts.max()

    def one(configs: str, windowed: bool) -> float:
        ns = []
        for part in str(configs).split("; "):
            h = part.rsplit(" ", 1)[-1]
            if h not in keyed.index:
                return np.nan
            r = keyed.loc[h]
            hits = [asked.get((r.model, r.benchmark, r.method, b, r.chat_template, r.timed, stop))
                    for b in ([r.budget] if r.budget != FIXED else sorted(set(plan.budget)))
                    for stop in ((False, True) if windowed else (r.stop_at_loop,))]
            hits = [x for x in hits if x is not None]
            ns.append(max(hits) if hits else np.nan)
        return min(ns) if ns else np.nan

    return pd.Series([one(c, reading in WINDOWED) for c, reading in zip(card.configurations, card.reading)],
                     index=card.index, dtype=float)


def n_reached(card: pd.DataFrame, rows: pd.DataFrame, plan: pd.DataFrame | None) -> pd.DataFrame:
    """Per claim x model x reading, over its counted comparisons (and the clock's CPU reading): how many, their
    n, the n their sweeps ask for, and how wide their intervals are (median, and the widest)."""
    part = card[card.counted.astype(bool)].copy()
    part["width"] = part.high - part.low
    part["planned"] = _planned_n(part, rows, plan) if plan is not None else np.nan
    part["all run"] = (part.n + part["nothing drafted"].fillna(0)) >= part.planned  # n leaves undrafted ones out
    out = []
    for (claim, name, model, reading), g in part.groupby(["claim", "name", "model", "reading"], sort=False):
        planned = g.planned.dropna()
        out.append({"claim": f"{claim}. {name}", "model": model, "reading": reading, "comparisons": len(g),
                    "n": f"{g.n.min()}-{g.n.max()}" if g.n.min() != g.n.max() else str(g.n.min()),
                    "prompts asked": ("-" if planned.empty else f"{planned.min():.0f}" if planned.nunique() == 1
                                      else f"{planned.min():.0f}-{planned.max():.0f}"),
                    "all asked run": "-" if planned.empty else f"{int(g['all run'].sum())} of {len(g)}",
                    "interval width: median (widest)": _fmt_width(g.width, g.unit.iloc[0])})
    return pd.DataFrame(out)


def _one_token(rows: pd.DataFrame) -> str:
    """Where answers of one token (the prefill's, typically the end of text) are in the rows: per model x
    benchmark, the raw prompts so answered (every lossless method gives the same answer: any row of a prompt says)."""
    raw = rows[~rows.chat_template.astype(bool)].drop_duplicates(["model", "benchmark_name", "prompt_id"])
    said = [f"{m} / {b}: {int((g.new_tokens <= 1).sum())} of {len(g)} raw prompts"
            for (m, b), g in raw.groupby(["model", "benchmark_name"]) if (g.new_tokens <= 1).any()]
    return "; ".join(said) if said else "none in these rows"


def progress(rows: pd.DataFrame) -> str:
    """One sentence: how far the planned sweeps have got (prompt runs in the rows of those asked, the runs stopped at
    their loop apart) and the core-hours the rest needs; blank without a plan."""
    plan, _ = find_plan(rows)
    if plan is None:
        return ""
    jobs = cost(rows, plan)
    jobs = jobs.assign(done=jobs[["done", "asked"]].min(axis=1))
    stop = jobs.stop_at_loop.astype(bool)
    left, stopped_left = jobs.core_h_left.sum(), jobs.core_h_left[stop].sum()
    return (f"How far the sweeps have got: {int(jobs.done.sum())} of {int(jobs.asked.sum())} planned prompt runs, "
            f"of them {int(jobs.done[stop].sum())} of {int(jobs.asked[stop].sum())} stopped at their loop (the "
            f"loop-free reading's, about {stopped_left:.0f} core-hours to go by their own costs); about {left:.0f} "
            "core-hours to go in all (section Power).")


def section(card: pd.DataFrame, rows: pd.DataFrame) -> list[str]:
    """The page's power section: n and widths per claim, then what the plan's missing prompts cost."""
    plan, why = find_plan(rows)
    lines = ["## Power: the n each comparison reached, how wide its interval is, and what the rest costs", ""]
    if plan is None:
        return lines + [f"n and widths as read; {why}, so what the sweeps ask for and what the rest costs are not "
                        "known here (`make reproduce-claims` writes the plan; by hand: goose.experiments.claims_plan "
                        "with --write-plan and one --sweep per sweep).", "",
                        n_reached(card, rows, None).to_markdown(index=False), ""]
    jobs = cost(rows, plan)
    lines += [f"Per claim, model and reading, the counted comparisons: their n, the prompts their sweeps ask for "
              f"({CLAIMS_PLAN}, of the sweeps {plan.attrs['sweeps']}), and their intervals' width (x for ratios, "
              "percentage points for %). n leaves out the prompts nothing was drafted on (a one-token answer: "
              f"{_one_token(rows)}), so it can stay below the prompts asked; 'all asked run' counts them in. A window "
              "reading's prompts come from whole runs and runs stopped at their loop alike, so its ask is the larger "
              "of the two.", "", n_reached(card, rows, plan).to_markdown(index=False), ""]
    jobs = jobs.assign(template=np.where(jobs.chat_template, "chat", "raw"), done=jobs[["done", "asked"]].min(axis=1),
                       answers=np.where(jobs.stop_at_loop.astype(bool), "stopped at their loop", "whole"))
    t = jobs.groupby(["part", "model", "template", "answers"]).agg(
        asked=("asked", "sum"), done=("done", "sum"), references=("references", "sum"), taken=("core_h_taken", "sum"),
        left=("core_h_left", "sum"), unknown=("core_h_left", lambda v: int(v.isna().sum()))).reset_index()
    t["prompt runs done / asked"] = [f"{d} / {a}" for d, a in zip(t.done, t.asked)]
    t["AR references to run"] = t.references
    t["core-hours in the rows"] = t.taken.map(lambda v: f"{v:.1f}")
    t["core-hours to go (est.)"] = [f"{v:.1f}" + (f", and {u} run(s) no row can cost" if u else "")
                                     for v, u in zip(t.left, t.unknown)]
    left = {p: jobs[jobs.part.eq(p)].core_h_left.sum() for p in (TAU, CLOCK)}
    stopped = jobs[jobs.part.eq(TAU) & jobs.stop_at_loop.astype(bool)].core_h_left.sum()
    unknown = int(jobs.core_h_left.isna().sum())
    keyed = _keyed(rows)
    threads = keyed[keyed.timed].threads.median() if keyed.timed.any() else np.nan
    wall = f" (its rows ran on {threads:g} threads: about {left[CLOCK] / threads:.0f} hours)" if threads > 1 else ""
    lines += ["What the plan asks, per part: prompt runs in the rows against those asked, AR's references still to "
              "run (one per prompt no configuration of the cell has run), the core-hours the rows' own clocks took, "
              "and an estimate of the rest from them (goose.analysis.claims.power says how).", "",
              t[["part", "model", "template", "answers", "prompt runs done / asked", "AR references to run",
                 "core-hours in the rows", "core-hours to go (est.)"]].to_markdown(index=False), "",
              f"In all {int(t.done.sum())} of {int(t.asked.sum())} planned prompt runs are in the rows, and "
              f"{int(t.references.sum())} AR references are to run; the rest needs about {left[TAU]:.0f} core-hours "
              f"of tau sweeps (one core a run, any number side by side; of them {stopped:.0f} for the runs stopped "
              f"at their loop, the loop-free reading's) and {left[CLOCK]:.0f} of the clock, on an "
              f"idle machine with every core{wall}"
              + (f"; {unknown} planned run(s) have no rows to cost them by, not counted." if unknown else "."), ""]
    return lines
