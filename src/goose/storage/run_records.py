"""What a run writes besides its rows (goose.storage.row_schema): the environment they carry, traces, summaries."""

from __future__ import annotations

import csv
import io
import json
import platform
from pathlib import Path

import torch

from goose.engine.backends import device_name
from goose.storage.durable import append_text, replace_text
from goose.storage.metrics import FIXED
from goose.storage.result_files import ResultsFile


def environment(device: torch.device, dtype: torch.dtype) -> dict:
    import transformers

    return {
        "device": str(device),
        "device_name": device_name(device),
        "dtype": str(dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def latest_rows(rows: list[dict], chash: str, asked: list[str] | None = None) -> list[dict]:
    """The rows a summary counts: this configuration's, the latest row per prompt id (a prompt decoded again,
    e.g. after its outputs record was damaged, counts once), and only the prompt ids asked for (in that
    order) when `asked` is given."""
    latest = {r["prompt_id"]: r for r in rows if r.get("config_hash") == chash}
    return list(latest.values()) if asked is None else [latest[i] for i in asked if i in latest]


def write_summary(run_dir: Path, summary: dict) -> None:
    """summary.json and summary.csv, each replaced whole."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(summary))
    w.writeheader()
    w.writerow(summary)
    for name, content in (("summary.json", json.dumps(summary, indent=2)), ("summary.csv", buf.getvalue())):
        replace_text(run_dir / name, content)


def write_trace(path: Path, prompt_id: str, steps: list[dict]) -> None:
    append_text(path, "".join(json.dumps({"prompt_id": prompt_id, "step": i, **step}) + "\n"
                              for i, step in enumerate(steps)))


def run_name(spec, label: str) -> str:
    return f"{label}-{spec.benchmark.name}-{spec.method.name}-{spec.folder_name('')[:-1]}"


def summary_concurrency(s: dict, path: Path) -> int:
    """The concurrency a summary's rows ran at: the summary's own, else their rows' (the `concurrency` column of
    the configuration's rows in `path`; rows from before it ran one request at a time)."""
    if s.get("concurrency") is not None:
        return int(s["concurrency"])
    levels = {str(r.get("concurrency") or 1) for r in latest_rows(ResultsFile(path).rows(), s.get("config_hash"))}
    level = levels.pop() if len(levels) == 1 else "1"
    return int(level) if level.isdigit() else 1


def speedup_basis(s: dict, concurrency: int) -> str:
    """What a summary's speedup divides by, in words."""
    if s["speedup_sources"] == "self":
        return "AR is the method"
    if concurrency > 1:  # interleaved there: batched AR over the same requests, beside the method's batch
        return f"batched AR timing at concurrency {concurrency}"
    return f"{s['speedup_sources']} AR timing"


def slower_than_ar(s: dict, prunes: bool) -> str:
    """One line where the run was slower than AR on this machine, naming what pays; '' where it was not (or was not
    timed). `prunes`: the method can take budget=auto."""
    if not s["speedup_prompts"] or not s["speedup"] < 1:
        return ""
    said = f"\n  slower than AR on this machine ({s['speedup']:.3f}x): "
    if s.get("drafted") == 0:  # not a budget's doing: its settings or these prompts left it nothing to draft
        return said + ("it drafted nothing on these prompts (its settings, such as a minimum match longer than the "
                       "answers, or prompts it finds nothing in), so every forward was AR's and its own work the loss")
    if s["budget"] == "auto":
        return said + "even the drafts budget=auto keeps do not pay here; AR is what pays on these prompts"
    if prunes:
        drafts = "its drafts as built cost" if s["budget"] == FIXED else f"B={s['budget']} verifies"
        return said + f"{drafts} more than this machine gains; budget=auto prunes each draft to what pays here"
    return said + "its drafts cost more than they gain here, and it cannot prune them (no budget=auto)"


def speed_note(s: dict, prunes: bool) -> str:
    """One line on what the speedup means where it needs one: AR's own run (the baseline, not a comparison), a
    speedup above tau (no lossless method can beat its tau on one engine: the clock was noisy), or a run slower
    than AR (`slower_than_ar`)."""
    if s["speedup_sources"] == "self":
        return "\n  AR is the default method and every method's baseline: name one to compare, e.g. method=goose"
    if s["speedup_prompts"] and s["speedup"] > s["tau"]:
        return (f"\n  faster than its tau allows ({s['speedup']:.3f}x > tau {s['tau']:.3f}): the clock was noisy "
                "(a busy machine?), so rank methods by tau here or time them again on an idle machine")
    return slower_than_ar(s, prunes)


def print_summary(s: dict, path: Path, prunes: bool = False) -> None:
    if s["speedup_prompts"]:
        how = speedup_basis(s, summary_concurrency(s, path))
        speed = (f"speedup vs AR {s['speedup']:.3f}x ({how}, "
                 f"{s['speedup_prompts']}/{s['prompts']} prompts)")
    else:
        speed = f"speedup vs AR not measured (speedup_reference={s['speedup_reference']})"
    stale = f", {s['speedup_stale']} stale timing(s) left out" if s["speedup_stale"] else ""
    kinds = (f" ({s['numerics']} numerics: a near-tie swapped; {s['diverged']} diverged)"
             if s["numerics"] or s["diverged"] else "")
    print(
        f"\n{s['method']} on {s['benchmark']} ({s['model']}, B={s['budget']}, memory={s['memory']}): "
        f"{s['prompts']} prompt{'' if s['prompts'] == 1 else 's'}, "
        f"{s['new_tokens']} tokens\n"
        f"  tau {s['tau']:.3f} (tokens / forwards incl. prefill; mean over prompts {s['mean_tau']:.3f})\n"
        f"  {s['tokens_per_s']:.2f} tokens/s, {speed}{stale}{speed_note(s, prunes)}\n"
        f"  lossless {s['lossless']}/{s['prompts']}{kinds}\n"
        f"  rows: {path}",
        flush=True,
    )
