"""The paper's tables and figures, computed from result CSVs only (never reruns a model).

Conventions: tau = generated tokens / target forwards incl. prefill, pooled over prompts
(sum of tokens / sum of forwards; AR = 1.0). Speedup = AR wall time / method wall time on
the same prompts. Acceptance rate of a source = its accepted nodes / its drafted nodes.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.paper import (  # noqa: E402
    ABLATION_DELTA_PCT,
    FIGURE1_MEDIANS,
    FIGURE4_RANGE,
    SOURCE_GAP_RATIO,
    SYNERGY_GAIN_PCT,
    TABLE1_MACRO_GAIN_PCT,
    TABLE1_TAU,
)
from analysis.spec_bench import plot_spec_bench, spec_bench_table  # noqa: E402
from goose.metrics import FIXED, SAME_CONDITIONS, summarize  # noqa: E402
from goose.results import ReferenceStore  # noqa: E402

ABLATIONS = {
    "goose-no-spine-branches": "no spine branches (rho = 0)",
    "goose-no-bigram": "no bigram tier",
    "goose-no-bypass": "no consensus bypass",
    "goose-no-context-spine": "no context-match spine",
    "goose-no-continuation": "no spine continuation",
    "goose-no-prefill-harvest": "no prefill harvest",
}
TAU_NOTE = "tau = generated tokens / target forwards incl. prefill, pooled over prompts (AR = 1.0)"


# What a row was measured on. Rows differing in any of these are different configurations.
MODEL_IDENTITY = ["model_fingerprint", "dtype", "device", "engine.backend"]
PROMPTS_IDENTITY = ["prompts_fingerprint", "chat_template", "max_new_tokens"]
RUN_SETTINGS = ["repeats", "warmup", "speedup_reference", "profile"]
# How tokens were chosen: columns of their own (rows written before sampling existed are greedy).
# A greedy row's top_k, top_p and seed change nothing, so they read as the defaults.
SAMPLING = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}


# Read as text, never as numbers: a hash like 6e6088296560 would parse as inf (and two such configurations
# would merge), an id like 007 would lose its zeros.
# The conditions a speedup is checked under too: a column with a blank in another file reads as float, and
# threads 1 against ar_threads 1.0 would call every timing stale.
TEXT_COLUMNS = {c: str for c in ("config_hash", "prompt_id", "model_fingerprint", "prompts_fingerprint",
                                 "reference_key", "sweep_id", "ar_sweep_id",
                                 *SAME_CONDITIONS, *(f"ar_{k}" for k in SAME_CONDITIONS))}


def load_rows(root: str | Path) -> pd.DataFrame:
    """Every results.csv under `root`. Rows are kept apart by what they were measured on: a model is
    named by what it is and, where one name covers several models, dtypes or devices, by what
    differs; the same for benchmarks (prompts content, chat template, max_new_tokens) and methods
    (hyperparameters, run settings). Only a repeated row of one configuration (same config hash
    and prompt) is counted once."""
    files = sorted(p for p in Path(root).rglob("results.csv") if "references" not in p.parts)
    if not files:
        raise SystemExit(f"no results.csv under {root}: run the experiment first")
    # A row without a config hash (written by an old version) is known only by the file it is in.
    df = pd.concat([pd.read_csv(f, dtype=TEXT_COLUMNS).assign(_file=str(f), references_dir=str(_references_of(f, root)))
                    for f in files], ignore_index=True)
    for c, default in SAMPLING.items():
        df[c] = pd.to_numeric(df[c], errors="coerce").fillna(default) if c in df else default
    greedy = df.temperature.eq(0)
    for c in ("top_k", "top_p", "seed"):
        df.loc[greedy, c] = SAMPLING[c]
    df["top_k"] = df.top_k.astype(int)
    df["seed"] = df.seed.astype(int)
    df["lossless"] = df["lossless"].astype(str).eq("True")
    df = df.copy()  # one block again after the concat, before columns are added
    # Rows from before backends were chosen ran eager; MT-Bench rows from before benchmark.turns existed decoded
    # first turns, Spec-Bench's both (the prompts fingerprint tells them apart; turns names the difference).
    df["engine.backend"] = df["backend"].fillna("eager").astype(str) if "backend" in df else "eager"
    before = df.benchmark.map({"mt_bench": 1, "spec_bench": 2})  # NaN: turns mean nothing to other benchmarks
    given = pd.to_numeric(df["benchmark.turns"], errors="coerce") if "benchmark.turns" in df else before
    df["benchmark.turns"] = given.fillna(before).where(before.notna()).map(lambda v: "" if pd.isna(v) else
                                                                          str(int(v)))
    # A full pass over the prompts repeated (trial=2, 3, ...): its rows are a configuration of their own.
    df["trial"] = pd.to_numeric(df["trial"], errors="coerce").fillna(1).astype(int) if "trial" in df else 1
    for c in ["config_hash", "memory", *MODEL_IDENTITY, *PROMPTS_IDENTITY, *RUN_SETTINGS]:
        if c not in df:
            df[c] = ""
    df["memory"] = df["memory"].fillna("").astype(str)  # "" = written before memory modes existed
    df["config_hash"] = df["config_hash"].fillna("").astype(str)
    legacy = df.config_hash.eq("")
    df.loc[legacy, "config_hash"] = "file:" + df.loc[legacy, "_file"]
    df = df.drop(columns="_file")
    before = len(df)
    df = df.drop_duplicates(["config_hash", "prompt_id"], keep="last").reset_index(drop=True)
    if len(df) < before:
        print(f"[analysis] {before - len(df)} repeated row(s) of one configuration and prompt: kept the latest")
    df["model"] = _distinguish(df, "model", MODEL_IDENTITY + [c for c in df if c.startswith("model.")
                                                              and c not in ("model.path", "model.name")])
    df["benchmark"] = _distinguish(df, "benchmark", PROMPTS_IDENTITY + [
        c for c in df if c.startswith("benchmark.") and c != "benchmark.path"])
    # Budget and memory mode are columns of their own (grouped by, shown in tables), not part of a
    # method's name (budget=auto rows record the budget they build at, 60, in method.drafter.budget).
    # Lookahead's window seed follows the run's seed, a column of its own.
    own = ("method.drafter.memory", "method.drafter.budget", "method.drafter.seed")
    identity = RUN_SETTINGS + [c for c in df if c.startswith("method.") and c not in own]
    # Greedy and sampled rows never share an artifact: a setting that differs only between them (say
    # a sampling sweep run with speedup_reference=none) must not rename the greedy methods.
    sampled = df.temperature > 0
    df["method"] = pd.concat([_distinguish(df[~sampled], "method", identity),
                              _distinguish(df[sampled], "method", identity)]).reindex(df.index)
    cell = ["model", "benchmark", "method", "budget", "memory", "trial", *SAMPLING]
    mixed = df.groupby(cell, dropna=False)["config_hash"].nunique()
    mixed = mixed[mixed > 1]
    if len(mixed):  # still two configurations in one cell: name them by hash rather than pool them
        clash = df.set_index(cell).index.isin(mixed.index)
        df.loc[clash, "method"] = df.loc[clash, "method"] + " [config " + df.loc[clash, "config_hash"] + "]"
    return df


def _references_of(results_csv: Path, root: str | Path) -> Path:
    """The AR reference store of the results_dir a run folder sits in: the nearest `references` folder
    above it (a run writes <results_dir>/references), else <root>/references."""
    for d in results_csv.parents:
        if (d / "references").is_dir():
            return d / "references"
    return Path(root) / "references"


def _text(v) -> str:
    return "" if pd.isna(v) else str(v)


def _short(col: str, v: str) -> str:
    if not v:
        return f"no {col}"
    if col.endswith("fingerprint"):
        return f"{col.split('_')[0]} {v[:6]}"
    return v if col in ("dtype", "device") else f"{col.split('.')[-1]}={v}"


def _distinguish(df: pd.DataFrame, name: str, identity: list[str]) -> pd.Series:
    """`name` as is where it stands for one identity; else suffixed with the identity columns that differ."""
    out = df[name].astype(str).copy()
    cols = [c for c in identity if c in df]
    for value, g in df.groupby(name, dropna=False):
        keys = g[cols].map(_text).drop_duplicates()
        if len(keys) < 2:
            continue
        differ = [c for c in cols if keys[c].nunique() > 1]
        label = g[differ].map(_text).apply(lambda r, d=differ: ", ".join(_short(c, r[c]) for c in d), axis=1)
        out[g.index] = f"{value} [" + label + "]"
    return out


def paper_settings(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's artifacts read each method in its paper memory mode: Token Recycling's hot start
    (memory=run), every other method's table reset per prompt (memory=prompt; `none` for methods that
    keep nothing). Runs in the other mode appear only in the tables that show the mode."""
    want = df.method.str.split(" ").str[0].map(lambda m: "run" if m == "tr" else "prompt")
    return df[df.memory.isin(["", "none"]) | df.memory.eq(want)]


