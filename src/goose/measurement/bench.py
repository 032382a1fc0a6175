"""Speed benchmark: every method on the same prompts, in one run, against Hugging Face.

Per prompt, all methods run back to back in a rotating order (machine noise hits them
alike); the whole pass repeats `--repeats` times. Prints pooled tokens/s per method (median
over repeats, min-max spread), ratios computed within each repeat and then the median,
tau, losslessness against HF greedy, and the per-step overhead breakdown (a separate,
profiled pass, so timed runs carry no extra syncs).

Methods that keep state across prompts (memory=run: TR's matrix, SuffixDecoding's global tree) keep
it across the prompts of a pass, in order, and every pass starts from the state the first one did:
a pass never drafts from the answers of an earlier pass.

    python -m goose.measurement.bench [--n-prompts 10] [--max-new-tokens 128] [--repeats 3]
    python -m goose.measurement.bench --methods goose@auto tr:prompt suffix@60:run
    python -m goose.measurement.bench --temperature 0.7 --top-p 0.95 --seed 0
    python -m goose.measurement.bench --backends eager prepacked     (the default on a CPU with fp32 weights)

Backends (goose.engine.backends): each runs on a model object of its own, shared by our methods and Hugging
Face's loops on that backend, so "x our AR" and "x HF prompt lookup" compare within one backend; "x HF
greedy" always divides by HF greedy on the eager model, the outside reference. Rows of a backend other
than eager are labelled `[backend]`. The verification cost curve of every backend is measured back to
back (context 256, median of 5) and printed first.

With --temperature > 0 every method samples (goose.engine.sampling) and must return AR sampling's tokens;
hf-greedy and hf-prompt-lookup then run Hugging Face's greedy loops on the same perturbed logits
(our noise added by a logits processor), so they sample the same tokens and stay the outside reference.

Latency beside throughput: TTFT (time to first token) and TPOT (time per output token = (last token's time - first
token's time) / (new tokens - 1), prefill excluded; none for a one-token answer), the median over every request of
every repeat (goose.measurement.bench_report). Hugging Face's loops report no first token's time: no latency there.

--json OUT: the run as one file, written atomically when it ends (an earlier file at OUT is removed when the run
starts, so a failed run leaves none): what it ran on (model, its path and fingerprint, dtype, device, threads,
backends, torch version, date, the command line), the cost table, every row, the profiled pass; `null` where a
number is undefined, never NaN. With --repeats 0 it holds the cost table and the profiled pass, and no rows.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from dataclasses import dataclass

import torch
from tqdm import tqdm

from goose.benchmarks.builtin import prompts_file
from goose.benchmarks.prompts import load_prompts
from goose.drafting.budget import BUSY_SPREAD, cost_curve, round_spread
from goose.engine.backends import apply_backend, check_backend, default_backend
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.measurement import bench_report
from goose.measurement import concurrency_sweep as concurrency
from goose.measurement.speed_flags import DEFAULT_METHODS, DEFAULT_N_PROMPTS, HF_METHODS, parse_flags, remove_stale
from goose.models.loading import identify_model, load_model, model_config, stop_ids
from goose.models.reference import hf_greedy
from goose.paths import REPO_ROOT
from goose.running.inputs import check_length, token_room
from goose.running.loop import generate
from goose.running.registry import arm, build_drafters

ROOT = REPO_ROOT


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked before any model loads (the docs' commands are checked with it too): the flags
    and their checks are goose.measurement.speed_flags; --help prints this module's docstring above them."""
    return parse_flags(argv, description=__doc__)


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


def main(argv: list[str] | None = None) -> None:
    """goose-bench: the run the command line asks for (`argv`, else sys.argv), printed (and written with --json)."""
    given = sys.argv[1:] if argv is None else list(argv)
    remove_stale(given)  # before parse: a refused command line leaves no earlier --json or --figure file either
    args = parse(given)
    try:
        setup = load(args, given)
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if setup is None:  # --concurrency: the concurrency sweep ran instead
        return
    model = setup.models["eager"]
    stops = stop_ids(setup.tok, model)
    runners, backend_of_row = make_runners(setup, stops)
    names = list(runners)
    drafters = {label(k, b): d for b in setup.backends for k, d in setup.ours[b].items()}
    initial = {m: d.save_memory() for m, d in drafters.items()}  # empty; restored before every pass

    def fresh_memory():
        for m, d in drafters.items():
            if initial[m] is not None:
                d.restore_memory(initial[m])

    timings = timed_passes(setup, runners, backend_of_row, fresh_memory)
    table = print_table(setup, names, backend_of_row, timings)
    profiled = profiled_pass(setup, drafters, backend_of_row, stops, fresh_memory)
    if args.json:
        bench_report.write(args.json, {**setup.info, "methods": names, "cost": setup.costs, "rows": table,
                                       "repeat_s": timings.repeat_s,
                                       "ar_same_as_eager": {b: timings.same_as_eager[b] for b in setup.backends
                                                            if b != "eager"},
                                       "profiled": profiled})
        print(f"wrote {args.json}")


