"""What goose-bench times, once `bench` has loaded and checked it (`Setup`): a warm-up, then `--repeats` passes over
the prompts with every method on each prompt in a rotating order (`timed_passes`, machine noise hits them alike), the
results table those passes give (`print_table`: tokens/s, tau, latency, ratios within each repeat, losslessness), and
the separate profiled pass with its per-step overhead breakdown (`profiled_pass`), so timed runs carry no extra syncs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm

from goose.engine.single import Engine
from goose.measurement import bench_report
from goose.running.loop import generate


@dataclass
class Setup:
    """What one bench run measures, loaded and checked before anything is timed."""

    args: argparse.Namespace
    tok: object
    device: torch.device
    dtype: torch.dtype
    prompts: list[tuple[str, list[int]]]  # (benchmark, token ids)
    source: str
    backends: list[str]
    models: dict[str, object]  # backend -> model ("eager" always: HF greedy on it is the outside reference)
    engines: dict[str, Engine]
    ours: dict[str, dict]  # backend -> {method spec: armed drafter}
    info: dict
    costs: dict


@dataclass
class Timings:
    """The timed passes: tokens and seconds per repeat, method and benchmark; latencies; steps and losslessness
    from the first repeat."""

    tokens: list[dict[str, dict[str, int]]]
    seconds: list[dict[str, dict[str, float]]]
    ttft: dict[str, list[float]]
    tpot: dict[str, list[float]]
    steps: dict[str, int]
    lossless: dict[str, int]
    same_as_eager: dict[str, int]
    repeat_s: list[float]


def label(name: str, backend: str) -> str:
    """A row's name: the method, and its backend when that is not eager."""
    return name if backend == "eager" else f"{name} [{backend}]"


def timed_passes(setup: Setup, runners: dict, backend_of_row: dict[str, str], fresh_memory) -> Timings:
    """A warm-up, then `--repeats` passes over the prompts, every method on each prompt in a rotating order."""
    args, prompts, names = setup.args, setup.prompts, list(runners)
    N, sampling = args.max_new_tokens, args.sampling
    for fn in runners.values():  # warm-up
        fn(prompts[0][1][:64])
    print(f"{args.model} {str(setup.dtype).replace('torch.', '')} on {setup.device} ({torch.get_num_threads()} "
          f"threads): {len(prompts)} prompts ({setup.source}) x {N} new tokens, {args.repeats} repeat(s), "
          + (f"sampling {sampling.label()} (hf-* run greedy on the same perturbed logits)" if not sampling.greedy
             else "greedy"), flush=True)
    benches = list(dict.fromkeys(b for b, _ in prompts))
    t = Timings(tokens=[{m: dict.fromkeys(benches, 0) for m in names} for _ in range(args.repeats)],
                seconds=[{m: dict.fromkeys(benches, 0.0) for m in names} for _ in range(args.repeats)],
                ttft={m: [] for m in names}, tpot={m: [] for m in names}, steps=dict.fromkeys(names, 0),
                lossless=dict.fromkeys(names, 0), same_as_eager=dict.fromkeys(setup.backends, 0), repeat_s=[])
    for rep in range(args.repeats):
        fresh_memory()
        t0 = time.perf_counter()
        bar = tqdm(prompts, desc=f"repeat {rep + 1}/{args.repeats}, {len(names)} methods", unit="prompt",
                   file=sys.stderr, leave=False)
        for i, (bench, ids) in enumerate(bar):
            k = (i + rep) % len(names)
            outs = {}
            for m in names[k:] + names[:k]:
                out, s, n, (first_ms, per_token_ms) = runners[m](ids)
                t.tokens[rep][m][bench] += len(out)
                t.seconds[rep][m][bench] += s
                t.ttft[m] += [first_ms] if first_ms is not None else []
                t.tpot[m] += [per_token_ms] if per_token_ms is not None else []
                outs[m] = out
                if rep == 0:
                    t.steps[m] += n
            if rep == 0:
                for m in names:
                    t.lossless[m] += int(outs[m] == outs[label("hf-greedy", backend_of_row[m])])
                for b in setup.backends:
                    if b != "eager":
                        t.same_as_eager[b] += int(outs[label("ar", b)] == outs["ar"]) if "ar" in outs else 0
        t.repeat_s.append(time.perf_counter() - t0)
        print(f"  repeat {rep + 1} done in {t.repeat_s[-1]:.0f} s", flush=True)
    return t