def pooled(g: pd.DataFrame) -> dict:
    s = summarize(g.to_dict("records"))  # the same pooling as the run summaries
    out = {k: s[k] for k in ("prompts", "tau", "speedup", "tokens_per_s", "lossless")}
    for src in ("spine", "branch"):
        if f"{src}_drafted" in g:
            d = g[f"{src}_drafted"].sum()
            out[f"{src}_rate"] = g[f"{src}_accepted"].sum() / d if d else float("nan")
    if "continuation_tokens" in g:
        out["continuation_tokens_per_step"] = g.continuation_tokens.sum() / (g.steps.sum() - len(g))
        out["continuation_share"] = g.continuation_tokens.sum() / g.new_tokens.sum()
    return out


def by(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    rows = [{**dict(zip(keys, k if isinstance(k, tuple) else (k,))), **pooled(g)} for k, g in df.groupby(keys)]
    return pd.DataFrame(rows)


# --- tables --------------------------------------------------------------------------------
def table1(df: pd.DataFrame) -> pd.DataFrame:
    """GOOSE vs balanced Iso(3)/Iso(5) at equal budget: tau and GOOSE's gain."""
    t = by(df[df.method.isin(["goose", "iso3", "iso5"])], ["model", "benchmark", "budget", "method"])
    wide = t.pivot_table(index=["model", "benchmark", "budget"], columns="method", values="tau").reset_index()
    for k in ("iso3", "iso5"):
        wide[f"gain_vs_{k}_%"] = (wide["goose"] / wide[k] - 1) * 100
    wide["gain_vs_best_iso_%"] = (wide["goose"] / wide[["iso3", "iso5"]].max(axis=1) - 1) * 100
    wide["paper_goose"] = [TABLE1_TAU.get((m, b), (None, None))[0] for m, b in zip(wide.model, wide.benchmark)]
    wide["paper_iso"] = [TABLE1_TAU.get((m, b), (None, None))[1] for m, b in zip(wide.model, wide.benchmark)]
    macro = {"model": "macro mean", "benchmark": "", "budget": "",
             **{c: wide[c].mean() for c in wide.columns if c.startswith("gain_")},
             "paper_gain_%": TABLE1_MACRO_GAIN_PCT}
    return pd.concat([wide, pd.DataFrame([macro])], ignore_index=True)


def table2(df: pd.DataFrame) -> pd.DataFrame:
    """Ablations: tau of each switch and its change vs full GOOSE, per benchmark and pooled."""
    sub = df[df.method.isin(["goose", *ABLATIONS])]
    parts = [by(sub, ["model", "benchmark", "method"]), by(sub, ["model", "method"]).assign(benchmark="all")]
    t = pd.concat(parts, ignore_index=True)
    wide = t.pivot_table(index=["model", "method"], columns="benchmark", values="tau")
    rows = []
    for model in wide.index.get_level_values(0).unique():
        full = wide.loc[(model, "goose")]
        for m in ["goose", *ABLATIONS]:
            if (model, m) not in wide.index:
                continue
            row = {"model": model, "variant": ABLATIONS.get(m, "GOOSE (full)")}
            for b, v in wide.loc[(model, m)].items():
                row[f"tau_{b}"] = v
                if m != "goose":
                    row[f"delta_{b}_%"] = (v / full[b] - 1) * 100
            row["paper_delta_%"] = ABLATION_DELTA_PCT.get(m)
            rows.append(row)
    t = pd.DataFrame(rows)
    cols = ["model", "variant"] + sorted(c for c in t if c.startswith("tau_")) + \
        sorted(c for c in t if c.startswith("delta_")) + ["paper_delta_%"]
    return t[cols]


METHOD_ORDER = ["ar", "pld", "tr", "lookahead", "rest", "iso3", "iso5", "suffix-chain", "suffix", "goose",
                "goose-suffix"]  # then ablations, others
CONFIG = ["model", "method", "budget", "memory"]  # one row of the all-methods tables per configuration
_RANK = {m: i for i, m in enumerate([*METHOD_ORDER, *ABLATIONS])}


def method_rank(method: str) -> int:
    """Where a method goes in tables and legends: the order above, ablations next, others last."""
    return _RANK.get(method.split(" ")[0], len(_RANK))


def all_methods(df: pd.DataFrame) -> pd.DataFrame:
    """tau and speedup of every configuration (method, budget, memory mode), per benchmark and pooled
    ("all"), with how many prompts were lossless."""
    df = df.assign(budget=df.budget.astype(str))
    t = pd.concat([by(df, [*CONFIG, "benchmark"]), by(df, CONFIG).assign(benchmark="all")])
    t["lossless"] = [f"{int(x)}/{int(n)}" for x, n in zip(t.lossless, t.prompts)]
    wide = t.pivot(index=CONFIG, columns="benchmark", values=["tau", "speedup"])
    benches = [b for b in wide.columns.get_level_values(1).unique() if b != "all"] + ["all"]
    wide = wide[[(v, b) for v in ("tau", "speedup") for b in benches if (v, b) in wide.columns]]
    wide.columns = [f"{v} {b}" for v, b in wide.columns]
    wide = wide.dropna(axis=1, how="all").reset_index()
    wide = wide.merge(t[t.benchmark == "all"][[*CONFIG, "lossless"]], on=CONFIG, how="left")
    wide["_order"] = wide.method.map(method_rank)
    wide["_auto"] = wide.budget.eq("auto")
    keys = ["model", "_order", "method", "_auto", "budget", "memory"]
    return wide.sort_values(keys).drop(columns=["_order", "_auto"]).reset_index(drop=True).round(3)


SUFFIX_METHODS = ["pld", "tr", "suffix-chain", "suffix", "goose", "goose-suffix"]


def suffix(df: pd.DataFrame) -> pd.DataFrame:
    """SuffixDecoding (chain and tree) vs GOOSE, GOOSE with a suffix-tree spine, Token Recycling and
    PLD: every budget and memory mode kept apart."""
    return all_methods(df[df.method.str.split(" ").str[0].isin(SUFFIX_METHODS)])


# --- sampling --------------------------------------------------------------------------------
def setting_label(temperature: float, top_k: int, top_p: float, seed: int) -> str:
    if temperature == 0:
        return "greedy"
    cut = (f" k{top_k}" if top_k else "") + (f" p{top_p:g}" if top_p < 1 else "")
    return f"T={temperature:g}{cut} s{seed}"


def _with_settings(df: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Rows labelled by sampling setting (greedy first, then by temperature, cuts, seed), limited to the
    configurations that were also run sampled (a greedy-only configuration has no curve to draw) and,
    per configuration, to the prompts (benchmark and id) every one of its settings has: settings are
    compared on the same prompts, also while a sweep is unfinished."""
    keys = list(SAMPLING)
    df = df.assign(budget=df.budget.astype(str),
                   setting=[setting_label(*v) for v in df[keys].itertuples(index=False)])
    sampled = df[df.temperature > 0][CONFIG].drop_duplicates()
    df = df.merge(sampled, on=CONFIG)
    settings = df.groupby(CONFIG).setting.transform("nunique")
    present = df.groupby([*CONFIG, "benchmark", "prompt_id"]).setting.transform("nunique")
    df = df[present == settings]
    order = df[[*keys, "setting"]].drop_duplicates().sort_values(keys).setting.tolist()
    return df, order


def sampling(df: pd.DataFrame) -> pd.DataFrame:
    """tau per sampling setting (greedy and each temperature), per configuration and benchmark (and all
    benchmarks pooled) over the prompts every setting has, the share of the greedy gain (tau - 1) each
    setting keeps, and per setting how many rows were token-identical to AR with the same settings."""
    df, order = _with_settings(df)
    keys = [*CONFIG, "benchmark"]
    t = pd.concat([by(df, [*keys, "setting"]), by(df, [*CONFIG, "setting"]).assign(benchmark="all")])
    t["ok"] = [f"{int(x)}/{int(n)}" for x, n in zip(t.lossless, t.prompts)]
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
    sort = ["model", "_order", "method", "budget", "memory", "_all", "benchmark"]
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
        for bench in [*sorted(mine.benchmark.unique()), "all"]:
            sub = mine if bench == "all" else mine[mine.benchmark == bench]
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


# --- synergy ---------------------------------------------------------------------------------
SINGLE_SOURCES = ("spine-only", "branches-only")  # GOOSE's two sources, each given GOOSE's whole budget
PUBLISHED = ("pld", "tr")  # the single-source methods as published, each at its own draft size
ALERT = "VIOLATED"  # a cell starting with this is set in bold in the .md and .tex tables


def _base(method: str) -> str:
    return method.split(" ")[0]


# What makes GOOSE's single sources what they are: every other hyperparameter must match GOOSE's.
OWN_SWITCHES = ("method.drafter._target_", "method.drafter.context_spine")


def _matched(cell: pd.DataFrame, methods: tuple[str, ...], same_drafter: bool = False
             ) -> tuple[dict[str, pd.DataFrame], str]:
    """Each method's rows in one cell, or why they cannot be compared: a method missing, runs over
    different prompts (a shorter run is not a smaller sample of the same thing) or, with
    `same_drafter`, GOOSE and its sources run with different hyperparameters."""
    found = {m: cell[cell.method == m] for m in methods}
    missing = [m for m, g in found.items() if g.empty]
    if missing:
        return found, f"no {' or '.join(missing)} run here"
    ids = {m: frozenset(zip(g.benchmark, g.prompt_id.astype(str))) for m, g in found.items()}
    if len(set(ids.values())) > 1:
        counts = ", ".join(f"{m} {len(v)}" for m, v in ids.items())
        return found, f"different prompts ({counts}): rerun them with the same n_prompts"
    if same_drafter:
        differ = [c for c in cell if c.startswith("method.drafter.") and c not in OWN_SWITCHES
                  and len({_text(v) for g in found.values() for v in g[c].unique()}) > 1]
        if differ:
            return found, f"different hyperparameters ({', '.join(differ)}): not the same budget and sources"
    return found, ""


def _width(g: pd.DataFrame) -> str:
    """Nodes per verification (incl. the root) a method really used: mean (max where recorded)."""
    checks = (g.steps - 1).clip(lower=1)
    mean = (g.mean_width * checks).sum() / checks.sum() if "mean_width" in g and g.mean_width.notna().all() else None
    top = g.max_width.max() if "max_width" in g and g.max_width.notna().all() else None
    if mean is None:
        return ""
    return f"{mean:.1f}" + (f" (max {int(top)})" if top is not None else "")


def _refused(where: dict, why: str) -> dict:
    print(f"[analysis] not compared: {', '.join(f'{k}={v}' for k, v in where.items())}: {why}")
    return {**where, "not compared": why}


def _gain(found: dict[str, pd.DataFrame], others: tuple[str, ...], alert: bool = True) -> dict:
    """GOOSE's tau over the best of `others` on the same prompts, and whether it is at least each
    (`alert`: a shortfall breaks a claim and is set in bold)."""
    tau = {m: pooled(g)["tau"] for m, g in found.items()}
    best = max(others, key=tau.get)
    low = [f"GOOSE {tau['goose']:.3f} < {m} {tau[m]:.3f}" for m in others if tau["goose"] < tau[m]]
    verdict = (f"{ALERT}: " if alert else "below: ") + "; ".join(low) if low else "holds"
    return {"prompts": len(found["goose"]), **{f"tau {m}": tau[m] for m in found},
            "best single source": best, "gain %": (tau["goose"] / tau[best] - 1) * 100,
            "gain (tau points)": tau["goose"] - tau[best],
            "GOOSE >= each": verdict,
            **{f"nodes/verify {m}": _width(g) for m, g in found.items()}}


def _per_benchmark(df: pd.DataFrame, group: list[str], methods: tuple[str, ...], row,
                   same_drafter: bool = False) -> pd.DataFrame:
    """One row per benchmark of every group that has GOOSE, then one ("all compared") pooling the
    benchmarks whose runs could be compared; `row(found)` computes a compared row."""
    rows = []
    for key, g in df[df.method.isin(methods)].groupby(group):
        if "goose" not in set(g.method):
            continue
        where = dict(zip(group, key if isinstance(key, tuple) else (key,)))
        fine = []
        for bench, cell in g.groupby("benchmark"):
            found, why = _matched(cell, methods, same_drafter)
            if why:
                rows.append(_refused({**where, "benchmark": bench}, why))
                continue
            fine.append(found)
            rows.append({**where, "benchmark": bench, **row(found)})
        if len(fine) > 1:
            together = {m: pd.concat([f[m] for f in fine]) for m in methods}
            rows.append({**where, "benchmark": "all compared", **row(together)})
    if not rows:
        raise SystemExit(f"no GOOSE runs beside {', '.join(methods[1:])}: run `make reproduce-synergy` first")
    t = pd.DataFrame(rows)
    t["prompts"] = t.get("prompts", pd.Series(index=t.index, dtype=float)).astype("Int64")
    return t[[c for c in t if c != "not compared"] + (["not compared"] if "not compared" in t else [])]


def synergy(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's synergy at equal budget: GOOSE's tau over the better of its two sources, each given
    GOOSE's whole budget (spine-only, branches-only), per model, budget, memory mode and benchmark, on
    the same prompts; whether GOOSE is at least each (P4, non-degradation); and the mechanism: tokens
    accepted after the spine broke, per forward (tau points GOOSE gets from spine continuation)."""
    band = f"{SYNERGY_GAIN_PCT[0]} to {SYNERGY_GAIN_PCT[1]}"

    def row(found):
        g = found["goose"]
        rescue = g.continuation_tokens.sum() / g.steps.sum() if "continuation_tokens" in g else float("nan")
        return {**_gain(found, SINGLE_SOURCES), "paper gain %": band, "spine-break rescue (tau points)": rescue}

    return _per_benchmark(df.assign(budget=df.budget.astype(str)), ["model", "budget", "memory"],
                          ("goose", *SINGLE_SOURCES), row, same_drafter=True).round(3)


def synergy_published(df: pd.DataFrame) -> pd.DataFrame:
    """GOOSE against PLD and Token Recycling as published (PLD's 10-token chain, TR's 81-node template
    with its hot start): not an equal-budget comparison, the one users make. Each method in its paper
    memory mode; nodes per verification say what each really used."""
    df = df.assign(budget=df.budget.astype(str))
    goose = df[df.method == "goose"]
    rows = []
    for (model, budget), g in goose.groupby(["model", "budget"]):
        peers = df[(df.model == model) & df.method.isin(PUBLISHED)]
        part = _per_benchmark(pd.concat([g, peers]), ["model"], ("goose", *PUBLISHED),
                              lambda found: _gain(found, PUBLISHED, alert=False))
        rows.append(part.assign(budget=budget))
    t = pd.concat(rows, ignore_index=True)
    t = t[["model", "budget", *[c for c in t if c not in ("model", "budget")]]]
    return t.rename(columns={"best single source": "best published", "gain %": "gain vs best published %"}).round(3)


def _rate(g: pd.DataFrame, source: str = "") -> float:
    d, a = (f"{source}_drafted", f"{source}_accepted") if source else ("drafted", "accepted")
    n = g[d].sum() if d in g else 0
    return g[a].sum() / n if n else float("nan")


GAP_PAIRS = {  # (label, (method, source), (method, source)): context-matched first, adjacency second
    "standalone PLD vs TR (as published)": (("pld", ""), ("tr", "")),
    "standalone spine-only vs branches-only (equal budget)": (("spine-only", "spine"), ("branches-only", "branch")),
    "GOOSE's own spine vs branch nodes": (("goose", "spine"), ("goose", "branch")),
}


def source_gap(df: pd.DataFrame) -> pd.DataFrame:
    """Acceptance per drafted token of context-matched vs adjacency drafts, measured three ways, per
    model and benchmark (and pooled): standalone PLD vs TR, standalone spine-only vs branches-only, and
    GOOSE's own spine vs branch nodes (Figure 1); the paper's 2-18x beside them. A pair is shown only
    where both ran on the same prompts."""
    rows = []
    for model, m in df.groupby("model"):
        benches = sorted(m.benchmark.unique())
        for bench in [*benches, "all"]:
            cell = m if bench == "all" else m[m.benchmark == bench]
            row = {"model": model, "benchmark": bench}
            for label, ((ma, sa), (mb, sb)) in GAP_PAIRS.items():
                methods = tuple(dict.fromkeys((ma, mb)))
                found, why = _matched(cell, methods)
                if why:
                    continue
                a, b = _rate(found[ma], sa), _rate(found[mb], sb)
                row.update({f"{label}: context": a, f"{label}: adjacency": b, f"{label}: ratio": a / b if b else None})
            if len(row) > 2:
                rows.append({**row, "paper ratio": f"{SOURCE_GAP_RATIO[0]}-{SOURCE_GAP_RATIO[1]}x"})
    if not rows:
        raise SystemExit("source_gap: no pair of sources ran on the same prompts; run `make reproduce-synergy` first")
    return pd.DataFrame(rows).round(4)


def _bold_alerts(t: pd.DataFrame, bold) -> pd.DataFrame:
    return t.map(lambda v: bold(v) if isinstance(v, str) and v.startswith(ALERT) else v)


TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
               "<": r"\textless{}", ">": r"\textgreater{}"}


def _tex(v: str) -> str:
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in v)