def load(args: argparse.Namespace, given: list[str]) -> Setup | None:
    """Drafters checked before the model loads, the model on each backend, the prompts checked against its context,
    the cost curves, every method armed; None after running the concurrency sweep (--concurrency) instead."""
    specs = list(dict.fromkeys(["ar", *(m for m in args.methods or DEFAULT_METHODS if m not in HF_METHODS)]))
    if args.json:  # before anything is measured: OUT can be written, and no earlier file stands in for this run
        bench_report.claim({"--json": args.json, "--figure": args.figure})
    sys.path.extend(args.search_path)  # a user's drafter file may sit beside its YAML
    extra = [f"model.path={args.model_path}"] if args.model_path else []
    build_drafters(specs, args.model, args.search_path, extra, skip_missing=args.methods is None)  # checked early
    cfg = model_config(args.model, args.model_path)
    model, tok, device, dtype = load_model(cfg, args.device, args.dtype)
    identity = identify_model(cfg)
    backends = args.backends or list(dict.fromkeys(["eager", default_backend(device, dtype)]))
    for b in backends:
        check_backend(b, device, dtype)
    if args.prompts:
        named = [("prompts", p.id, tok(p.text).input_ids) for p in prompts_file(args.prompts)[: args.n_prompts]]
        source = args.prompts
    else:
        n = args.n_prompts or DEFAULT_N_PROMPTS
        named = [(b, p.id, tok(p.text).input_ids) for b in args.benchmarks for p in load_prompts(b)[:n]]
        source = ", ".join(args.benchmarks)
    check_lengths(named, Engine(model).max_positions, args.max_new_tokens)
    prompts = [(b, ids) for b, _, ids in named]
    if args.concurrency:
        backend = (args.backends or [default_backend(device, dtype)])[0]
        info = bench_report.ran_on(args, identity, device, dtype, [backend], len(prompts), source, given)
        run_concurrency(args, cfg, model, tok, device, dtype, prompts, specs, extra, args.sampling, identity,
                        backend, info)
        return None
    info = bench_report.ran_on(args, identity, device, dtype, backends, len(prompts), source, given)
    models = {b: model if b == "eager" else apply_backend(copy.deepcopy(model), b) for b in backends}
    if "eager" not in models:  # HF greedy on the eager model stays the outside reference
        models["eager"] = model
    engines = {b: Engine(m) for b, m in models.items()}
    costs = print_cost_curves(engines)
    ours = {b: arm(build_drafters(specs, args.model, args.search_path, extra, skip_missing=args.methods is None),
                   lambda e=engines[b]: cost_curve(e, identity, device, dtype), tok, cfg.name) for b in backends}
    return Setup(args, tok, device, dtype, prompts, source, backends, models, engines, ours, info, costs)


def label(name: str, backend: str) -> str:
    """A row's name: the method, and its backend when that is not eager."""
    return name if backend == "eager" else f"{name} [{backend}]"


def make_runners(setup: Setup, stops: frozenset[int]) -> tuple[dict, dict[str, str]]:
    """Every row's runner (ids -> tokens, seconds, steps, latency): Hugging Face's greedy (and prompt lookup) loops
    and our methods on each backend; and each row's backend."""
    args, device, N, sampling = setup.args, setup.device, setup.args.max_new_tokens, setup.args.sampling

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def hf(hf_model, extra):
        def run(ids):
            sync()
            t = time.perf_counter()
            out = hf_greedy(hf_model, ids, N, stops, sampling, **extra)
            sync()
            return out, time.perf_counter() - t, 0, (None, None)  # no first token's time: no latency
        return run

    def mine(engine, drafter):
        def run(ids):
            g = generate(engine, ids, drafter, N, stops, sampling)
            return g.tokens, g.wall_s, g.steps, bench_report.latency_ms(g)
        return run

    runners, backend_of_row = {}, {}
    for b in dict.fromkeys(["eager", *setup.backends]):
        rows = {HF_METHODS[0]: hf(setup.models[b], {})}
        if b in setup.backends and (not args.methods or HF_METHODS[1] in args.methods):
            rows[HF_METHODS[1]] = hf(setup.models[b], {"prompt_lookup_num_tokens": 10})
        rows.update({k: mine(setup.engines[b], d) for k, d in setup.ours.get(b, {}).items()})
        for k, fn in rows.items():
            runners[label(k, b)] = fn
            backend_of_row[label(k, b)] = b
    return runners, backend_of_row


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


