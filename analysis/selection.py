"""Which rows a claim reads: the paper's five benchmarks, each under one label (the paper's protocol first), and
each method's default configuration, never another one that happens to have more prompts.

A benchmark's rows can carry several labels (analysis.load names runs apart by answer length, turns, chat
template): they are one benchmark, read once. A method can have several configurations in one cell (a
hyperparameter changed, another memory mode): the claims read the one its method config defines and list the
others as not read. The defaults come from the method registry (conf/method/<name>.yaml over its Config), so
this module names no method.
"""

from __future__ import annotations

from functools import cache

import pandas as pd

from goose.analysis.load import CELL, cell_text
from goose.analysis.paper import CLAIMS_BUDGET, PAPER_BENCHMARKS
from goose.drafting.contract import BUDGET, DATA, MEMORY, role_fields
from goose.errors import GooseError
from goose.storage.metrics import FIXED
from goose.storage.row_schema import flat

DEFAULT = "default"


def protocol(rows: pd.DataFrame, chat: bool = False) -> bool:
    """Whether a benchmark label's rows follow the paper's protocol: its answer length, first turns only, and
    raw prompts (`chat`: the same with the chat template, the chat reading's protocol)."""
    r = rows.iloc[0]
    paper = cell_text(r.get("benchmark.paper_max_new_tokens", ""))
    length = cell_text(r.get("max_new_tokens", ""))
    same_length = bool(paper) and bool(length) and float(paper) == float(length)
    return same_length and bool(r.get("chat_template", False)) == chat and \
        cell_text(r.get("benchmark.turns", "")) in ("", "1") and not bool(r.get("stop_at_loop", False))


def labels(bench: pd.DataFrame, chat: bool = False) -> list[tuple[str, pd.DataFrame, str]]:
    """A benchmark's labels, with raw prompts (`chat`: with the chat template), in the order the claims try them,
    each (label, its rows, why it comes there): the paper's protocol first, then the label with the most rows of
    default configurations at the budgets the claims read (rows of other configurations are never read)."""
    out = []
    for label, cell in bench[bench.chat_template.astype(bool) == chat].groupby("benchmark", sort=True):
        paper = protocol(cell, chat)
        usable = _default_rows(cell)
        if paper:
            why = "the paper's protocol (its answer length, raw prompts)"
        else:
            r = cell.iloc[0]
            paper_length = cell_text(r.get("benchmark.paper_max_new_tokens", "")) or "unknown"
            why = (f"not the paper's protocol ({cell_text(r.get('max_new_tokens', ''))} new tokens, the paper's "
                   f"{paper_length}): of the labels read, the one with the most rows of default configurations "
                   f"({usable})")
        out.append((label, cell, why, (not paper, -usable, label)))
    return [(label, cell, why) for label, cell, why, _ in sorted(out, key=lambda t: t[3])]


def _default_rows(cell: pd.DataFrame) -> int:
    """Rows of a label that the claims could read: default configurations at the claims' budgets."""
    g = cell[cell.budget.isin([CLAIMS_BUDGET, FIXED, "auto"])]
    if g.empty:
        return 0
    configs = configurations(g)
    default = set(configs.config_hash[configs.settings.isin([DEFAULT, None])])
    return int(g.config_hash.isin(default).sum())


def own_benchmarks(df: pd.DataFrame) -> list[str]:
    """The benchmarks of the rows that are not among the paper's five (a researcher's own prompts), with one line:
    the claims are read on them in direction, with no paper number to size against, and not counted."""
    other = sorted(set(df.benchmark_name) - set(PAPER_BENCHMARKS))
    if other:
        print(f"[analysis] claims: {', '.join(other)}: not one of the paper's five benchmarks "
              f"({', '.join(PAPER_BENCHMARKS)}): read in direction, with no paper number to size against, not counted")
    return other


# --- each method's default configuration ---------------------------------------------------------------------
@cache
def method_defaults(method: str) -> dict[str, str] | None:
    """`method.drafter.<field>` -> its default as a row writes it, for every field but the budget and memory
    (the cell's own columns) and the data files (a REST datastore: per model, known by data_fingerprint); None
    where the registry does not know the method."""
    from goose.running.registry import load_method  # start-up time: omegaconf only when a method's defaults are read

    try:
        spec, _ = load_method(method)
    except GooseError:
        return None
    skip = {f for role in (BUDGET, MEMORY, DATA) for f in role_fields(spec.config, role)}
    values = {k: v for k, v in spec.values().items() if k not in skip}
    return {"method.drafter._target_": spec.target, **{k: str(v) for k, v in flat("method.drafter", values).items()}}


def identical(a: str, b: str) -> bool:
    """Whether two method names are one configuration (the same drafter class with the same settings: GOOSE's
    no-context-spine ablation is its branches-only source), so that it is measured and counted once."""
    da, db = method_defaults(a), method_defaults(b)
    return da is not None and da == db


def differences(row: pd.Series) -> str | None:
    """What a configuration (one of its rows) sets otherwise than its method's default: "default", the settings
    that differ ("k=v (default d), ..."), or None where the method's default is unknown. A setting a row does not
    record (written before the field existed) is not counted as a difference."""
    defaults = method_defaults(str(row.method))
    if defaults is None:
        return None
    diff = [f"{k.removeprefix('method.drafter.')}={cell_text(row[k])} (default {d})" for k, d in defaults.items()
            if cell_text(row.get(k, "")) not in ("", d)]
    own, paper = cell_text(row.get("memory", "")), cell_text(row.get("memory_default", ""))
    if own and paper and own != paper:
        diff.append(f"memory={own} (default {paper})")
    return ", ".join(diff) or DEFAULT


