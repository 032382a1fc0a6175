"""Result rows into one frame, typed by the row schema (storage.row_schema), each kept apart by what it was measured on.

Every cell is read as text first, so an id such as `NA`, `null`, `None` or `007` stays what it was written as;
then each column gets its declared type. A damaged line (storage.result_files) is left out with a notice naming it.
Reading never writes into a results folder.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from goose.running.spec import setting_kinds, splitting
from goose.storage.result_files import ResultsFile
from goose.storage.row_schema import COLUMNS, SECTIONS, kind_of, upgrade

# What a row was measured on: rows differing in any of these are different models, benchmarks or
# configurations of a method (goose.running.spec declares which settings split what).
MODEL_IDENTITY = ["model_fingerprint", "dtype", "device", "engine.backend"]
PROMPTS_IDENTITY = ["prompts_fingerprint", *splitting("benchmark")]
RUN_SETTINGS = splitting("method")
SAMPLING = {"temperature": 0.0, "top_k": 0, "top_p": 1.0, "seed": 0}  # greedy rows read as the defaults
CELL = ["model", "benchmark", "method", "budget", "memory", "trial", "concurrency", *SAMPLING]  # one configuration


def _numeric(col: pd.Series) -> bool:
    filled = col[col.ne("")]
    return len(filled) > 0 and pd.to_numeric(filled, errors="coerce").notna().all()


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Each column as its declared kind; a declared column no row has is there too (blank), so rows of
    older versions compare alike (a missing ar_backend reads as the blank backend beside it)."""
    out = {}
    missing = [c.name for c in COLUMNS if c.name not in df]
    df = pd.concat([df, pd.DataFrame("", index=df.index, columns=missing)], axis=1)  # at once: never fragmented
    settings = setting_kinds()
    for c in df.columns:
        col = df[c].fillna("").astype(str)
        kind = kind_of(c, settings)
        if kind is None and not c.startswith(tuple(f"{s}." for s in SECTIONS)) and not c.startswith("_"):
            kind = "float" if _numeric(col) else "text"  # a drafter's counter: numbers, or text such as accept_by_depth
        if kind in ("int", "float"):
            out[c] = pd.to_numeric(col.where(col.ne("")), errors="coerce")
        elif kind == "bool":
            out[c] = col.eq("True")
        else:
            out[c] = col
    return pd.DataFrame(out, index=df.index)


def read_files(root: str | Path | list) -> pd.DataFrame:
    """Every intact row of every results.csv under `root` (or each of several roots), as text, upgraded to this
    schema."""
    if isinstance(root, (list, tuple)):
        return pd.concat([read_files(r) for r in root], ignore_index=True)
    files = sorted(p for p in Path(root).rglob("results.csv") if "references" not in p.parts)
    if not files:
        if not Path(root).is_dir():
            near = sorted(str(p) for p in Path(root).parent.glob("*")
                          if p.is_dir() and next(p.rglob("results.csv"), None))  # the folders a sweep wrote
            raise SystemExit(f"no results folder {root}: give --results the results_dir a sweep wrote ("
                             + (f"beside it: {', '.join(near)}" if near else "make reproduce-claims PROFILE=local "
                                "writes results/claims-local, make reproduce-production-peers "
                                "results/production-peers-local") + ")")
        raise SystemExit(f"no results.csv under {root}: run a sweep into it first (results_dir={root})")
    frames = []
    for f in files:
        results = ResultsFile(f)
        rows = results.rows()
        for d in results.damaged:
            print(f"[analysis] left out a damaged line: {d}; rerun its configuration to decode that prompt again")
        if rows:
            frames.append(pd.DataFrame([upgrade(r) for r in rows], dtype=object)
                          .assign(_file=str(f), references_dir=str(_references_of(f, root))))
    if not frames:
        raise SystemExit(f"no intact rows under {root}")
    return pd.concat(frames, ignore_index=True)