def check_lengths(named: list[tuple[str, str, list[int]]], limit: int | None, max_new_tokens: int) -> None:
    """Before any work: every prompt ((benchmark, id, ids)) and its --max-new-tokens fit in the model's context, in
    run.py's words (goose.running.inputs), naming the prompt's id; every method decodes the same number of tokens."""
    for _, pid, ids in named:
        token_room(pid, len(ids), limit, max_new_tokens)  # not one new token fits
        check_length(f"prompt '{pid}'", len(ids), limit, max_new_tokens)


def run_concurrency(args, cfg, model, tok, device, dtype, prompts, specs, extra, sampling, identity, backend,
                    info) -> None:
    """--concurrency: every method at every concurrency against batched AR (goose.measurement.concurrency_sweep), on one
    backend (the first of --backends, else auto)."""
    check_backend(backend, device, dtype)
    model = apply_backend(model, backend)
    built = build_drafters([s for s in specs if s != "ar"], args.model, args.search_path, extra,
                           skip_missing=args.methods is None)
    engine = Engine(model)
    print(f"{args.model} {str(dtype).replace('torch.', '')} on {device} ({torch.get_num_threads()} threads), "
          f"engine.backend={backend}: {len(prompts)} prompts ({info['prompt_source']}) x {args.max_new_tokens} new "
          f"tokens, concurrency {' '.join(map(str, args.concurrency))}, {args.repeats} repeat(s)", flush=True)
    fp32 = load_model(cfg, args.device, "float32")[0] if dtype != torch.float32 else None
    concurrency.run(args, model, tok, stop_ids(tok, model), prompts, built,
                    lambda: cost_curve(engine, identity, device, dtype), identity, device, dtype, sampling, fp32,
                    info=info)


COST_WIDTHS = (1, 2, 4, 8, 16, 32, 64)


def print_cost_curves(engines: dict[str, Engine], context_len: int = 256, repeats: int = 5) -> dict:
    """Each backend's verification cost (median of `repeats` forwards over T nodes after `context_len`
    tokens), measured back to back, in ms and relative to eager's one-token forward; returns what it printed."""
    secs, spreads = {}, {}
    print(f"measuring the verification cost of {', '.join(engines)} ...", file=sys.stderr, flush=True)
    for b, e in engines.items():
        rounds = e.measure_rounds(list(COST_WIDTHS), context_len=context_len, repeats=repeats)
        secs[b] = [statistics.median(t) for t in rounds]
        spreads[b] = spread = round_spread(rounds)
        if spread > BUSY_SPREAD:
            print(f"[bench] the machine was busy while {b}'s cost was measured (rounds {spread:.2f}x "
                  "apart): this table may be off; the timed passes below are compared within each pass", flush=True)
    unit = secs["eager"][0]
    print(f"verification cost, context {context_len}, median of {repeats} (ms; in brackets: x eager T=1"
          + (", x own T=1)" if len(secs) > 1 else ")"))
    print("| T | " + " | ".join(secs) + " |\n|---|" + "---|" * len(secs))
    for i, T in enumerate(COST_WIDTHS):
        cells = [f"{s[i] * 1e3:.1f} ({s[i] / unit:.2f}" + (f", {s[i] / s[0]:.2f})" if len(secs) > 1 else ")")
                 for s in secs.values()]
        print(f"| {T} | " + " | ".join(cells) + " |")
    print(flush=True)
    return {"context": context_len, "repeats": repeats, "widths": list(COST_WIDTHS),
            "ms": {b: [x * 1e3 for x in s] for b, s in secs.items()},
            "x_eager_t1": {b: [x / unit for x in s] for b, s in secs.items()},
            "round_spread": spreads, "busy": {b: x > BUSY_SPREAD for b, x in spreads.items()}}


if __name__ == "__main__":
    main()
