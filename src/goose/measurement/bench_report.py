"""What `bench.py --json OUT` writes, and the latency (TTFT, TPOT) its tables and JSON report.

The file is the run: OUT is claimed before anything is measured (its folder must take a file; an earlier file at
OUT is removed, so a run that fails leaves none), and written once, atomically, when the run ends. Numbers that are
undefined are `null`, never NaN or Infinity (the dump refuses them).

Latency of one request (single-request `running.loop.Generation` or a batch's `running.batch_loop.Served`, whose
`ttft_s` and `tpot_s` hold the definitions): TTFT, time to first token = its first new token's time - its start (the
call's start alone; its admission in a batch); TPOT, time per output token = (its last token's time - its first
token's time) / (new tokens - 1), so the prefill is not in it; null where only one token was produced.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

from goose.errors import GooseError
from goose.storage.durable import replace_text


def claim(paths: dict[str, str | None]) -> None:
    """Before a run: every file of `paths` ({flag: path}, e.g. {"--json": OUT}; None = not asked for) can be
    written, and no earlier file stands in for this run: one at those paths is removed now. A GooseError says why
    not."""
    for flag, path in paths.items():
        if not path:
            continue
        p = Path(path)
        folder = p.resolve().parent
        if p.is_dir():
            raise GooseError(f"{flag} {p} is a folder; give a file path")
        if not folder.is_dir():
            raise GooseError(f"{flag} {p}: folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            raise GooseError(f"{flag} {p}: folder {folder} is not writable")
        if p.exists() or p.is_symlink():
            p.unlink()


def write(path: str, data: dict) -> None:
    """Write `data` as JSON to `path`, replaced whole (goose.storage.durable.replace_text): a reader sees the whole
    file or none. NaN and Infinity are refused (ValueError, before anything is written): undefined numbers are
    None."""
    replace_text(Path(path), json.dumps(data, indent=1, allow_nan=False) + "\n")


def ran_on(args, identity, device, dtype, backends: list[str], n_prompts: int, source: str,
           argv: list[str] | None = None) -> dict:
    """What a bench run ran on and over: the header of its JSON."""
    prompts_file = getattr(args, "prompts", None)
    return {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "model": args.model,
            "model_name": getattr(identity, "label", None), "model_path": getattr(identity, "where", None),
            "model_fingerprint": getattr(identity, "fingerprint", None),
            "model_source": getattr(identity, "kind", None),
            "dtype": str(dtype).replace("torch.", ""), "device": str(device), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "backends": list(backends), "prompts": n_prompts, "prompt_source": source,
            "benchmarks": None if prompts_file else list(getattr(args, "benchmarks", None) or []) or None,
            "prompts_file": prompts_file, "max_new_tokens": args.max_new_tokens, "repeats": args.repeats,
            "sampling": (args.sampling.label() if getattr(args, "sampling", None) else "") or "greedy",
            "argv": list(argv) if argv is not None else None}


def latency_ms(gen) -> tuple[float | None, float | None]:
    """(TTFT, TPOT) of one request in ms, None where undefined: the generation's own `ttft_s` and `tpot_s`
    (goose.running.loop.Generation from the start of its call, goose.running.batch_loop.Served from its admission; one
    definition, kept there). A generation that does not say when its first token came has neither."""
    ttft, tpot = getattr(gen, "ttft_s", None), getattr(gen, "tpot_s", None)
    if ttft is None:
        return None, None
    return ttft * 1e3, None if tpot is None else tpot * 1e3


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile of `values` (the value at rank int(q * n) of the sorted ones); None for no values."""
    vals = sorted(v for v in values if v is not None)
    return vals[min(len(vals) - 1, int(q * len(vals)))] if vals else None