def print_table(setup: Setup, names: list[str], backend_of_row: dict[str, str], t: Timings) -> list[dict]:
    """The results table (tokens/s median and spread, tau, latency, ratios within each repeat, losslessness),
    printed; its rows, for --json."""
    repeats, prompts = setup.args.repeats, setup.prompts
    benches = list(dict.fromkeys(b for b, _ in prompts))

    def tps(rep, m, bench=None):
        bs = benches if bench is None else [bench]
        return sum(t.tokens[rep][m][b] for b in bs) / sum(t.seconds[rep][m][b] for b in bs)

    def ms(x):
        return "-" if x is None else f"{x:.1f}"

    table = []
    if not repeats:
        return table
    print("\n| method | tokens/s (median, min-max) | tau | TTFT / TPOT p50 (ms) | x our AR | x HF greedy | "
          "x HF prompt lookup | " + " | ".join(f"x AR {b}" for b in benches) + " | lossless |")
    print("|---|---|---|---|---|---|---|" + "---|" * len(benches) + "---|")
    for m in names:
        per_repeat = [tps(r, m) for r in range(repeats)]
        med, lo, hi = statistics.median(per_repeat), min(per_repeat), max(per_repeat)
        own = backend_of_row[m]
        bases = {"ar": label("ar", own), "hf-greedy": "hf-greedy", "hf-prompt-lookup": label("hf-prompt-lookup", own)}
        ratio = {base: statistics.median([tps(r, m) / tps(r, row) for r in range(repeats)])
                 for base, row in bases.items() if row in names}
        per_b = [statistics.median([tps(r, m, b) / tps(r, bases["ar"], b) for r in range(repeats)])
                 if bases["ar"] in names else None for b in benches]
        total_tok = sum(t.tokens[0][m].values())
        tau = f"{total_tok / t.steps[m]:.2f}" if t.steps[m] else "-"
        ll = "ref" if m == label("hf-greedy", own) else f"{t.lossless[m]}/{len(prompts)}"
        lat = {"ttft_p50_ms": bench_report.percentile(t.ttft[m], 0.5),
               "ttft_p95_ms": bench_report.percentile(t.ttft[m], 0.95),
               "tpot_p50_ms": bench_report.percentile(t.tpot[m], 0.5),
               "tpot_p95_ms": bench_report.percentile(t.tpot[m], 0.95)}
        cells = [f"{med:.2f} ({lo:.2f}-{hi:.2f})", tau, f"{ms(lat['ttft_p50_ms'])} / {ms(lat['tpot_p50_ms'])}"]
        cells += [f"{ratio[b]:.2f}" if b in ratio else "-" for b in ("ar", "hf-greedy", "hf-prompt-lookup")]
        print(f"| {m} | " + " | ".join(cells + ["-" if x is None else f"{x:.2f}" for x in per_b] + [ll]) + " |")
        table.append({"method": m, "backend": own, "tokens_per_s": med, "tokens_per_s_min": lo,
                      "tokens_per_s_max": hi, "tokens_per_s_per_repeat": per_repeat,
                      "tau": total_tok / t.steps[m] if t.steps[m] else None, **lat,
                      **{f"x_{b}": ratio.get(b) for b in ("ar", "hf-greedy", "hf-prompt-lookup")},
                      **{f"x_ar_{b}": x for b, x in zip(benches, per_b)}, "lossless": ll,
                      "lossless_prompts": None if ll == "ref" else t.lossless[m]})
    for b in setup.backends:
        if b != "eager" and "ar" in names:
            print(f"\nAR on {b} gives eager AR's tokens on {t.same_as_eager[b]}/{len(prompts)} prompts (a backend "
                  "sums in another order; every method is compared with AR on its own backend)")
    return table


def profiled_pass(setup: Setup, drafters: dict, backend_of_row: dict[str, str], stops: frozenset[int],
                  fresh_memory) -> dict:
    """Per-step overhead breakdown, from a separate profiled pass (syncs on) over six prompts across the
    benchmarks: forward, engine overhead, drafter, printed and returned per method."""
    N, sampling = setup.args.max_new_tokens, setup.args.sampling
    print("\nper-step time, profiled pass (ms): forward | engine overhead (mask, top-k, walk, KV) | drafter | "
          "overhead share")
    width = max(map(len, drafters))
    profiled = {}
    sample = setup.prompts[:: max(1, len(setup.prompts) // 6)]
    for m, d in drafters.items():
        engine = setup.engines[backend_of_row[m]]
        engine.profile = True
        fresh_memory()
        fw = ov = dr = 0.0
        n = 0
        for _, ids in tqdm(sample, desc=f"profiled pass, {m}", unit="prompt", file=sys.stderr, leave=False):
            g = generate(engine, ids, d, N, stops, sampling)
            fw, ov, dr, n = fw + g.forward_s, ov + g.overhead_s, dr + g.draft_s, n + g.steps - 1
        engine.profile = False
        profiled[m] = {"backend": backend_of_row[m], "prompts": len(sample), "steps": n, "forward_ms": None,
                       "engine_overhead_ms": None, "drafter_ms": None, "overhead_share": None}
        if n:
            share = (ov + dr) / (fw + ov + dr)
            per = [x / n * 1e3 for x in (fw, ov, dr)]
            profiled[m].update(forward_ms=per[0], engine_overhead_ms=per[1], drafter_ms=per[2], overhead_share=share)
            print(f"  {m:{width}s} {per[0]:8.2f} | {per[1]:6.2f} | {per[2]:6.2f} | {share * 100:5.1f}%")
    return profiled
