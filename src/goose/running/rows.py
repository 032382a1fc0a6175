"""A measured turn's result row, built as the schema of goose.storage.row_schema declares it: the measurements,
identity and conditions (`COLUMNS`), the settings that are row columns, the drafter's counters, the model, method
and benchmark sections flattened, the schema version."""

from __future__ import annotations

import math
import time

from goose.drafting.contract import memory_default
from goose.running.loop import BONUS
from goose.storage.equality import EXACT, classify
from goose.storage.metrics import copy_split, speedup_stale
from goose.storage.row_schema import COLUMNS, ROW_SCHEMA, SECTIONS, flat


def _round(v, digits: int):
    return round(v, digits) if isinstance(v, float) and math.isfinite(v) else v


def make_row(spec, ident, turn, ids: list[int], m, env: dict, room: int, cost_fp: str = "") -> dict:
    """One turn's row (see the module docstring for its parts): `turn` is a goose.running.inputs.Turn, `m` the
    running.timing.Measured of its generation, `room` its new-token limit, `cost_fp` what budget=auto pruned against."""
    gen, ar, ref = m.gen, m.ar_timing, m.reference or {}
    verdict = classify(gen, ref, spec.torch_dtype)
    div = None if verdict.kind == EXACT else verdict.index
    cond = ident.conditions
    measured = {
        "model": ident.model.label,
        "benchmark": spec.benchmark.name,
        "method": spec.method.name,
        "memory_default": memory_default(spec.method.config),
        "prompt_id": turn.id,
        "category": turn.category,
        "prompt_fingerprint": turn.fingerprint,
        "prompt_tokens": len(ids),
        "new_tokens": len(gen.tokens),
        "steps": gen.steps,
        "tau": _round(gen.tau, 6),
        "wall_s": _round(gen.wall_s, 6),
        "wall_s_std": gen.wall_s_std,
        "tokens_per_s": _round(gen.tokens_per_s, 4),
        "ttft_s": _round(gen.ttft_s, 6),
        "tpot_s": _round(gen.tpot_s, 6) if gen.tpot_s is not None else "",
        "lossless": div is None,
        "first_divergence": -1 if div is None else div,
        **verdict.columns(),
        "capped_at": room if room < spec.max_new_tokens else "",
        "ended": gen.ended,
        "loop_free_tokens": gen.loop_free,
        "speedup": _round(ar["wall_s"] / gen.wall_s, 4) if ar and gen.wall_s > 0 else "",
        "speedup_source": m.source,
        "speedup_stale": "",
        "ar_wall_s": _round(ar["wall_s"], 6) if ar else "",
        "ar_tokens_per_s": _round(ar["tokens_per_s"], 4) if ar else "",
        **{k: _round(getattr(gen, k, ""), 6) for k in ("admitted_s", "first_token_s", "done_s")},
        **{k: m.batch.get(k, "") if m.batch else "" for k in ("pass_wall_s", "pass_tokens", "ar_pass_wall_s")},
        **dict(zip(("copied_answer", "copied_prompt"), copy_split(ids, gen.tokens, [o != BONUS for o in gen.origins]))),
        "cost_fingerprint": cost_fp,
        "mean_width": round(sum(gen.widths) / len(gen.widths), 3) if gen.widths else 1.0,
        "max_width": max(gen.widths, default=1),
        "config_hash": ident.config_hash,
        "model_config": spec.model.name,
        "model_fingerprint": ident.model.fingerprint,
        "model_source": ident.model.description,
        "prompts_fingerprint": ident.prompts_fingerprint,
        "data_fingerprint": ident.data_fingerprint,
        "code_fingerprint": ident.code_fingerprint,
        "reference_key": m.key,
        "timed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **{k: cond[k] for k in ("host", "threads", "backend", "device_name", "sweep_id")},
        **{f"ar_{k}": (ar or {}).get(k, "") for k in ("at", "host", "threads", "torch", "backend", "device_name",
                                                      "sweep_id")},
        **{k: env[k] for k in ("device", "dtype", "torch", "transformers", "python")},
    }
    stale = speedup_stale(measured)
    measured["speedup_stale"] = "" if stale is None else stale
    row = {c.name: measured[c.name] for c in COLUMNS}
    row.update(spec.settings("row"))
    row.update({k: v for k, v in gen.stats.items() if k not in row})
    for section in SECTIONS:
        row.update(flat(section, spec.plain_section(section)))
    row["row_schema"] = ROW_SCHEMA
    return row
