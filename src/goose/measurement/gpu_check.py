"""GPU check: the first command to run on a machine with one CUDA device (never in CI; a few minutes).

For SmolLM2 by default (the one model such a machine can load without network; `--model hf --model-path DIR`
for a local folder), in float16 and bfloat16: every method in conf/method/ and GOOSE under budget=auto (REST's
offline datastore is built if missing) on the same prompts as our AR in the same dtype. Per method and dtype:
its generations classified against AR's as goose.storage.equality does (exact / numerics / diverged, docs/trust.md),
tokens/s, x AR and tau; per dtype the measured verification cost curve (ms per verification at each width);
the machine. One table, the same as JSON (`--json`, null never NaN), and a last line, the verdict: exit 1 when
any method diverged (report it: see docs/trust.md), 0 otherwise.

    python -m goose.measurement.gpu_check [--n-prompts 3] [--max-new-tokens 128] [--json gpu-check.json]
    python -m goose.measurement.gpu_check --device cpu --n-prompts 1 --max-new-tokens 16   # smoke test of the script
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import torch

from goose.benchmarks.prompts import load_prompts
from goose.drafting.budget import cost_curve
from goose.engine.backends import device_name
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.models.loading import identify_model, load_model, model_config, stop_ids
from goose.running.loop import generate
from goose.running.registry import arm, build_drafters, method_names
from goose.running.timing import reference_entry
from goose.storage.equality import DIVERGED, EXACT, NUMERICS, classify

REPORT = "docs/trust.md, Equality: open an issue with gpu-check.json"
CLASSES = (EXACT, NUMERICS, DIVERGED)
COLUMNS = ("method", "dtype", *CLASSES, "tokens/s", "x AR", "tau")


def method_specs() -> list[str]:
    """Every method in conf/method/ at budget 60, and GOOSE under budget=auto."""
    return [*(f"{m}@60" for m in method_names()), "goose@auto"]  # @60: no budget given would be auto


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.measurement.gpu_check", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-prompts", type=int, default=3, help="per benchmark")
    ap.add_argument("--benchmarks", nargs="+", default=["humaneval", "gsm8k", "mt_bench"])
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--methods", nargs="+", default=None,
                    help="NAME[@BUDGET][:MEMORY] specs (default: every method, and goose@auto); ar always runs")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--model-path", default=None, help="for --model hf/gguf: the local folder or GGUF file")
    ap.add_argument("--device", default="cuda", help="cpu only to smoke-test this script (float32 and bfloat16)")
    ap.add_argument("--json", default="gpu-check.json", help="where the same table goes as JSON")
    args = ap.parse_args(argv)
    if args.model in ("hf", "gguf") and not args.model_path:
        ap.error(f"--model {args.model} needs --model-path")
    return args


def num(x: float | None, digits: int = 3) -> float | None:
    """A finite number rounded, else None (JSON null, never NaN)."""
    return round(x, digits) if x is not None and math.isfinite(x) else None


def cell(x) -> str:
    return "-" if x is None else f"{x:.2f}" if isinstance(x, float) else str(x)


def check_dtype(args, cfg, dtype: str, specs: list[str], extra: list[str]) -> tuple[list[dict], dict]:
    """Rows for every method in one dtype, and the cost curve there."""
    model, tok, device, dt = load_model(cfg, args.device, dtype)
    stops, engine = stop_ids(tok, model), Engine(model)
    prompts = [tok(p.text).input_ids for b in args.benchmarks for p in load_prompts(b)[: args.n_prompts]]
    curve = cost_curve(engine, identify_model(cfg), device, dt)
    drafters = arm(build_drafters(specs, args.model, (), extra, skip_missing=args.methods is None),
                   lambda c=curve: c, tok, cfg.name)
    refs, ar_tps, rows = None, None, []
    for name, d in drafters.items():  # "ar" first: its generations are the references
        saved = d.save_memory()
        generate(engine, prompts[0], d, min(16, args.max_new_tokens), stops)  # warm-up
        if saved is not None:  # memory=run: the timed prompts never see the warm-up's answer
            d.restore_memory(saved)
        gens = [generate(engine, ids, d, args.max_new_tokens, stops) for ids in prompts]  # syncs around its timing
        if refs is None:
            refs = [reference_entry(g) for g in gens]
        counts = dict.fromkeys(CLASSES, 0)
        for g, ref in zip(gens, refs):
            counts[classify(g, ref, dt).kind] += 1
        toks, secs, steps = (sum(len(g.tokens) for g in gens), sum(g.wall_s for g in gens),
                             sum(g.steps for g in gens))
        tps = toks / secs if secs > 0 else None
        ar_tps = ar_tps if ar_tps is not None else tps
        rows.append({"method": name, "dtype": dtype, **counts, "tokens_per_s": num(tps, 1),
                     "x_ar": num(tps / ar_tps if tps and ar_tps else None),
                     "tau": num(toks / steps if steps else None)})
        print(f"[gpu-check] {dtype} {name}: {counts}", file=sys.stderr, flush=True)
    ms = {"context": curve.contexts[0], "widths": list(curve.widths),
          "ms": [num(s * 1000, 4) for s in curve.seconds]}
    del model, engine, drafters
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows, ms


def verdict(rows: list[dict], dtypes: list[str]) -> tuple[str, bool]:
    bad = {}
    for r in rows:
        if r[DIVERGED]:
            bad.setdefault(r["dtype"], []).append(r["method"])
    if not bad:
        return f"VERDICT: every method exact or numerics in {' and '.join(dtypes)}", False
    where = "; ".join(f"{', '.join(ms)} diverged in {dt}" for dt, ms in bad.items())
    return f"VERDICT: {where}: report it ({REPORT})", True


def table(rows: list[dict]) -> list[str]:
    keys = ("method", "dtype", *CLASSES, "tokens_per_s", "x_ar", "tau")
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    return out + ["| " + " | ".join(cell(r[k]) for k in keys) + " |" for r in rows]


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device: this check is for a GPU machine (`--device cpu` smoke-tests the script; "
              "CPU losslessness is in `make test`).", file=sys.stderr)
        return 2
    dtypes = ["float16", "bfloat16"] if args.device == "cuda" else ["float32", "bfloat16"]
    specs = list(dict.fromkeys(["ar", *(args.methods or method_specs())]))
    extra = [f"model.path={args.model_path}"] if args.model_path else []
    try:
        cfg = model_config(args.model, args.model_path)
        build_drafters(specs, args.model, (), extra, skip_missing=args.methods is None)  # checked before loading
        rows, curves = [], {}
        for dtype in dtypes:
            r, curves[dtype] = check_dtype(args, cfg, dtype, specs, extra)
            rows += r
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    dev = torch.device(args.device)
    machine = {"device": device_name(dev), "torch": torch.__version__, "cuda": torch.version.cuda,
               "dtypes": dtypes, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    line, failed = verdict(rows, dtypes)
    n = sum(rows[0][k] for k in CLASSES)  # ar's row: every prompt classified once
    print(f"{machine['device']} | torch {machine['torch']} | CUDA {machine['cuda'] or '-'} | "
          f"{', '.join(dtypes)} | {machine['date']} | {cfg.name}: {n} prompts x {args.max_new_tokens} tokens")
    for dt, c in curves.items():
        print(f"cost curve {dt} (ms per verification at context {c['context']}): "
              + ", ".join(f"T={w}: {cell(m)}" for w, m in zip(c["widths"], c["ms"])))
    print("\n".join(table(rows)))
    print(line)
    out = {"machine": machine, "model": cfg.name, "model_path": args.model_path, "prompts": n,
           "max_new_tokens": args.max_new_tokens, "columns": list(COLUMNS), "rows": rows,
           "cost_curves": curves, "verdict": line, "diverged": failed}
    Path(args.json).write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