def to_latex(t: pd.DataFrame, index: bool) -> str:
    """LaTeX with every name and text cell escaped (a bare % in "gain %" would comment out the rest of
    its row) and alerts in bold."""
    tex = _bold_alerts(t.map(lambda v: _tex(v) if isinstance(v, str) else v), lambda v: r"\textbf{" + v + "}")
    tex.columns = [_tex(str(c)) for c in t.columns]
    if index:
        tex.index = tex.index.map(lambda v: _tex(str(v)))
    return tex.to_latex(index=index, float_format="%.3f", na_rep="--", escape=False)


def write_table(t: pd.DataFrame, out: Path, name: str, title: str, as_written: bool = False) -> list[Path]:
    """md, tex and csv. `as_written`: every cell is text shown as it is ("1.00 ± 0.00" and "1.00" alike),
    not reformatted as a number."""
    out.mkdir(parents=True, exist_ok=True)
    index = not isinstance(t.index, pd.RangeIndex)  # row numbers are not worth a column
    md = out / f"{name}.md"
    bold = _bold_alerts(t, lambda v: f"**{v}**")
    blanks = bold.astype(object).where(bold.notna(), None)  # tabulate leaves None cells empty, prints NaN as "nan"
    text = blanks.to_markdown(index=index, floatfmt=".3f", missingval="", disable_numparse=as_written)
    md.write_text(f"# {title}\n\n{TAU_NOTE}.\n\n{text}\n")
    tex = out / f"{name}.tex"
    tex.write_text(to_latex(t, index))
    csv = out / f"{name}.csv"
    t.to_csv(csv, index=index)
    return [md, tex, csv]


