"""Every table and figure, each declaring the rows it reads; `make` selects them and writes the artifact.

Conventions: tau = generated tokens / target forwards incl. prefill, pooled over prompts (sum of tokens /
sum of forwards; AR = 1.0). Speedup = AR wall time / method wall time on the same prompts. Acceptance rate
of a source = its accepted nodes / its drafted nodes. Results are only ever read (analysis/load.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from goose.analysis.claims.card import scorecard
from goose.analysis.claims.page import write as write_scorecard
from goose.analysis.comparable import common_prompts
from goose.analysis.concurrency import concurrency_table, plot_concurrency
from goose.analysis.figures import plot_budget_sweep, plot_figure1, plot_figure4, plot_spine_continuation
from goose.analysis.load import load_rows, paper_settings
from goose.analysis.paper import PAPER_BUDGET
from goose.analysis.pooling import by, method_rank
from goose.analysis.production_peers import production_peers
from goose.analysis.production_peers import write as write_production_peers
from goose.analysis.selection import one_configuration_each
from goose.analysis.spec_bench import plot_spec_bench, spec_bench_table
from goose.analysis.synergy import plot_synergy, source_gap, synergy, synergy_published
from goose.analysis.tables import all_methods, suffix, table1, table2
from goose.analysis.temperatures import plot_sampling, sampling, sampling_outputs
from goose.analysis.writers import save_figure, write_table
from goose.storage.metrics import FIXED

__all__ = ["ARTIFACTS", "by", "load_rows", "make"]


@dataclass(frozen=True)
class Artifact:
    """One table or figure and the rows it reads.

    sampled: the sampled rows (temperature > 0, and the greedy ones beside them) instead of greedy rows only.
    trials: every full pass (mean +- std over them) instead of the first.
    settings: "paper" = each method in its paper memory mode; "every" = every memory mode (a column).
    budgets: "one" = the runs at one budget (--budget; else the one the rows have, of several B=60) and those of
        methods no budget changes; "every" = all budgets.
    variants: several configurations of one method in a cell are kept apart (a column) instead of one read
        (analysis.selection.one_configuration_each; `timed`: one with measured speedups first).
    concurrency: "one" = rows at one concurrency (--concurrency; else 1, or the only one the rows have), "1" =
        rows decoded one request at a time only, "every" = every concurrency.
    pairs: which prompts a comparison is over (goose.analysis.comparable): "all" or "each" (see the field).
    command: what makes its rows, named in its refusal.
    """

    title: str
    make: Callable[[pd.DataFrame], object]
    figure: bool = False
    sampled: bool = False
    trials: bool = False
    settings: str = "paper"
    budgets: str = "one"
    variants: bool = False
    concurrency: str = "one"  # "one": requests decoded one at a time (the paper's batch 1); "every"
    pairs: str = "all"  # "all": every configuration of a model x benchmark on the prompts all of them have;
    # "each": the artifact compares few configurations at a time, each comparison on the prompts its own have
    write: Callable[[pd.DataFrame, Path, str], list[Path]] | None = None  # writes its own files from its rows
    command: str = "make reproduce-all"
    timed: bool = False  # reads wall-clock speedups: of several configurations in a cell, a timed one first


TABLE_ARTIFACTS = {
    "table1": Artifact("Table 1: anisotropic GOOSE vs isotropic trees at equal budget", table1,
                       command="make reproduce-table1"),
    "table2": Artifact("Table 2: ablations", table2, command="make reproduce-table2"),
    "all_methods": Artifact("All methods x benchmarks: tau and speedup per budget and memory mode", all_methods,
                            settings="every", budgets="every", variants=True, command="make reproduce-all-methods"),
    "suffix": Artifact("SuffixDecoding vs GOOSE: tau per budget and memory mode (prompt: state cleared per prompt; "
                       "run: kept across the prompts of a run; none: the method keeps no state)", suffix,
                       settings="every", budgets="every", variants=True, command="make reproduce-suffix"),
    "sampling": Artifact("Sampling: tau per temperature over the prompts every setting has (gain kept = (tau - 1) / "
                         "(greedy tau - 1)); lossless = rows token-identical to AR with the same settings and seed",
                         sampling, sampled=True, settings="every", command="make reproduce-sampling"),
    "sampling_outputs": Artifact("Sampling: prompts whose AR-sampled tokens differ from greedy and between seeds",
                                 sampling_outputs, sampled=True, settings="every", command="make reproduce-sampling"),
    "synergy": Artifact("Synergy at equal budget: GOOSE vs its two sources with GOOSE's budget and hyperparameters "
                        "(spine-only: the context-match chain over up to B + floor(c * 40) nodes, as GOOSE has at "
                        "confidence c; branches-only: the adjacency tree over B nodes, as GOOSE without a spine), same "
                        "prompts and memory mode; gain = GOOSE tau / best single source - 1; GOOSE >= each is the "
                        "paper's non-degradation (P4); spine-break rescue = tokens accepted after the spine broke, "
                        "per forward", synergy, settings="every", command="make reproduce-synergy"),
    "synergy_published": Artifact("GOOSE vs PLD and Token Recycling as published (not equal budget: PLD drafts a "
                                  "10-token chain, TR an 81-node template; nodes/verify says what each used), each in "
                                  "its paper memory mode", synergy_published, command="make reproduce-synergy"),
    "source_gap": Artifact("Source gap: acceptance per drafted token of context-matched vs adjacency drafts, three "
                           "ways", source_gap, command="make reproduce-synergy"),
    "concurrency": Artifact("Speedup against concurrency: each configuration against batched AR at the same "
                            "concurrency; TPOT = time per output token of a request after its first (prefill "
                            "excluded), TTFT = time to its first token; exact / numerics / diverged: requests against "
                            "unbatched AR (goose.storage.equality)", concurrency_table, budgets="every",
                            settings="every", variants=True, concurrency="every", command="make reproduce-concurrency"),
    "production_peers": Artifact("GOOSE against the training-free drafters serving engines ship (SGLang NGRAM, vLLM "
                                 "ngram, llama.cpp ngram-mod and ngram-simple), PLD and GOOSE-suffix beside them: tau "
                                 "each, GOOSE's gain with its paired 95% interval over the prompts both ran, and "
                                 "speedups where timed, on the whole answer and its loop-free window",
                                 production_peers, budgets="every", variants=True, pairs="each", concurrency="1",
                                 timed=True, write=write_production_peers, command="make reproduce-production-peers"),
    "spec_bench": Artifact("Spec-Bench per category and overall: mean ± std over full passes (trial=1,2,3). Speedup "
                           "= AR wall time / method wall time, AR timed in the same pass and sweep; mean accepted "
                           "tokens = tokens of the decoding forwards / decoding forwards (prefill excluded, AR = "
                           "1.00), Spec-Bench's convention; tau includes the prefill", spec_bench_table, trials=True,
                           settings="every", budgets="every", variants=True, command="make reproduce-spec-bench"),
}
FIGURE_ARTIFACTS = {
    "figure1": Artifact("Figure 1", plot_figure1, figure=True, command="make reproduce-figure1"),
    "figure4": Artifact("Figure 4", plot_figure4, figure=True, timed=True, command="make reproduce-figure4"),
    "budget_sweep": Artifact("Budget sweep", plot_budget_sweep, figure=True, budgets="every", timed=True,
                             command="make reproduce-budget-sweep"),
    "spine_continuation": Artifact("Spine continuation", plot_spine_continuation, figure=True,
                                   command="make reproduce-figure1"),
    "sampling_figure": Artifact("tau vs temperature", plot_sampling, figure=True, sampled=True, settings="every",
                                command="make reproduce-sampling"),
    "synergy_figure": Artifact("Synergy", plot_synergy, figure=True, settings="every",
                               command="make reproduce-synergy"),
    "concurrency_figure": Artifact("Speedup against concurrency", plot_concurrency, figure=True, budgets="every",
                                   settings="every", variants=True, concurrency="every",
                                   command="make reproduce-concurrency"),
    "spec_bench_figure": Artifact("Spec-Bench per category", plot_spec_bench, figure=True, trials=True,
                                  settings="every", budgets="every", variants=True,
                                  command="make reproduce-spec-bench"),
}
SCORECARDS = {
    "claims": Artifact("Which of the paper's claims replicate", scorecard, budgets="every", variants=True,
                       pairs="each", write=write_scorecard, concurrency="1", command="make reproduce-claims"),
}
REGISTRY = {**TABLE_ARTIFACTS, **FIGURE_ARTIFACTS, **SCORECARDS}
ARTIFACTS = list(REGISTRY)
ARTIFACTS_FOLDER = "artifacts"  # a results folder's tables and figures: <results>/artifacts unless told otherwise


def artifacts_of(results: str | Path) -> Path:
    """Where the artifacts of a results folder go when no --out (reproduce) or GOOSE_ARTIFACTS (the notebook) says:
    <results>/artifacts, beside the run folders (the rows' reader reads results.csv files only)."""
    return Path(results) / ARTIFACTS_FOLDER


def rows_for(name: str, df: pd.DataFrame, budget: str | int | None = None, concurrency: int | None = None
             ) -> pd.DataFrame:
    """The rows artifact `name` reads (see Artifact), over the prompts every configuration it compares has
    (goose.analysis.comparable), or one line saying which rows it needs. Rows it does not read are named in one line
    each (how many, and which artifact reads them), never dropped without a word."""
    return select(name, df, budget, concurrency)[0]


def select(name: str, df: pd.DataFrame, budget: str | int | None = None, concurrency: int | None = None
           ) -> tuple[pd.DataFrame, list[str]]:
    """rows_for's rows and what was taken for the artifact where the rows decided it (["budget=auto",
    "concurrency 4"]: its title says it). `budget` / `concurrency` None: the one the rows have; of several, the
    paper's (B=60, one request at a time), else a refusal asking for --budget / --concurrency."""
    a = REGISTRY[name]
    kept, taken = df, []

    def keep(mask: pd.Series, what: str, where: str) -> None:
        nonlocal kept
        if (~mask).any():
            print(f"[analysis] {name}: left out {int((~mask).sum())} row(s) {what} ({where})")
        kept = kept[mask]

    def refuse(needs: str) -> None:
        raise SystemExit(f"{name}: {needs}{_found(df)}; run `{a.command}`")

    if df.empty:
        refuse("no rows")
    if not a.trials:
        keep(kept.trial == 1, "of later passes (trial > 1)", "spec_bench reads every pass")
    if a.sampled:
        if not (kept.temperature > 0).any():
            refuse("needs sampled rows (temperature > 0)")
    else:
        if not (kept.temperature == 0).any():
            refuse("needs greedy rows (temperature=0)")
        keep(kept.temperature == 0, "sampled (temperature > 0)", "the sampling artifacts read them")
    if a.concurrency != "every":
        have = sorted(kept.concurrency.unique())
        want = concurrency if concurrency is not None else 1 if (1 in have or a.concurrency == "1") else \
            have[0] if len(have) == 1 else None
        if want is None:
            raise SystemExit(f"{name}: reads one concurrency and the rows have {_values(kept.concurrency)}: give "
                             "--concurrency N (the concurrency artifact reads every one)")
        if want not in have:
            refuse(f"needs rows at concurrency {want}")
        keep(kept.concurrency == want, f"at concurrency {_values(kept.concurrency[kept.concurrency != want])}",
             "the concurrency artifact reads every concurrency")
        if want != 1:
            taken.append(f"concurrency {want}")
    if a.settings == "paper":
        keep(kept.index.isin(paper_settings(kept).index), "in a memory mode other than the method's paper default",
             "all_methods and suffix show every mode")
    if a.budgets == "one":
        at = _budget(name, kept, budget)
        keep(kept.budget.isin([at, FIXED]), f"at other budgets than {at}", "all_methods and budget_sweep show them")
        if at != FIXED:
            taken.insert(0, f"budget={at}")
    if kept.empty:
        refuse("no rows left to read")
    if not a.variants:
        kept = one_configuration_each(kept, name, timed=a.timed)
    if a.pairs == "all":
        kept = common_prompts(kept, name)
    return kept, taken


def _budget(name: str, rows: pd.DataFrame, asked: str | int | None) -> str:
    """The budget an artifact that reads one budget reads: the one asked for, the one the rows have, of several
    the paper's B=60; FIXED where only methods no budget changes ran."""
    have = sorted(set(rows.budget) - {FIXED}, key=lambda b: (b == "auto", float(b) if b != "auto" else 0.0))
    if asked is not None:
        return str(asked)
    if not have:
        return FIXED
    if len(have) == 1:
        return have[0]
    if PAPER_BUDGET in have:
        return PAPER_BUDGET
    raise SystemExit(f"{name}: reads one budget and the rows have {', '.join(have)}: give --budget B (one of them; "
                     "all_methods and budget_sweep show every budget)")


def _values(s: pd.Series) -> str:
    return ", ".join(str(v) for v in sorted(s.unique()))


def _found(df: pd.DataFrame) -> str:
    """What the folder holds instead, so a refusal says where the rows went."""
    if df.empty:
        return ""
    bits = [f"{_names(df.method)} at budget {_values(df.budget)}"]
    if (df.concurrency != 1).any():
        bits.append(f"concurrency {_values(df.concurrency)}")
    if (df.temperature > 0).any():
        bits.append(f"temperature {_values(df.temperature)}")
    return f" (the rows here: {'; '.join(bits)})"


def _names(s: pd.Series) -> str:
    names = sorted(s.unique(), key=lambda m: (method_rank(m), m))
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def make(name: str, df: pd.DataFrame, out: Path, budget: str | int | None = None,
         concurrency: int | None = None, taken: list[str] | None = None) -> list[Path]:
    """Write one artifact from the rows it declares (its tables as md, tex and csv; figures as png and pdf); its
    title says the budget and concurrency it read where the rows decided them (also added to `taken`, where given).
    A refusal is one line, "<name>: <what it needs> ...; run `<command>`"."""
    a = REGISTRY[name]
    try:
        rows, chosen = select(name, df, budget, concurrency)
        if taken is not None:
            taken.extend(chosen)
        if a.write is not None:
            return a.write(rows, out, name)
        made = a.make(rows)
    except SystemExit as e:  # one line saying which rows it needs, named for this artifact
        msg = str(e.code)
        if "`" not in msg and "--" not in msg:
            msg = f"{msg}; run `{a.command}`"
        raise SystemExit(msg if msg.startswith(f"{name}:") else f"{name}: {msg}") from None
    what = f" ({', '.join(chosen)})" if chosen else ""
    if a.figure:
        if what:
            _retitle(made, what)
        return save_figure(made, out, name)
    return write_table(made, out, name, a.title + what, as_written=a.trials)


def _retitle(fig, what: str) -> None:
    """A figure's title with what the rows decided appended (its suptitle where it has one)."""
    sup = fig._suptitle
    if sup is not None and sup.get_text():
        sup.set_text(sup.get_text() + what)
    else:
        ax = fig.axes[0]
        lines = ax.get_title().split("\n")
        ax.set_title("\n".join([lines[0] + what, *lines[1:]]))


def short_reason(refusal: str) -> str:
    """A refusal's reason in a few words, for a closing line: its first clause, without the artifact's name."""
    reason = refusal.split(": ", 1)[-1]
    return reason.split(";")[0].split(" (")[0].strip()
