"""Every table and figure, each declaring the rows it reads; `make` selects them and writes the artifact.

Conventions: tau = generated tokens / target forwards incl. prefill, pooled over prompts (sum of tokens /
sum of forwards; AR = 1.0). Speedup = AR wall time / method wall time on the same prompts. Acceptance rate
of a source = its accepted nodes / its drafted nodes. Results are only ever read (src/goose/analysis/load.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from goose.analysis.claims import scorecard
from goose.analysis.comparable import common_prompts
from goose.analysis.concurrency import concurrency_table, plot_concurrency
from goose.analysis.figures import plot_budget_sweep, plot_figure1, plot_figure4, plot_spine_continuation
from goose.analysis.load import load_rows, one_configuration_per_cell, paper_settings
from goose.analysis.pooling import by
from goose.analysis.scorecard import write as write_scorecard
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
    budgets: "one" = the runs at --budget and those of methods no budget changes; "every" = all budgets.
    variants: several configurations of one method in a cell are kept apart (a column) instead of refused.
    concurrency: "one" = rows decoded one request at a time (concurrency 1), "every" = every concurrency.
    pairs: which prompts a comparison is over (goose.analysis.comparable): "all" or "each" (see the field).
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


TABLE_ARTIFACTS = {
    "table1": Artifact("Table 1: anisotropic GOOSE vs isotropic trees at equal budget", table1),
    "table2": Artifact("Table 2: ablations", table2),
    "all_methods": Artifact("All methods x benchmarks: tau and speedup per budget and memory mode", all_methods,
                            settings="every", budgets="every", variants=True),
    "suffix": Artifact("SuffixDecoding vs GOOSE: tau per budget and memory mode (prompt: state cleared per prompt; "
                       "run: kept across the prompts of a run; none: the method keeps no state)", suffix,
                       settings="every", budgets="every", variants=True),
    "sampling": Artifact("Sampling: tau per temperature over the prompts every setting has (gain kept = (tau - 1) / "
                         "(greedy tau - 1)); lossless = rows token-identical to AR with the same settings and seed",
                         sampling, sampled=True, settings="every"),
    "sampling_outputs": Artifact("Sampling: prompts whose AR-sampled tokens differ from greedy and between seeds",
                                 sampling_outputs, sampled=True, settings="every"),
    "synergy": Artifact("Synergy at equal budget: GOOSE vs its two sources with GOOSE's budget and hyperparameters "
                        "(spine-only: the context-match chain over up to B + floor(c * 40) nodes, as GOOSE has at "
                        "confidence c; branches-only: the adjacency tree over B nodes, as GOOSE without a spine), same "
                        "prompts and memory mode; gain = GOOSE tau / best single source - 1; GOOSE >= each is the "
                        "paper's non-degradation (P4); spine-break rescue = tokens accepted after the spine broke, "
                        "per forward", synergy, settings="every"),
    "synergy_published": Artifact("GOOSE vs PLD and Token Recycling as published (not equal budget: PLD drafts a "
                                  "10-token chain, TR an 81-node template; nodes/verify says what each used), each in "
                                  "its paper memory mode", synergy_published),
    "source_gap": Artifact("Source gap: acceptance per drafted token of context-matched vs adjacency drafts, three "
                           "ways", source_gap),
    "concurrency": Artifact("Speedup against concurrency: each configuration against batched AR at the same "
                            "concurrency; TPOT = time per output token of a request after its first (prefill "
                            "excluded), TTFT = time to its first token; exact / numerics / diverged: requests against "
                            "unbatched AR (goose.storage.equality)", concurrency_table, budgets="every",
                            settings="every", variants=True, concurrency="every"),
    "spec_bench": Artifact("Spec-Bench per category and overall: mean ± std over full passes (trial=1,2,3). Speedup "
                           "= AR wall time / method wall time, AR timed in the same pass and sweep; mean accepted "
                           "tokens = tokens of the decoding forwards / decoding forwards (prefill excluded, AR = "
                           "1.00), Spec-Bench's convention; tau includes the prefill", spec_bench_table, trials=True,
                           settings="every", budgets="every", variants=True),
}
FIGURE_ARTIFACTS = {
    "figure1": Artifact("Figure 1", plot_figure1, figure=True),
    "figure4": Artifact("Figure 4", plot_figure4, figure=True),
    "budget_sweep": Artifact("Budget sweep", plot_budget_sweep, figure=True, budgets="every"),
    "spine_continuation": Artifact("Spine continuation", plot_spine_continuation, figure=True),
    "sampling_figure": Artifact("tau vs temperature", plot_sampling, figure=True, sampled=True, settings="every"),
    "synergy_figure": Artifact("Synergy", plot_synergy, figure=True, settings="every"),
    "concurrency_figure": Artifact("Speedup against concurrency", plot_concurrency, figure=True, budgets="every",
                                   settings="every", variants=True, concurrency="every"),
    "spec_bench_figure": Artifact("Spec-Bench per category", plot_spec_bench, figure=True, trials=True,
                                  settings="every", budgets="every", variants=True),
}
SCORECARDS = {
    "claims": Artifact("Which of the paper's claims replicate", scorecard, budgets="every", variants=True,
                       pairs="each", write=write_scorecard),
}
REGISTRY = {**TABLE_ARTIFACTS, **FIGURE_ARTIFACTS, **SCORECARDS}
ARTIFACTS = list(REGISTRY)


def rows_for(name: str, df: pd.DataFrame, budget: int = 60) -> pd.DataFrame:
    """The rows artifact `name` reads (see Artifact), over the prompts every configuration it compares has
    (goose.analysis.comparable), or one line saying which rows it needs. Rows it does not read are named in one line
    each (how many, and which artifact reads them), never dropped without a word."""
    a = REGISTRY[name]
    kept = df

    def keep(mask: pd.Series, what: str, where: str) -> None:
        nonlocal kept
        if (~mask).any():
            print(f"[analysis] {name}: left out {int((~mask).sum())} row(s) {what} ({where})")
        kept = kept[mask]

    if not a.trials:
        keep(kept.trial == 1, "of later passes (trial > 1)", "spec_bench reads every pass")
    if a.concurrency == "one":
        keep(kept.concurrency == 1, f"at concurrency {_values(kept.concurrency[kept.concurrency != 1])}",
             "the concurrency artifact reads them; this one reads requests decoded one at a time")
    at = [str(budget), FIXED]
    if a.sampled:
        keep(kept.budget.isin(at), f"at other budgets than {budget}", "all_methods shows every budget")
        if not (kept.temperature > 0).any():
            raise SystemExit(f"{name}: no sampled rows (temperature > 0) at budget {budget}{_found(df)}; run "
                             "`make reproduce-sampling` first")
        return common_prompts(kept, name)
    keep(kept.temperature == 0, "sampled (temperature > 0)", "the sampling artifacts read them")
    if a.settings == "paper":
        keep(kept.index.isin(paper_settings(kept).index), "in a memory mode other than the method's paper default",
             "all_methods and suffix show every mode")
    if a.budgets == "one":
        keep(kept.budget.isin(at), f"at other budgets than {budget}", "all_methods and budget_sweep show them")
    if kept.empty:
        at_budget = f" and budget {budget}" if a.budgets == "one" else ""
        raise SystemExit(f"{name}: no greedy rows at concurrency 1{at_budget}{_found(df)}; run its experiment first")
    if not a.variants:
        one_configuration_per_cell(kept, name)
    return common_prompts(kept, name) if a.pairs == "all" else kept


def _values(s: pd.Series) -> str:
    return ", ".join(str(v) for v in sorted(s.unique()))


def _found(df: pd.DataFrame) -> str:
    """What the folder holds instead, so a refusal says where the rows went."""
    bits = []
    if (df.concurrency != 1).any():
        bits.append(f"concurrency {_values(df.concurrency)}")
    if (df.temperature > 0).any():
        bits.append(f"temperature {_values(df.temperature)}")
    bits.append(f"budget {_values(df.budget)}")
    return f" (the rows here are at {'; '.join(bits)})" if len(df) else ""


def make(name: str, df: pd.DataFrame, out: Path, budget: int = 60) -> list[Path]:
    """Write one artifact from the rows it declares (its tables as md, tex and csv; figures as png and pdf)."""
    a = REGISTRY[name]
    try:
        rows = rows_for(name, df, budget)
        if a.write is not None:
            return a.write(rows, out, name)
        made = a.make(rows)
    except SystemExit as e:  # one line saying which rows it needs, named for this artifact
        msg = str(e.code)
        raise SystemExit(msg if msg.startswith(f"{name}:") else f"{name}: {msg}") from None
    if a.figure:
        return save_figure(made, out, name)
    return write_table(made, out, name, a.title, as_written=a.trials)