# --- figures -------------------------------------------------------------------------------
def _save(fig, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths


def _cells(t: pd.DataFrame) -> list[str]:
    return [f"{m}\n{b}" for m, b in zip(t.model, t.benchmark)]


def plot_figure1(df: pd.DataFrame):
    """Per-source acceptance: context-matched spine vs adjacency branches, per model x benchmark."""
    t = by(df[df.method == "goose"], ["model", "benchmark"])
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(t) + 2), 5.5))
    x = range(len(t))
    w = 0.38
    ax.bar([i - w / 2 for i in x], t.spine_rate, w, label="spine (context match)", color="#1f77b4")
    ax.bar([i + w / 2 for i in x], t.branch_rate, w, label="branches (adjacency)", color="#ff7f0e")
    ax.axhline(FIGURE1_MEDIANS[0], color="#1f77b4", ls="--", lw=1, label=f"paper median, spine ({FIGURE1_MEDIANS[0]})")
    ax.axhline(FIGURE1_MEDIANS[1], color="#ff7f0e", ls="--", lw=1,
               label=f"paper median, branch ({FIGURE1_MEDIANS[1]})")
    for i, (s, b) in enumerate(zip(t.spine_rate, t.branch_rate)):
        if b > 0:
            ax.annotate(f"{s / b:.1f}x", (i, max(s, b)), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(list(x), _cells(t), fontsize=8)
    ax.set_ylabel("acceptance rate (accepted / drafted nodes)")
    ax.set_title("Figure 1: per-source acceptance of GOOSE's drafts\n(label above bars: spine / branch ratio)")
    ax.set_ylim(0, max(0.3, float(t.spine_rate.max()) * 1.25))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    return fig


def plot_figure4(df: pd.DataFrame):
    """GOOSE's wall-clock speedup over AR per model x benchmark (and its tau)."""
    t = by(df[df.method == "goose"], ["model", "benchmark"])
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(t) + 2), 5.5))
    bars = ax.bar(range(len(t)), t.speedup, color="#2ca02c", label="GOOSE speedup (this run)")
    ax.axhspan(*FIGURE4_RANGE, color="grey", alpha=0.15, label=f"paper: {FIGURE4_RANGE[0]}-{FIGURE4_RANGE[1]}x (GPU)")
    ax.axhline(1.0, color="black", lw=0.8)
    for rect, tau in zip(bars, t.tau):
        ax.annotate(f"tau {tau:.2f}", (rect.get_x() + rect.get_width() / 2, rect.get_height()), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 3), textcoords="offset points")
    ax.set_xticks(range(len(t)), _cells(t), fontsize=8)
    ax.set_ylabel("speedup over AR (x, wall clock)")
    ax.set_title("Figure 4: GOOSE speedup over autoregressive decoding")
    ax.set_ylim(0, max(FIGURE4_RANGE[1] * 1.1, float(t.speedup.max()) * 1.2))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    return fig


