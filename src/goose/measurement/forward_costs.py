"""Where a verification forward's time goes on this machine, per backend and number of nodes T.

For each backend (eager, prepacked) and T, one verification after a `--context` token prefix is profiled
(torch.profiler, `--repeats` forwards after two warm-ups) and its operator time is split into: the
linear layers of the decoder, the lm_head (49k rows for SmolLM2, computed for every node: the walk needs
every node's argmax and the adjacency drafters its top-k), attention, the KV cache's own copies, the
engine's top-k, and everything else (norms, rotary, activations, residuals, reshapes). The wall time of
the same forward unprofiled is printed beside it, then the cost curve at each thread count asked for.
"copies" are concatenations, copies and gathers wherever they run: the KV cache's writes, eager's
`repeat_kv` (attention's key/value heads copied per query head), rotary's `rotate_half`, the embedding.

    python -m goose.measurement.forward_costs [--widths 1 4 8 16 32] [--context 256] [--threads 1 2]

Operator times come from the profiler, which adds its own overhead: compare rows of one run, not runs.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections import Counter

import torch

from goose.engine.backends import apply_backend, default_backend
from goose.engine.draft import Draft
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.models.loading import identify_model, load_model, model_config
from goose.paths import REPO_ROOT

ROOT = REPO_ROOT

PARTS = ("linear", "lm_head", "attention", "copies", "top-k", "other")


def part_of(name: str, shapes, vocab: int) -> str:
    if "linear" in name or name in ("aten::addmm", "aten::mm"):
        return "lm_head" if any(vocab in s for s in shapes if isinstance(s, list)) else "linear"
    if "attention" in name:
        return "attention"
    if name in ("aten::cat", "aten::copy_", "aten::index_select"):
        return "copies"
    if name in ("aten::topk", "aten::amax", "aten::gather", "aten::argmax"):
        return "top-k"
    return "other"


def setup(engine: Engine, T: int, context: int, vocab: int):
    g = torch.Generator().manual_seed(T)
    engine.prefill(torch.randint(0, vocab, (context,), generator=g).tolist())
    draft = Draft.chain(torch.randint(0, vocab, (T,), generator=g).tolist())

    def once():
        engine.verify(draft, topk=10 if T > 1 else 0)
        engine.cache.crop(-(engine.cache_len - context))
    return once


def breakdown(engine: Engine, T: int, context: int, repeats: int, vocab: int) -> tuple[Counter, float]:
    from torch.profiler import ProfilerActivity, profile

    once = setup(engine, T, context, vocab)
    once(), once()
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        once()
        walls.append(time.perf_counter() - t0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(repeats):
            once()
    parts: Counter = Counter()
    for ev in prof.key_averages(group_by_input_shape=True):
        parts[part_of(ev.key, ev.input_shapes, vocab)] += ev.self_cpu_time_total / repeats / 1e3
    return parts, statistics.median(walls) * 1e3


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.measurement.forward_costs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--model-path", default=None)
    ap.add_argument("--widths", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="cost curves at these thread counts (default: 1 and this machine's default)")
    args = ap.parse_args(argv)
    if min(args.widths) < 1 or args.context < 1 or args.repeats < 1 or min(args.threads or [1]) < 1:
        ap.error("--widths, --context, --repeats and --threads must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    try:
        cfg = model_config(args.model, args.model_path)
        model, _, device, dtype = load_model(cfg, "cpu", "float32")
        label = identify_model(cfg).label
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    vocab = model.config.get_text_config(decoder=True).vocab_size
    backends = list(dict.fromkeys(["eager", default_backend(device, dtype)]))
    engines = {b: Engine(model if b == "eager" else apply_backend(copy.deepcopy(model), b)) for b in backends}
    default_threads = torch.get_num_threads()
    print(f"{label} fp32 on cpu, {default_threads} threads, context {args.context}: per forward, ms "
          f"(operator self time from the profiler; wall = the same forward unprofiled, median of {args.repeats})\n")
    print("| backend | T | wall | " + " | ".join(PARTS) + " |\n|---|---|---|" + "---|" * len(PARTS))
    for b, engine in engines.items():
        for T in args.widths:
            parts, wall = breakdown(engine, T, args.context, args.repeats, vocab)
            print(f"| {b} | {T} | {wall:.1f} | " + " | ".join(f"{parts[p]:.1f}" for p in PARTS) + " |", flush=True)
    threads = args.threads or sorted({1, default_threads})
    widths = sorted(set(args.widths))
    print(f"\ncost curve by threads (ms, median of {args.repeats}, widths taking turns)\n")
    print("| backend | threads | " + " | ".join(f"T={T}" for T in widths) + " |\n|---|---|" + "---|" * len(widths))
    for b, engine in engines.items():
        for n in threads:
            torch.set_num_threads(n)
            secs = engine.measure_cost(widths, args.context, args.repeats)
            print(f"| {b} | {n} | " + " | ".join(f"{s * 1e3:.1f}" for s in secs) + " |", flush=True)
    torch.set_num_threads(default_threads)


if __name__ == "__main__":
    main()
