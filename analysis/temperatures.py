"""Sampling: tau per temperature, how often sampled outputs differ, and tau vs temperature."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from goose.analysis.comparable import all_scope
from goose.analysis.load import SAMPLING
from goose.analysis.pooling import CONFIG, by, lossless_cell, method_rank
from goose.storage.result_files import ReferenceStore


def setting_label(temperature: float, top_k: int, top_p: float, seed: int) -> str:
    if temperature == 0:
        return "greedy"
    cut = (f" k{top_k}" if top_k else "") + (f" p{top_p:g}" if top_p < 1 else "")
    return f"T={temperature:g}{cut} s{seed}"


def _with_settings(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Rows labelled by sampling setting (greedy first, then by temperature, cuts, seed), limited to the
    configurations that were also run sampled (a greedy-only configuration has no curve to draw). Settings
    are compared on the prompts every one has (goose.analysis.comparable, applied to every artifact's rows)."""
    keys = list(SAMPLING)
    df = df.assign(setting=[setting_label(*v) for v in df[keys].itertuples(index=False)])
    sampled = df[df.temperature > 0][CONFIG].drop_duplicates()
    df = df.merge(sampled, on=CONFIG)
    order = df[[*keys, "setting"]].drop_duplicates().sort_values(keys).setting.tolist()
    return df, order


def sampling(df: pd.DataFrame) -> pd.DataFrame:
    """tau per sampling setting (greedy and each temperature), per configuration and benchmark (and all
    benchmarks pooled) over the prompts every setting has, the share of the greedy gain (tau - 1) each
    setting keeps, and per setting how many rows were token-identical to AR with the same settings."""
    df, order = _with_settings(df)
    keys = [*CONFIG, "benchmark"]
    t = pd.concat([by(df, [*keys, "setting"]),
                   by(all_scope(df, "sampling"), [*CONFIG, "setting"]).assign(benchmark="all")])
    t["ok"] = [lossless_cell(*v) for v in zip(t.lossless, t.prompts, t.numerics, t.diverged)]
    present = [c for c in order if c in set(t.setting)]
    tau = t.pivot_table(index=keys, columns="setting", values="tau")[present]
    ok = t.pivot(index=keys, columns="setting", values="ok")[present]
    wide = pd.DataFrame(index=tau.index)
    wide["prompts"] = t.groupby(keys).prompts.max().astype(int)  # the same in every setting
    for c in present:
        wide[f"tau {c}"] = tau[c]
    if "greedy" in tau:
        for c in present[1:]:
            wide[f"gain kept {c} %"] = (tau[c] - 1) / (tau["greedy"] - 1) * 100
    for c in present:
        wide[f"lossless {c}"] = ok[c]
    wide = wide.reset_index()
    wide["_order"] = wide.method.map(method_rank)
    wide["_all"] = wide.benchmark.eq("all")
    sort = ["model", "_order", "method", "variant", "budget", "memory", "_all", "benchmark"]
    return wide.sort_values(sort).drop(columns=["_order", "_all"]).reset_index(drop=True).round(3)


def sampling_outputs(df: pd.DataFrame) -> pd.DataFrame:
    """Is sampling doing anything? Per sampled setting and benchmark: on how many prompts AR sampling's
    tokens (the reference every sampled row was checked against) differ from greedy AR's, and from
    every other seed's at the same temperature and cuts, each out of the prompts that have both."""
    df, order = _with_settings(df)
    prompt = ["model", "benchmark", "prompt_id"]
    first = df.drop_duplicates([*prompt, "setting"])
    stores: dict[str, ReferenceStore] = {}
    tokens = {}
    for *k, st, key, where in first[[*prompt, "setting", "reference_key", "references_dir"]].itertuples(index=False):
        store = stores.setdefault(where, ReferenceStore(Path(where)))
        tokens[(*k, st)] = (store.get(str(key)) or {}).get("tokens")
    if not any(v is not None for v in tokens.values()):
        raise SystemExit("sampling_outputs: no AR references found beside the result folders (a run writes them "
                         "to <results_dir>/references); point --results at a results_dir")
    rows = []
    for st in [o for o in order if o != "greedy"]:
        mine = first[first.setting == st]
        t, k, p, seed = mine[list(SAMPLING)].iloc[0]
        others = first[(first.temperature == t) & (first.top_k == k) & (first.top_p == p)
                       & (first.seed != seed)].setting.unique()
        pool = all_scope(mine, "sampling_outputs")
        for bench in [*sorted(mine.benchmark.unique()), "all"]:
            sub = pool if bench == "all" else mine[mine.benchmark == bench]
            vs_greedy, vs_seeds = [0, 0], [0, 0]  # differing, compared
            for m, b, pid in sub[prompt].itertuples(index=False):
                own = tokens.get((m, b, pid, st))
                greedy = tokens.get((m, b, pid, "greedy"))
                theirs = [tokens.get((m, b, pid, o)) for o in others]
                if own is not None and greedy is not None:
                    vs_greedy = [vs_greedy[0] + (own != greedy), vs_greedy[1] + 1]
                if own is not None and theirs and all(x is not None for x in theirs):
                    vs_seeds = [vs_seeds[0] + all(x != own for x in theirs), vs_seeds[1] + 1]
            rows.append({"setting": st, "benchmark": bench, "prompts": len(sub),
                         "differs from greedy": "{}/{}".format(*vs_greedy),
                         "differs from the other seeds": "{}/{}".format(*vs_seeds) if len(others) else "-"})
    return pd.DataFrame(rows)


def plot_sampling(df: pd.DataFrame):
    """tau vs temperature, one line per configuration and cut (top_k, top_p), all benchmarks pooled over
    the prompts every setting has; seed 0 joined by lines from the greedy point, other seeds as open
    markers."""
    df, _ = _with_settings(df)
    t = by(df, [*CONFIG, *SAMPLING])
    fig, ax = plt.subplots(figsize=(8, 5))
    configs = sorted(t[CONFIG].drop_duplicates().itertuples(index=False),
                     key=lambda c: (method_rank(c.method), c.method, c.budget, c.memory))
    cuts = t[t.temperature > 0][["top_k", "top_p"]].drop_duplicates().itertuples(index=False)
    cuts = list(cuts)
    for c in configs:
        g = t[(t.model == c.model) & (t.method == c.method) & (t.budget == c.budget) & (t.memory == c.memory)]
        greedy = g[g.temperature == 0]
        for k, p in cuts:
            cut = g[(g.temperature > 0) & (g.top_k == k) & (g.top_p == p)]
            if cut.empty:
                continue
            main = pd.concat([greedy, cut[cut.seed == 0]]).sort_values("temperature")
            label = f"{c.method} (B={c.budget}, memory={c.memory})" + (
                f", top_k {k or 'off'}, top_p {p:g}" if len(cuts) > 1 else "")
            line = ax.plot(main.temperature, main.tau, marker="o", label=label)[0]
            rest = cut[cut.seed != 0]
            ax.scatter(rest.temperature, rest.tau, facecolors="none", edgecolors=line.get_color(), zorder=3)
    only = f"; sampled with top_k {cuts[0][0] or 'off'}, top_p {cuts[0][1]:g}" if len(cuts) == 1 else ""
    ax.set_xlabel(f"temperature (0 = greedy{only})")
    ax.set_ylabel("tau (tokens per forward, incl. prefill)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_title("tau under sampling (seed 0: lines; other seeds: open markers)")
    ax.legend(fontsize=7)
    return fig