def plot_budget_sweep(df: pd.DataFrame):
    """tau and speedup vs budget B for GOOSE and the balanced trees; TR, whose template no budget
    changes, as one level across the range."""
    sub = df[df.method.isin(["goose", "tr", "iso3", "iso5"]) & (df.budget.astype(str) != "auto")].copy()
    fixed = sub[(sub.method == "tr") | (sub.budget.astype(str) == FIXED)]  # older TR rows carry the budget swept
    sub = sub.drop(fixed.index)
    sub["B"] = sub.budget.astype(int)
    t = by(sub, ["method", "B"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for m, g in t.groupby("method"):
        g = g.sort_values("B")
        for ax, col in zip(axes, ("tau", "speedup")):
            ax.plot(g.B, g[col], marker="o", label=m)
    span = (t.B.min(), t.B.max()) if len(t) else (1, 81)
    for m, g in fixed.groupby("method"):
        level = pooled(g)
        for ax, col in zip(axes, ("tau", "speedup")):
            ax.hlines(level[col], *span, linestyles="--", colors="gray",
                      label=f"{m} (fixed 81-node template)" if m == "tr" else f"{m} (fixed)")
    axes[0].set_ylabel("tau (tokens per forward)")
    axes[1].set_ylabel("speedup over AR (x)")
    axes[1].axhline(1.0, color="black", lw=0.8)
    for ax, name in zip(axes, ("tau", "speedup")):
        ax.set_xlabel("budget B (nodes per verification, incl. root)")
        ax.set_title(f"{name} vs budget")
        ax.legend(fontsize=8)
    fig.suptitle("Budget sweep")
    return fig


def plot_spine_continuation(df: pd.DataFrame):
    """The synergy's mechanism: tokens GOOSE accepted after the walk left the spine for a branch."""
    t = by(df[df.method == "goose"], ["model", "benchmark"])
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(t) + 2), 4.5))
    ax.bar(range(len(t)), t.continuation_share * 100, color="#9467bd")
    ax.set_xticks(range(len(t)), _cells(t), fontsize=8)
    ax.set_ylabel("share of generated tokens (%)")
    ax.set_title("Spine continuation: tokens accepted after the spine broke")
    return fig


