"""What a run writes: one row per prompt (measurements + identity + settings), traces, summaries."""

from __future__ import annotations

import csv
import json
import platform
import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from goose.metrics import first_divergence, speedup_stale
from goose.run_folder import RunIdentity
from goose.sampling import Sampling
from goose.timing import Measured, device_name


def flat(prefix: str, node) -> dict:
    out = {}
    for k, v in node.items():
        if k.startswith("_"):
            continue
        key = f"{prefix}.{k}" if prefix else k
        out.update(flat(key, v) if isinstance(v, dict) else {key: v})
    return out


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


TOP_LEVEL = ("trial", "temperature", "top_k", "top_p", "seed", "chat_template", "repeats", "warmup",
             "speedup_reference", "profile")


def row_for(cfg, rid: str, category: str, ids, m: Measured, env: dict, run: RunIdentity) -> dict:
    gen, ar = m.gen, m.ar_timing
    div = first_divergence(gen.tokens, m.ar_tokens)
    row = {
        "model": run.model.label,
        "benchmark": cfg.benchmark.name,
        "method": cfg.method.name,
        "budget": cfg.budget,
        "memory": cfg.memory,
        "prompt_id": rid,
        "category": category,
        "prompt_tokens": len(ids),
        "new_tokens": len(gen.tokens),
        "steps": gen.steps,
        "tau": round(gen.tau, 6),
        "wall_s": round(gen.wall_s, 6),
        "tokens_per_s": round(gen.tokens_per_s, 4),
        "lossless": div is None,
        "first_divergence": -1 if div is None else div,
        "speedup": round(ar["wall_s"] / gen.wall_s, 4) if ar and gen.wall_s > 0 else "",
        "speedup_source": m.source,
        "ar_wall_s": round(ar["wall_s"], 6) if ar else "",
        "ar_tokens_per_s": round(ar["tokens_per_s"], 4) if ar else "",
        # Nodes per verification (incl. the root), what a method really used whatever its budget says.
        "mean_width": round(sum(gen.widths) / len(gen.widths), 3) if gen.widths else 1.0,
        "max_width": max(gen.widths, default=1),
        "max_new_tokens": cfg.max_new_tokens,
        "config_hash": run.config_hash,
        "model_config": cfg.model.name,
        "model_fingerprint": run.model.fingerprint,
        "model_source": run.model.description,
        "prompts_fingerprint": run.prompts_fingerprint,
        "reference_key": m.key,
        "timed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **{k: run.conditions[k] for k in ("host", "threads", "backend", "sweep_id")},
        **{f"ar_{k}": (ar or {}).get(k, "") for k in ("at", "host", "threads", "torch", "backend", "device_name",
                                                      "sweep_id")},
    }
    row.update(gen.stats)
    row.update(env)
    stale = speedup_stale(row)
    row["speedup_stale"] = "" if stale is None else stale
    plain = OmegaConf.to_container(cfg, resolve=True)
    for section in ("model", "method", "benchmark"):
        row.update(flat(section, plain[section]))
    row.update({k: plain[k] for k in TOP_LEVEL})
    return row


def write_summary_csv(path: Path, summary: dict) -> None:

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary))
        w.writeheader()
        w.writerow(summary)


def write_trace(path: Path, prompt_id: str, steps: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for i, step in enumerate(steps):
            f.write(json.dumps({"prompt_id": prompt_id, "step": i, **step}) + "\n")


def run_name(cfg: DictConfig, label: str) -> str:
    sampled = Sampling.from_config(cfg).label()
    return (f"{label}-{cfg.benchmark.name}-{cfg.method.name}-B{cfg.budget}-M{cfg.memory}-N{cfg.max_new_tokens}"
            + (f"-{sampled}" if sampled else ""))


def print_summary(s: dict, path: Path) -> None:
    if s["speedup_prompts"]:
        how = "AR is the method" if s["speedup_sources"] == "self" else f"{s['speedup_sources']} AR timing"
        speed = (f"speedup vs AR {s['speedup']:.3f}x ({how}, "
                 f"{s['speedup_prompts']}/{s['prompts']} prompts)")
    else:
        speed = f"speedup vs AR not measured (speedup_reference={s['speedup_reference']})"
    stale = f", {s['speedup_stale']} stale timing(s) left out" if s["speedup_stale"] else ""
    print(
        f"\n{s['method']} on {s['benchmark']} ({s['model']}, B={s['budget']}, memory={s['memory']}): "
        f"{s['prompts']} prompts, "
        f"{s['new_tokens']} tokens\n"
        f"  tau {s['tau']:.3f} (tokens / forwards incl. prefill; mean over prompts {s['mean_tau']:.3f})\n"
        f"  {s['tokens_per_s']:.2f} tokens/s, {speed}{stale}\n"
        f"  lossless {s['lossless']}/{s['prompts']}\n"
        f"  rows: {path}",
        flush=True,
    )