def load_rows(root: str | Path | list) -> pd.DataFrame:
    """Every results.csv under `root` (or each of several). Rows are kept apart by what they were measured on: a
    model is named by what it is and, where one name covers several models, dtypes or devices, by what differs; the
    same for benchmarks (prompts content, chat template, max_new_tokens). Within one cell (model, benchmark, method,
    budget, memory, trial, sampling) two configurations get a `variant` naming what differs (run settings,
    hyperparameters, else the config hash); `method` stays the method's name. A configuration measured apart in
    several folders is read as one measurement (`one_measurement`)."""
    df = _typed(read_files(root))
    for c, default in SAMPLING.items():
        df[c] = df[c].fillna(default)
    greedy = df.temperature.eq(0)
    for c in ("top_k", "top_p", "seed"):
        df.loc[greedy, c] = SAMPLING[c]
    df["top_k"] = df.top_k.astype(int)
    df["seed"] = df.seed.astype(int)
    df["trial"] = df.trial.fillna(1).astype(int)
    df["concurrency"] = df.concurrency.fillna(1).astype(int) if "concurrency" in df else 1
    for c in ["memory", *MODEL_IDENTITY, *PROMPTS_IDENTITY, *RUN_SETTINGS]:
        if c not in df:
            df[c] = ""
    df["engine.backend"] = df.backend.where(df.backend.ne(""), "eager")  # rows from before backends ran eager
    legacy = df.config_hash.eq("")  # a row of a version before config hashes: known by its file only
    df.loc[legacy, "config_hash"] = "file:" + df.loc[legacy, "_file"]
    df["run_dir"] = df._file.map(lambda f: str(Path(f).parent))  # where its outputs record is (analysis.loops)
    df = df.drop(columns="_file")
    df = one_measurement(df)
    df["benchmark_name"] = df.benchmark  # the benchmark config's name, before labels say what sets runs apart
    df["model"] = _distinguish(df, "model", MODEL_IDENTITY + [c for c in df if c.startswith("model.")
                                                              and c not in ("model.path", "model.name")])
    df["benchmark"] = _distinguish(df, "benchmark", PROMPTS_IDENTITY + [
        c for c in df if c.startswith("benchmark.") and c != "benchmark.path"])
    df["budget"] = df.budget.astype(str)
    df["variant"] = variants(df)
    return df


def one_measurement(df: pd.DataFrame) -> pd.DataFrame:
    """A configuration's rows read as one measurement where folders hold it measured apart (several results roots:
    one run on another machine, or at another thread count), never pooled prompt by prompt:
    - budget=auto rows pruned against several costs (`cost_fingerprint`): the rows of one cost (the trees differ
      with the cost), the one with the most prompts, then the latest;
    - rows timed on several setups (device, threads): the speedups of one setup, the same way (a clock read on
      two machines is not one clock); the others' rows stay for tau, their timing left out as stale.
    Then a prompt repeated within a configuration is read once: a timed row before an untimed one, else the latest."""
    df = df.assign(_order=range(len(df)), _setup=df.device_name.astype(str) + ", " + df.threads.astype(str)
                   + " thread(s)")
    timed = lambda d: d.speedup.notna() & ~d.speedup_stale.eq(True)  # noqa: E731
    for h, g in df[df.cost_fingerprint.ne("")].groupby("config_hash", sort=True):
        if g.cost_fingerprint.nunique() > 1:
            keep = _largest(g, "cost_fingerprint")
            df = df[(df.config_hash != h) | df.cost_fingerprint.isin(["", keep])]
            _said(g, "cost_fingerprint", keep, "pruned against several costs", "left out")
    for h, g in df[timed(df)].groupby("config_hash", sort=True):
        if g._setup.nunique() > 1:
            keep = _largest(g, "_setup")
            other = (df.config_hash == h) & timed(df) & (df._setup != keep)
            df.loc[other, ["speedup", "speedup_stale", "speedup_source"]] = [float("nan"), True, ""]
            _said(g, "_setup", keep, "timed on several setups", "read for tau, their timing left out")
    before = len(df)
    df = df.assign(_timed=timed(df)).sort_values(["_timed", "_order"]) \
        .drop_duplicates(["config_hash", "prompt_id"], keep="last").sort_values("_order")
    if len(df) < before:
        print(f"[analysis] {before - len(df)} repeated row(s) of one configuration and prompt: read one (timed "
              "first, then the latest)")
    return df.drop(columns=["_order", "_setup", "_timed"]).reset_index(drop=True)