def plot_synergy(df: pd.DataFrame):
    """GOOSE's gain over the better single source at equal budget, per benchmark (one bar per model,
    budget and memory mode), beside its gain over PLD / TR as published, the paper's band shaded.
    Bars below zero break non-degradation (P4)."""
    eq = synergy(df)
    eq = eq[eq["gain %"].notna()] if "gain %" in eq else eq.iloc[:0]
    pub = synergy_published(paper_settings(df))
    pub = pub[pub["gain vs best published %"].notna()] if "gain vs best published %" in pub else pub.iloc[:0]
    benches = list(dict.fromkeys([*eq.benchmark, *pub.benchmark]))
    series = [(f"equal budget: {m}, B={b}, memory={mem}", g.set_index("benchmark")["gain %"], None)
              for (m, b, mem), g in eq.groupby(["model", "budget", "memory"])]
    series += [(f"vs published PLD / TR: {m}, GOOSE B={b}", g.set_index("benchmark")["gain vs best published %"], "//")
               for (m, b), g in pub.groupby(["model", "budget"])]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(benches) + 3), 5))
    w = 0.8 / max(1, len(series))
    for k, (label, gain, hatch) in enumerate(series):
        xs = [i - 0.4 + w * (k + 0.5) for i, b in enumerate(benches) if b in gain.index]
        ys = [gain[b] for b in benches if b in gain.index]
        bars = ax.bar(xs, ys, w, label=label, hatch=hatch, alpha=0.6 if hatch else 1.0)
        for rect, y in zip(bars, ys):
            if y < 0 and not hatch:
                rect.set_edgecolor("red")
                rect.set_linewidth(2)
            ax.annotate(f"{y:+.0f}%", (rect.get_x() + rect.get_width() / 2, max(y, 0)), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.axhspan(*SYNERGY_GAIN_PCT, color="grey", alpha=0.15, zorder=0,
               label=f"paper: +{SYNERGY_GAIN_PCT[0]}% to +{SYNERGY_GAIN_PCT[1]}% over the best single source")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(benches)), benches)
    ax.set_ylabel("GOOSE tau over the best single source (%)")
    ax.set_title("Synergy: GOOSE vs its sources at equal budget (solid; red edge: below a source)\n"
                 "and vs PLD / Token Recycling as published (hatched)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=1)
    return fig


TABLES = {
    "table1": ("Table 1: anisotropic GOOSE vs isotropic trees at equal budget", table1),
    "table2": ("Table 2: ablations", table2),
    "all_methods": ("All methods x benchmarks: tau and speedup per budget and memory mode", all_methods),
    "suffix": ("SuffixDecoding vs GOOSE: tau per budget and memory mode (prompt: state cleared per prompt; "
               "run: kept across the prompts of a run; none: the method keeps no state)", suffix),
    "sampling": ("Sampling: tau per temperature over the prompts every setting has (gain kept = (tau - 1) / "
                 "(greedy tau - 1)); lossless = rows token-identical to AR with the same settings and seed", sampling),
    "sampling_outputs": ("Sampling: prompts whose AR-sampled tokens differ from greedy and between seeds",
                         sampling_outputs),
    "synergy": ("Synergy at equal budget: GOOSE vs its two sources with GOOSE's budget and hyperparameters "
                "(spine-only: the context-match chain over up to B + floor(c * 40) nodes, as GOOSE has at "
                "confidence c; branches-only: the adjacency tree over B nodes, as GOOSE without a spine), same "
                "prompts and memory mode; gain = "
                "GOOSE tau / best single source - 1; GOOSE >= each is the paper's non-degradation (P4); spine-break "
                "rescue = tokens accepted after the spine broke, per forward", synergy),
    "synergy_published": ("GOOSE vs PLD and Token Recycling as published (not equal budget: PLD drafts a 10-token "
                          "chain, TR an 81-node template; nodes/verify says what each used), each in its paper "
                          "memory mode", synergy_published),
    "source_gap": ("Source gap: acceptance per drafted token of context-matched vs adjacency drafts, three ways",
                   source_gap),
    "spec_bench": ("Spec-Bench per category and overall: mean ± std over full passes (trial=1,2,3). Speedup = AR "
                   "wall time / method wall time, AR timed in the same pass and sweep; mean accepted tokens = "
                   "tokens of the decoding forwards / decoding forwards (prefill excluded, AR = 1.00), Spec-Bench's "
                   "convention; tau includes the prefill", spec_bench_table),
}
FIGURES = {
    "figure1": plot_figure1,
    "figure4": plot_figure4,
    "budget_sweep": plot_budget_sweep,
    "spine_continuation": plot_spine_continuation,
    "sampling_figure": plot_sampling,
    "synergy_figure": plot_synergy,
    "spec_bench_figure": plot_spec_bench,
}
ARTIFACTS = [*TABLES, *FIGURES]


EVERY_SETTING = ("all_methods", "suffix", "spec_bench", "spec_bench_figure")  # budget and memory columns of their own
EVERY_TRIAL = ("spec_bench", "spec_bench_figure")  # mean +- std over passes; every other artifact reads trial 1
EVERY_MEMORY = ("synergy", "synergy_figure")  # memory mode a column of their own, at one budget
SAMPLED = ("sampling", "sampling_outputs", "sampling_figure")  # every other artifact reads greedy rows only


def make(name: str, df: pd.DataFrame, out: Path, budget: int = 60) -> list[Path]:
    """Write one artifact. The paper's artifacts read greedy rows, each method in its paper memory mode
    and (but for the budget sweep) the runs at `budget` and those of methods no budget changes
    (budget=fixed); the all-methods tables keep every budget and memory mode, in columns of their own;
    the sampling artifacts read every temperature at `budget`."""
    if name not in EVERY_TRIAL:
        df = df[df.trial == 1]
    if name in SAMPLED:
        df = df[df.budget.astype(str).isin([str(budget), FIXED])]
        if not (df.temperature > 0).any():
            raise SystemExit(f"{name}: no sampled rows (temperature > 0) at budget {budget}; run "
                             "`make reproduce-sampling` first")
    else:
        df = df[df.temperature == 0]
        if name not in (*EVERY_SETTING, *EVERY_MEMORY):
            df = paper_settings(df)
        if name not in ("budget_sweep", *EVERY_SETTING):
            df = df[df.budget.astype(str).isin([str(budget), FIXED])]
        if df.empty:
            raise SystemExit(f"{name}: no rows{'' if name in EVERY_SETTING else f' at budget {budget}'}; "
                             "run its experiment first")
    if name in FIGURES:
        return _save(FIGURES[name](df), out, name)
    title, fn = TABLES[name]
    return write_table(fn(df), out, name, title, as_written=name in EVERY_TRIAL)
