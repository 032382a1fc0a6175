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

import torch

from goose.benchmarks.builtin import prompts_file
from goose.benchmarks.prompts import load_prompts
from goose.drafting.budget import BUSY_SPREAD, cost_curve, round_spread
from goose.engine.backends import apply_backend, check_backend, default_backend
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.measurement import bench_report
from goose.measurement import concurrency_sweep as concurrency
from goose.measurement.bench_passes import Setup, label, print_table, profiled_pass, timed_passes
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
