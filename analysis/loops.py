"""The loop-free window: the part of each answer before it starts repeating itself, and tau over it.

Small models given raw prompts run to the length cap and loop: most of a long answer then repeats its own earlier
text, which every copying drafter predicts perfectly. The claims are read a second way on the tokens before the
loop: an answer's loop starts at the first position whose next SPAN tokens already occurred, contiguously, earlier
in the answer; the window is every token before it (the whole answer where none repeats). tau over the window
counts the forwards that produced its tokens: every forward ends with the target's own (bonus) token, so a window
of L tokens took the bonus tokens among them, plus one more where it ends inside a forward's accepted drafts.
Rows written since they carry them (`loop_free_<source>_by_depth`) give the window's drafted and accepted counts
per source, so acceptance rates (claim 1) have a window reading on them; the clock (claim 4) has none. Read from
the outputs records and rows the runs wrote; nothing is decoded again.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from goose.running.loop import BONUS, LOOP_SPAN, loop_start
from goose.storage.result_files import OutputsFile


def window_forwards(origins: list[str], length: int) -> int:
    """The forwards that produced the first `length` tokens (prefill included): the bonus tokens among them, and
    one more where the window ends inside a forward (its last token a drafted one)."""
    if length == 0:
        return 0
    inside = origins[:length]
    return inside.count(BONUS) + (0 if inside[-1] == BONUS else 1)


def loop_free(rows: pd.DataFrame, span: int = LOOP_SPAN) -> pd.DataFrame:
    """The rows with new_tokens and steps over each answer's loop-free window (from the outputs record of its run
    folder), `loop_free_share` the window's share of the answer; the columns a window cannot be read on (drafted
    and accepted counts, wall times) blank. A row whose outputs record is missing is left out, with one line."""
    out, missing = [], 0
    for run_dir, g in rows.groupby("run_dir", sort=False):
        records = OutputsFile(Path(run_dir) / "outputs.jsonl").read()
        for i, r in g.iterrows():
            rec = records.get(str(r.prompt_id))
            if rec is None or rec.get("config_hash") != r.config_hash or "origins" not in rec:
                missing += 1
                continue
            length = loop_start(rec["tokens"], span)
            out.append((i, length, window_forwards(rec["origins"], length), length / max(1, len(rec["tokens"]))))
    if missing:
        print(f"[analysis] loop-free window: {missing} row(s) without their outputs record left out")
    idx = [i for i, *_ in out]
    windowed = rows.loc[idx].copy()
    windowed["new_tokens"] = [n for _, n, _, _ in out]
    windowed["steps"] = [s for _, _, s, _ in out]
    windowed["loop_free_share"] = [f for *_, f in out]
    for c in ("accepted", "drafted", "spine_accepted", "spine_drafted", "branch_accepted", "branch_drafted",
              "wall_s", "ar_wall_s", "speedup", "copied_answer", "copied_prompt"):
        if c in windowed:
            windowed[c] = float("nan")
    return _window_counts(windowed)


def parse(text) -> dict[str, tuple[int, int]]:
    """A row's `<source>_by_depth`, `1:62/182;2:35/143;7+:3/40` -> {"1": (62, 182), ...}: accepted and drafted nodes
    per depth ({} for a blank cell)."""
    out = {}
    for part in filter(None, text.split(";") if isinstance(text, str) else []):
        depth, counts = part.split(":")
        accepted, drafted = counts.split("/")
        out[depth] = (int(accepted), int(drafted))
    return out


def _window_counts(windowed: pd.DataFrame) -> pd.DataFrame:
    """The drafted and accepted counts of a row that carries them over its window (`loop_free_<source>_by_depth`,
    rows written since they were recorded) in place of the whole answer's: per source, by depth and in all."""
    columns = [c for c in windowed if c.startswith("loop_free_") and c.endswith("_by_depth")]
    # a row of a run from before the counts were recorded has none (blank, read as "" or NaN): it keeps none
    carried = (windowed[columns].map(lambda v: isinstance(v, str) and v != "").any(axis=1) if columns
               else pd.Series(False, index=windowed.index))
    if not carried.any():
        return windowed
    total = {"accepted": 0.0, "drafted": 0.0}
    for c in columns:
        source = c.removeprefix("loop_free_").removesuffix("_by_depth")
        counts = windowed.loc[carried, c].map(parse)
        windowed.loc[carried, f"{source}_by_depth"] = windowed.loc[carried, c]
        for kind, k in (("accepted", 0), ("drafted", 1)):
            summed = counts.map(lambda p: float(sum(v[k] for v in p.values())))  # noqa: B023
            windowed.loc[carried, f"{source}_{kind}"] = summed
            total[kind] = total[kind] + summed
    for kind, summed in total.items():
        windowed.loc[carried, kind] = summed
    return windowed