def configurations(g: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration in `g`: its hash, prompts, and what it sets otherwise than the default."""
    first = g.drop_duplicates("config_hash")
    return pd.DataFrame({"config_hash": first.config_hash.values,
                         "prompts": [int(g[g.config_hash == h].prompt_id.nunique()) for h in first.config_hash],
                         "settings": [differences(r) for _, r in first.iterrows()]})


def pick(cell: pd.DataFrame, method: str, budget: str = CLAIMS_BUDGET) -> pd.DataFrame:
    """The rows of `method`'s default configuration at `budget` (or `fixed`, for a method no budget changes);
    where several default configurations ran (timed or not: the same drafts), the one with the most prompts.
    Empty where only other configurations ran. A method the registry does not know is read where it ran one
    configuration, and refused in one line where it ran several (which is its default cannot be told)."""
    g = cell[(cell.method == method) & cell.budget.isin([budget, FIXED])]
    if g.empty:
        return g
    configs = configurations(g)
    if configs.settings.isna().any():
        if len(configs) > 1:
            raise SystemExit(f"claims: {method} ran {len(configs)} configurations on {cell.benchmark.iloc[0]} "
                             f"({', '.join(configs.config_hash)}) and the method registry does not know its default: "
                             "point --results at a folder holding one of them")
        return g
    default = configs[configs.settings == DEFAULT]
    if default.empty:
        return g.iloc[0:0]
    best = default.sort_values(["prompts", "config_hash"], ascending=[False, True]).config_hash.iloc[0]
    return g[g.config_hash == best]


def not_read(cell: pd.DataFrame, read: set[str]) -> pd.DataFrame:
    """The configurations in a cell (one benchmark label), at the budgets the claims read, that no comparison
    read, and why."""
    out = []
    for (method, budget), h in cell[cell.budget.isin([CLAIMS_BUDGET, FIXED, "auto"])].groupby(["method", "budget"]):
        here = h.config_hash.isin(read).any()
        if budget == "auto" and not here:
            continue  # no claim reads this method at budget=auto under this label
        for c in configurations(h[~h.config_hash.isin(read)]).itertuples():
            why = (f"not the method's default: {c.settings}" if c.settings not in (DEFAULT, None)
                   else "its method's default is unknown" if c.settings is None
                   else "another configuration with the default settings has more prompts" if here
                   else "the comparisons read another label of this benchmark (the paper's protocol first, else the "
                        "one with the most rows of default configurations)")
            out.append({"model": cell.model.iloc[0], "benchmark": cell.benchmark.iloc[0], "method": method,
                        "budget": budget, "config": c.config_hash, "prompts": c.prompts, "why not read": why})
    return pd.DataFrame(out)


def one_configuration_each(df: pd.DataFrame, artifact: str, timed: bool = False) -> pd.DataFrame:
    """An artifact that compares methods by name reads one configuration of each per cell, never two pooled: where
    a cell has several (a `variant`), the rows of one, and one line per choice saying which and which not (with the
    cells it was made in). The one read: (`timed`: with measured speedups first) the method's default settings,
    then the most prompts, then the latest."""
    clash = df[df.variant.ne("")]
    if clash.empty:
        return df
    dropped, said = [], {}
    for key, g in clash.groupby(CELL, dropna=False, sort=True):
        first = g.drop_duplicates("config_hash")
        if len(first) < 2:
            continue
        rows = {h: g[g.config_hash == h] for h in first.config_hash}
        rank = pd.DataFrame({
            "config_hash": first.config_hash.values,
            "timed": [bool(timed and r.speedup.notna().any()) for r in rows.values()],
            "default": [differences(r) in (DEFAULT, None) for _, r in first.iterrows()],
            "prompts": [r.prompt_id.nunique() for r in rows.values()],
            "latest": [str(r.timed_at.max()) for r in rows.values()],
            "variant": first.variant.values,
        }).sort_values(["timed", "default", "prompts", "latest", "config_hash"],
                       ascending=[False, False, False, False, True])
        dropped += list(rank.config_hash.iloc[1:])
        cell = dict(zip(CELL, key))
        why = "timed" if rank.timed.iloc[0] else "default settings" if not rank.default.iloc[1:].all() and \
            rank.default.iloc[0] else "most prompts" if rank.prompts.iloc[0] > rank.prompts.iloc[1:].max() else "latest"
        choice = (cell["method"], cell["budget"], rank.variant.iloc[0], why, "; ".join(rank.variant.iloc[1:]))
        said.setdefault(choice, []).append(f"{cell['model']} / {cell['benchmark']}")
    for (method, budget, best, why, rest), cells in said.items():
        where = cells[0] if len(cells) == 1 else f"{len(cells)} cells ({cells[0]}, ...)"
        print(f"[analysis] {artifact}: {method} B={budget} ran several configurations in {where}: read {best} "
              f"({why}), not {rest} (all_methods shows each)")
    return df[~df.config_hash.isin(dropped)]
