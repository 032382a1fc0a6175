"""Which rows are comparable: the one place every artifact asks.

Two configurations are compared on the prompts both ran, never on two prompt sets: within one model and one
benchmark (its label: prompts, length, template), every configuration (one config hash) keeps only the
prompts every other configuration there has. A pooled "all" is over the benchmarks every configuration of
the model ran, and never over two configurations of one benchmark (say two max_new_tokens). What is left
out is said in one line per model and benchmark.
"""

from __future__ import annotations

import pandas as pd

from goose.storage.metrics import FIXED

GROUP = ["model", "benchmark"]


def _names(values) -> str:
    values = sorted({str(v) for v in values})
    return ", ".join(values[:4]) + (f" and {len(values) - 4} more" if len(values) > 4 else "")


def _label(g: pd.DataFrame, hashes) -> str:
    """The configurations `hashes` of group `g`, as a reader knows them: method and its variant, budget,
    memory, concurrency, sampling, pass."""
    out = []
    for h in sorted(hashes):
        r = g[g.config_hash == h].iloc[0]
        bits = [str(r.method)] + ([str(r.variant)] if str(r.get("variant", "")) else [])
        bits += [f"B={r.budget}"] if str(r.budget) not in (FIXED, "") else []
        bits += [f"c={int(r.concurrency)}"] if int(r.get("concurrency", 1)) != 1 else []
        bits += [f"T={r.temperature:g}"] if float(r.get("temperature", 0)) > 0 else []
        bits += [f"trial {int(r.trial)}"] if int(r.get("trial", 1)) != 1 else []
        out.append(" ".join(bits))
    return _names(out)


def common_prompts(df: pd.DataFrame, artifact: str = "analysis", say: bool = True) -> pd.DataFrame:
    """`df` keeping, per model and benchmark, the prompts every configuration there has (a later turn counts
    as its own prompt), with one line (where `say`) per group that lost rows: how many, which, and whose runs lack
    them."""
    kept = []
    for (model, bench), g in df.groupby(GROUP, sort=False):
        ids = {h: set(c.prompt_id) for h, c in g.groupby("config_hash")}
        shared = set.intersection(*ids.values())
        keep = g[g.prompt_id.isin(shared)]
        if len(keep) < len(g) and say:
            left = set(g.prompt_id) - shared
            short = [h for h, s in ids.items() if left - s]
            print(f"[analysis] {artifact}: {model} / {bench}: compared on the {len(shared)} prompt(s) every "
                  f"configuration has; left out {len(left)}: {_names(left)}, which {_label(g, short)} did not run")
        kept.append(keep)
    return pd.concat(kept) if kept else df.iloc[:0]


def all_scope(df: pd.DataFrame, artifact: str = "analysis") -> pd.DataFrame:
    """The rows a pooled "all" may pool, per model: the benchmarks every configuration of the model ran (as
    common_prompts left them), each benchmark in one configuration only. Rows of a model whose benchmarks
    repeat under two configurations (two lengths, say) are not pooled: "all" is then left empty, and said."""
    out = []
    for model, g in df.groupby("model", sort=False):
        key = _config_key(g)
        benches = {k: set(c.benchmark) for k, c in g.groupby(key, dropna=False)}
        every = set.intersection(*benches.values())
        names = g[g.benchmark.isin(every)].drop_duplicates("benchmark")
        twice = names[names.benchmark_name.duplicated(keep=False)] if "benchmark_name" in names else names.iloc[:0]
        if not twice.empty:
            print(f"[analysis] {artifact}: {model}: no 'all': {_names(twice.benchmark)} are one benchmark in "
                  f"{len(twice)} configurations; compare them per column")
            continue
        dropped = set(g.benchmark) - every
        if dropped:
            print(f"[analysis] {artifact}: {model}: 'all' pools {_names(every) or 'nothing'}, the benchmark(s) "
                  f"every configuration ran; not {_names(dropped)}")
        out.append(g[g.benchmark.isin(every)])
    return pd.concat(out) if out else df.iloc[:0]


def _config_key(df: pd.DataFrame) -> list[str]:
    """A configuration across benchmarks: everything a config hash covers but the benchmark."""
    cols = ["method", "variant", "budget", "memory", "concurrency", "temperature", "top_k", "top_p", "seed", "trial"]
    return [c for c in cols if c in df]