def _largest(g: pd.DataFrame, by: str) -> str:
    """The value of `by` with the most prompts in `g`, then the latest."""
    rank = g.groupby(by).agg(prompts=("prompt_id", "nunique"), latest=("timed_at", lambda t: str(t.max())))
    return rank.sort_values(["prompts", "latest"], ascending=False).index[0]


def _said(g: pd.DataFrame, by: str, keep: str, what: str, done: str) -> None:
    r = g.iloc[0]
    rest = "; ".join(f"{v} ({k.prompt_id.nunique()} prompts)" for v, k in g.groupby(by) if v != keep)
    print(f"[analysis] {r.method} B={r.budget} on {r.model} / {r.benchmark} (config {r.config_hash}) was {what} in "
          f"its folders: read {keep} ({g[g[by] == keep].prompt_id.nunique()} prompts); {rest}: {done}")


def variants(df: pd.DataFrame) -> pd.Series:
    """Per row, what sets its configuration apart from the others of its cell ("" where it is the only one)."""
    own = ("method.drafter.memory", "method.drafter.budget", "method.drafter.seed")  # columns of their own
    identity = RUN_SETTINGS + [c for c in df if c.startswith("method.") and c not in own]
    out = pd.Series("", index=df.index)
    for _, g in df.groupby(CELL, dropna=False):
        if g.config_hash.nunique() < 2:
            continue
        label = _differences(g, identity)
        if label.groupby(g.config_hash).first().nunique() < g.config_hash.nunique():  # still alike: the hash says
            label = "config " + g.config_hash.str[:12]
        out[g.index] = label
    return out


def _differences(g: pd.DataFrame, identity: list[str]) -> pd.Series:
    cols = [c for c in identity if c in g]
    keys = g[cols].map(cell_text).drop_duplicates()
    differ = [c for c in cols if keys[c].nunique() > 1]
    if not differ:
        return pd.Series("", index=g.index)
    return g[differ].map(cell_text).apply(lambda r: ", ".join(_short(c, r[c]) for c in differ), axis=1)


def _distinguish(df: pd.DataFrame, name: str, identity: list[str]) -> pd.Series:
    """`name` as is where it stands for one identity; else suffixed with the identity columns that differ."""
    out = df[name].astype(str).copy()
    for value, g in df.groupby(name, dropna=False):
        label = _differences(g, identity)
        if label.ne("").any():
            out[g.index] = f"{value} [" + label + "]"
    return out


def _references_of(results_csv: Path, root: str | Path) -> Path:
    """The AR reference store of the results_dir a run folder sits in: the nearest `references` folder
    above it (a run writes <results_dir>/references), else <root>/references."""
    for d in results_csv.parents:
        if (d / "references").is_dir():
            return d / "references"
    return Path(root) / "references"


def cell_text(v) -> str:
    """A frame's cell as the text it was written as: blank for a missing value."""
    return "" if pd.isna(v) else str(v)


def _short(col: str, v: str) -> str:
    if not v:
        return f"no {col}"
    if col.endswith("fingerprint"):
        return f"{col.split('_')[0]} {v[:6]}"
    return v if col in ("dtype", "device") else f"{col.split('.')[-1]}={v}"


def paper_settings(df: pd.DataFrame) -> pd.DataFrame:
    """Each method in its paper memory mode: the mode its Config defaults to (rows record it as
    memory_default; Token Recycling's hot start is `run`, GOOSE's table is reset per prompt). Runs in the
    other mode appear only in the artifacts that show the mode."""
    return df[df.memory.isin(["", "none"]) | df.memory_default.isin(["", "none"]) | df.memory.eq(df.memory_default)]
