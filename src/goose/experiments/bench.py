"""Speed benchmark: every method on the same prompts, in one run, against Hugging Face.

Per prompt, all methods run back to back in a rotating order (machine noise hits them
alike); the whole pass repeats `--repeats` times. Prints pooled tokens/s per method (median
over repeats, min-max spread), ratios computed within each repeat and then the median,
tau, losslessness against HF greedy, and the per-step overhead breakdown (a separate,
profiled pass, so timed runs carry no extra syncs).

Methods that keep state across prompts (memory=run: TR's matrix, SuffixDecoding's global tree) keep
it across the prompts of a pass, in order, and every pass starts from the state the first one did:
a pass never drafts from the answers of an earlier pass.

    python -m goose.experiments.bench [--n-prompts 10] [--max-new-tokens 128] [--repeats 3]
    python -m goose.experiments.bench --methods goose@auto tr:prompt suffix@60:run
    python -m goose.experiments.bench --temperature 0.7 --top-p 0.95 --seed 0
    python -m goose.experiments.bench --backends eager prepacked     (the default on a CPU with fp32 weights)

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
every repeat (experiments.bench_report). Hugging Face's loops report no first token's time: no latency there.

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
from pathlib import Path

import torch
from tqdm import tqdm

from goose.benchmarks.prompts import benchmark_names, load_prompts
from goose.drafting.budget import BUSY_SPREAD, cost_curve, round_spread
from goose.engine.backends import BACKENDS, apply_backend, check_backend, default_backend
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.experiments import bench_report
from goose.models.loading import identify_model, load_model, model_config, model_config_names, stop_ids
from goose.paths import REPO_ROOT
from goose.running.inputs import check_length, token_room
from goose.running.loop import generate
from goose.running.registry import arm, build_drafters, method_names, parse_spec
from goose.running.timing import hf_greedy

ROOT = REPO_ROOT

# Methods from conf/method/ (and --search-path folders), as NAME[@BUDGET][:MEMORY]; each in its default
# memory mode unless one is given. REST reads the offline datastore (`make bench` builds it).
DEFAULT_METHODS = ("ar", "pld", "pld@auto", "tr", "iso3", "lookahead", "rest", "suffix-chain", "suffix",
                   "suffix@auto", "goose@16", "goose@32", "goose@60", "goose@auto", "goose-suffix",
                   "goose-suffix@auto")
HF_METHODS = ("hf-greedy", "hf-prompt-lookup")
DEFAULT_N_PROMPTS = 10  # of each --benchmarks entry; of a --prompts file: all unless --n-prompts is given


def check_names(ap: argparse.ArgumentParser, args) -> None:
    """Unknown names are an error that lists the valid ones; none is dropped silently."""
    try:
        methods = [parse_spec(m)[0] for m in args.methods or [] if m not in HF_METHODS]
    except GooseError as e:
        ap.error(f"--methods: {e}")
    checks = [("--model", [args.model], model_config_names()), ("--benchmarks", args.benchmarks, benchmark_names()),
              ("--methods", methods, method_names(args.search_path))]
    for flag, given, valid in checks:
        bad = [x for x in given if x not in valid]
        if bad:
            ap.error(f"{flag}: unknown {', '.join(map(repr, bad))}; choose from {', '.join(valid)}"
                     + (" (as NAME[@BUDGET][:MEMORY]), or hf-greedy, hf-prompt-lookup" if flag == "--methods" else ""))
    if args.repeats < 0 or (args.n_prompts is not None and args.n_prompts < 1) or args.max_new_tokens < 1:
        ap.error("--repeats must be >= 0, --n-prompts and --max-new-tokens >= 1")


def check_figure(ap: argparse.ArgumentParser, args) -> None:
    """--figure: what it needs, its own file (not --json's), and a format matplotlib writes, all before any work."""
    missing = [flag for flag, value in (("--concurrency", args.concurrency), ("--json", args.json)) if not value]
    if missing:
        ap.error(f"--figure plots a concurrency sweep: give {' and '.join(missing)} too")
    if Path(args.figure).resolve() == Path(args.json).resolve():
        ap.error(f"--json and --figure name one file ({args.figure}): give each its own path")
    ext = Path(args.figure).suffix.lower().lstrip(".")
    if ext:  # none: matplotlib's default format (savefig.format)
        from matplotlib.figure import Figure

        formats = Figure().canvas.get_supported_filetypes()
        if ext not in formats:
            ap.error(f"--figure {args.figure}: matplotlib cannot write .{ext}; use one of "
                     f"{', '.join('.' + f for f in sorted(formats))}")


OUTPUTS = ("--json", "--figure")  # the files a run writes; an earlier one is removed before the command line is read


def output_paths(argv: list[str]) -> list[str]:
    """The values of --json and --figure in `argv` (as `--json X`, `--json=X`, or an abbreviation argparse takes),
    found before parsing, so that a command line argparse refuses leaves no earlier file standing in for its run."""
    found = []
    for i, a in enumerate(argv):
        if a == "--":
            break
        name, eq, value = a.partition("=")
        if len(name) < 3 or not any(flag.startswith(name) for flag in OUTPUTS):
            continue
        if eq:
            found.append(value)
        elif i + 1 < len(argv):
            found.append(argv[i + 1])
    return [f for f in found if f]


def remove_stale(argv: list[str]) -> None:
    """Remove an earlier file at --json's or --figure's path (a folder or an unremovable file is left for
    bench_report.claim to report, after the command line is checked)."""
    for f in output_paths(argv):
        p = Path(f)
        if p.is_symlink() or p.is_file():
            try:
                p.unlink()
            except OSError:
                pass


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked before any model loads (the docs' commands are checked with it too)."""
    ap = argparse.ArgumentParser(prog="python -m goose.experiments.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--benchmarks", nargs="+", default=["humaneval", "gsm8k", "mt_bench"])
    ap.add_argument("--n-prompts", type=int, default=None,
                    help=f"the first N prompts of each --benchmarks entry (default {DEFAULT_N_PROMPTS}), or of the "
                         "--prompts file (default: all)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats; 0 runs only the profiled pass")
    ap.add_argument("--methods", nargs="*", default=None,
                    help=f"NAME[@BUDGET][:MEMORY] from conf/method/ (default: {' '.join(DEFAULT_METHODS)}); "
                         "hf-greedy and ar always run")
    ap.add_argument("--search-path", action="append", default=[],
                    help="an extra config folder holding method/NAME.yaml (as Hydra's hydra.searchpath)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--model-path", default=None, help="for --model hf/gguf: the local folder or GGUF file")
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    ap.add_argument("--top-k", type=int, default=0, help="sampling: keep the k likeliest tokens (0 = off)")
    ap.add_argument("--top-p", type=float, default=1.0, help="sampling: nucleus mass (1.0 = off)")
    ap.add_argument("--seed", type=int, default=0, help="sampling: the noise seed")
    ap.add_argument("--backends", nargs="+", choices=BACKENDS, default=None,
                    help="how the forward runs (default: eager and prepacked where prepacked applies, else eager; "
                         "with --concurrency: the first given, else auto)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=None,
                    help="requests in flight: each method at each of these concurrencies against batched AR at the "
                         "same one (src/goose/experiments/concurrency_sweep.py)")
    ap.add_argument("--prompts", default=None, help="a JSONL file of your own prompts ({\"prompt\": ..., \"id\": ...} "
                    "per line) instead of --benchmarks")
    ap.add_argument("--json", default=None, help="also write the run to this file, machine-readable: what it ran on "
                    "and everything printed (written when the run ends; an earlier file there is removed at its start)")
    ap.add_argument("--figure", default=None, help="with --concurrency and --json: also plot speedup against "
                    "concurrency (one line per method, batched AR = 1) to this image file")
    args = ap.parse_args(argv)
    if args.model in ("hf", "gguf") and not args.model_path:
        ap.error(f"--model {args.model} needs --model-path: a local model folder (hf) or a .gguf file (gguf)")
    check_names(ap, args)
    if args.concurrency is not None:
        if min(args.concurrency) < 1:
            ap.error("--concurrency: every value must be >= 1")
        hf = [m for m in args.methods or [] if m in HF_METHODS]
        if hf:
            ap.error(f"--concurrency: {', '.join(hf)} decode one request at a time; leave them out")
        if args.repeats < 1:
            ap.error("--concurrency needs --repeats >= 1")
    if args.figure:
        check_figure(ap, args)
    try:
        args.sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
    except GooseError as e:
        ap.error(str(e))
    return args


def main(argv: list[str] | None = None) -> None:
    given = sys.argv[1:] if argv is None else list(argv)
    remove_stale(given)  # before parse: a refused command line leaves no earlier --json or --figure file either
    args = parse(given)
    sampling = args.sampling

    specs = list(dict.fromkeys(["ar", *(m for m in args.methods or DEFAULT_METHODS if m not in HF_METHODS)]))
    try:
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
            from goose.benchmarks.builtin import prompts_file

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
            return run_concurrency(args, cfg, model, tok, device, dtype, prompts, specs, extra, sampling, identity,
                                   backend, info)
        info = bench_report.ran_on(args, identity, device, dtype, backends, len(prompts), source, given)
        models = {b: model if b == "eager" else apply_backend(copy.deepcopy(model), b) for b in backends}
        if "eager" not in models:  # HF greedy on the eager model stays the outside reference
            models["eager"] = model
        engines = {b: Engine(m) for b, m in models.items()}
        costs = print_cost_curves(engines)
        ours = {b: arm(build_drafters(specs, args.model, args.search_path, extra, skip_missing=args.methods is None),
                       lambda e=engines[b]: cost_curve(e, identity, device, dtype), tok, cfg.name) for b in backends}
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    stops = stop_ids(tok, model)
    N = args.max_new_tokens

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

    def label(name: str, backend: str) -> str:
        return name if backend == "eager" else f"{name} [{backend}]"

    runners, backend_of_row = {}, {}
    for b in dict.fromkeys(["eager", *backends]):
        rows = {HF_METHODS[0]: hf(models[b], {})}
        if b in backends and (not args.methods or HF_METHODS[1] in args.methods):
            rows[HF_METHODS[1]] = hf(models[b], {"prompt_lookup_num_tokens": 10})
        rows.update({k: mine(engines[b], d) for k, d in ours.get(b, {}).items()})
        for k, fn in rows.items():
            runners[label(k, b)] = fn
            backend_of_row[label(k, b)] = b
    names = list(runners)
    drafters = {label(k, b): d for b in backends for k, d in ours[b].items()}

    initial = {m: d.save_memory() for m, d in drafters.items()}  # empty; restored before every pass

    def fresh_memory():
        for m, d in drafters.items():
            if initial[m] is not None:
                d.restore_memory(initial[m])

    for fn in runners.values():  # warm-up
        fn(prompts[0][1][:64])
    print(f"{args.model} {str(dtype).replace('torch.', '')} on {device} ({torch.get_num_threads()} threads): "
          f"{len(prompts)} prompts ({source}) x {N} new tokens, {args.repeats} repeat(s), "
          + (f"sampling {sampling.label()} (hf-* run greedy on the same perturbed logits)" if not sampling.greedy
             else "greedy"), flush=True)

    benches = list(dict.fromkeys(b for b, _ in prompts))
    # tok[rep][method][bench] and sec[...]; steps/lossless from the first repeat
    tok_ = [{m: dict.fromkeys(benches, 0) for m in names} for _ in range(args.repeats)]
    sec = [{m: dict.fromkeys(benches, 0.0) for m in names} for _ in range(args.repeats)]
    ttft = {m: [] for m in names}  # ms, per request of every repeat
    tpot = {m: [] for m in names}
    steps = {m: 0 for m in names}
    lossless = {m: 0 for m in names}
    same_as_eager = dict.fromkeys(backends, 0)  # prompts where AR on a backend gives eager AR's tokens
    repeat_s = []
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
                tok_[rep][m][bench] += len(out)
                sec[rep][m][bench] += s
                ttft[m] += [first_ms] if first_ms is not None else []
                tpot[m] += [per_token_ms] if per_token_ms is not None else []
                outs[m] = out
                if rep == 0:
                    steps[m] += n
            if rep == 0:
                for m in names:
                    lossless[m] += int(outs[m] == outs[label("hf-greedy", backend_of_row[m])])
                for b in backends:
                    if b != "eager":
                        same_as_eager[b] += int(outs[label("ar", b)] == outs["ar"]) if "ar" in outs else 0
        repeat_s.append(time.perf_counter() - t0)
        print(f"  repeat {rep + 1} done in {repeat_s[-1]:.0f} s", flush=True)

    def tps(rep, m, bench=None):
        bs = benches if bench is None else [bench]
        return sum(tok_[rep][m][b] for b in bs) / sum(sec[rep][m][b] for b in bs)

    def med_spread(vals):
        return statistics.median(vals), min(vals), max(vals)

    def ms(x):
        return "-" if x is None else f"{x:.1f}"

    table = []
    if args.repeats:
        print("\n| method | tokens/s (median, min-max) | tau | TTFT / TPOT p50 (ms) | x our AR | x HF greedy | "
              "x HF prompt lookup | " + " | ".join(f"x AR {b}" for b in benches) + " | lossless |")
        print("|---|---|---|---|---|---|---|" + "---|" * len(benches) + "---|")
        for m in names:
            t, lo, hi = med_spread([tps(r, m) for r in range(args.repeats)])
            own = backend_of_row[m]
            bases = {"ar": label("ar", own), "hf-greedy": "hf-greedy",
                     "hf-prompt-lookup": label("hf-prompt-lookup", own)}
            ratio = {
                base: statistics.median([tps(r, m) / tps(r, row) for r in range(args.repeats)])
                for base, row in bases.items() if row in names
            }
            per_b = [statistics.median([tps(r, m, b) / tps(r, bases["ar"], b) for r in range(args.repeats)])
                     if bases["ar"] in names else None for b in benches]
            total_tok = sum(tok_[0][m].values())
            tau = f"{total_tok / steps[m]:.2f}" if steps[m] else "-"
            ll = "ref" if m == label("hf-greedy", own) else f"{lossless[m]}/{len(prompts)}"
            lat = {"ttft_p50_ms": bench_report.percentile(ttft[m], 0.5),
                   "ttft_p95_ms": bench_report.percentile(ttft[m], 0.95),
                   "tpot_p50_ms": bench_report.percentile(tpot[m], 0.5),
                   "tpot_p95_ms": bench_report.percentile(tpot[m], 0.95)}
            cells = [f"{t:.2f} ({lo:.2f}-{hi:.2f})", tau, f"{ms(lat['ttft_p50_ms'])} / {ms(lat['tpot_p50_ms'])}"]
            cells += [f"{ratio[b]:.2f}" if b in ratio else "-" for b in ("ar", "hf-greedy", "hf-prompt-lookup")]
            print(f"| {m} | " + " | ".join(cells + ["-" if x is None else f"{x:.2f}" for x in per_b] + [ll]) + " |")
            table.append({"method": m, "backend": own, "tokens_per_s": t, "tokens_per_s_min": lo,
                          "tokens_per_s_max": hi, "tokens_per_s_per_repeat": [tps(r, m) for r in range(args.repeats)],
                          "tau": total_tok / steps[m] if steps[m] else None, **lat,
                          **{f"x_{b}": ratio.get(b) for b in ("ar", "hf-greedy", "hf-prompt-lookup")},
                          **{f"x_ar_{b}": x for b, x in zip(benches, per_b)}, "lossless": ll,
                          "lossless_prompts": None if ll == "ref" else lossless[m]})

        for b in backends:
            if b != "eager" and "ar" in names:
                print(f"\nAR on {b} gives eager AR's tokens on {same_as_eager[b]}/{len(prompts)} prompts (a backend "
                      "sums in another order; every method is compared with AR on its own backend)")

    # Per-step overhead breakdown, from a separate profiled pass (syncs on).
    print("\nper-step time, profiled pass (ms): forward | engine overhead (mask, top-k, walk, KV) | drafter | "
          "overhead share")
    width = max(map(len, drafters))
    profiled = {}
    sample = prompts[:: max(1, len(prompts) // 6)]  # six prompts across the benchmarks
    for m, d in drafters.items():
        engine = engines[backend_of_row[m]]
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

    if args.json:
        bench_report.write(args.json, {**info, "methods": names, "cost": costs, "rows": table,
                                     "repeat_s": repeat_s,
                                     "ar_same_as_eager": {b: same_as_eager[b] for b in backends if b != "eager"},
                                     "profiled": profiled})
        print(f"wrote {args.json}")


def check_lengths(named: list[tuple[str, str, list[int]]], limit: int | None, max_new_tokens: int) -> None:
    """Before any work: every prompt ((benchmark, id, ids)) and its --max-new-tokens fit in the model's context, in
    run.py's words (goose.running.inputs), naming the prompt's id; every method decodes the same number of tokens."""
    for _, pid, ids in named:
        token_room(pid, len(ids), limit, max_new_tokens)  # not one new token fits
        check_length(f"prompt '{pid}'", len(ids), limit, max_new_tokens)


def run_concurrency(args, cfg, model, tok, device, dtype, prompts, specs, extra, sampling, identity, backend,
                    info) -> None:
    """--concurrency: every method at every concurrency against batched AR (experiments.concurrency_sweep), on one
    backend (the first of --backends, else auto)."""
    from goose.experiments import concurrency_sweep as concurrency

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