# What makes a run stopped at its loop the twin of a full run: everything that decides the answer's window but
# stop_at_loop (the method's settings as `selection.differences` reads them, so a column one side lacks is none).
TWIN = ["model", "benchmark_name", "method", "budget", "memory", "trial", "concurrency", "temperature", "top_k",
        "top_p", "seed", "chat_template", "max_new_tokens", "benchmark.turns", "prompts_fingerprint",
        "model_fingerprint", "data_fingerprint", "dtype", "engine.backend", "settings"]


def stopped_at_loop(rows: pd.DataFrame) -> pd.Series:
    """Which rows are runs stopped at their first loop (stop_at_loop); rows written before the setting: none."""
    return rows.stop_at_loop.astype(bool) if "stop_at_loop" in rows else pd.Series(False, index=rows.index)


def windows(rows: pd.DataFrame) -> pd.DataFrame:
    """Every row's loop-free window (`loop_free`), a run stopped at its first loop (stop_at_loop) read as its full
    twin: the same configuration but for the stop, so the same window on every prompt both ran. A stopped row takes
    its twin's config hash and benchmark label (a twinless one: the label of the full runs of its benchmark, model
    and template); on a prompt both ran the full run's row is kept. A method that keeps state across the prompts of
    a run (memory=run: Token Recycling's matrix, SuffixDecoding's tree) has no twin: a stop changes what the earlier
    prompts leave it, so its stopped runs are a configuration of their own. attrs["twins"]: (prompts both ran, of
    them with an equal window: tokens and forwards), the check that a stop changes no window."""
    from goose.analysis.selection import differences  # start-up time: selection reads the method registry

    out = loop_free(rows)
    stop = stopped_at_loop(out)
    out.attrs["twins"], out.attrs["stopped"] = (0, 0), []
    if not stop.any():
        return out
    out = out.assign(settings=[differences(r) or "" for _, r in out.iterrows()])
    keys = [c for c in TWIN if c in out]
    text = out[keys].map(lambda v: "" if pd.isna(v) else str(v)).agg("\x1f".join, axis=1)
    full, stopped = out[~stop], out[stop].copy()
    ranked = full.assign(key=text[~stop]).groupby(["key", "config_hash", "benchmark"], as_index=False).size()
    ranked = ranked.sort_values(["key", "size", "config_hash"], ascending=[True, False, True])
    twin = ranked.drop_duplicates("key").set_index("key")
    labels = {k: g.benchmark.iloc[0] for k, g in full.sort_values("benchmark")
              .groupby(["model", "benchmark_name", "chat_template"], sort=False)}
    carried = stopped.memory.astype(str).eq("run") if "memory" in stopped else pd.Series(False, index=stopped.index)
    own = stopped.config_hash.copy()  # the stopped runs' own hashes, for the page's list of what was read as what
    for i, key in text[stop].items():
        if key in twin.index and not carried[i]:
            stopped.loc[i, ["config_hash", "benchmark"]] = twin.loc[key, ["config_hash", "benchmark"]].tolist()
        else:
            r = stopped.loc[i]
            stopped.loc[i, "benchmark"] = labels.get((r.model, r.benchmark_name, r.chat_template), r.benchmark)
    read_as = pd.DataFrame({"model": stopped.model, "method": stopped.method, "benchmark": stopped.benchmark_name,
                            "stopped run": own, "read as": stopped.config_hash}).drop_duplicates(ignore_index=True)
    both = stopped.merge(full, on=["config_hash", "prompt_id"], suffixes=("", "_full"))
    equal = int(((both.new_tokens == both.new_tokens_full) & (both.steps == both.steps_full)).sum())
    stopped = stopped[~stopped.set_index(["config_hash", "prompt_id"]).index.isin(
        full.set_index(["config_hash", "prompt_id"]).index)]
    pooled = pd.concat([full, stopped.assign(stop_at_loop=False)]).drop(columns="settings")
    pooled.attrs["twins"] = (len(both), equal)
    pooled.attrs["stopped"] = read_as.to_dict("records")  # plain records: pandas compares attrs when it combines
    return pooled
