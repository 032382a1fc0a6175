"""Speed benchmark: every method on the same prompts, in one run, against Hugging Face.

Per prompt, all methods run back to back in a rotating order (machine noise hits them
alike); the whole pass repeats `--repeats` times. Prints pooled tokens/s per method (median
over repeats, min-max spread), ratios computed within each repeat and then the median,
tau, losslessness against HF greedy, and the per-step overhead breakdown (a separate,
profiled pass, so timed runs carry no extra syncs).

Methods that keep state across prompts (memory=run: TR's matrix, SuffixDecoding's global tree) keep
it across the prompts of a pass, in order, and every pass starts from the state the first one did:
a pass never drafts from the answers of an earlier pass.

    python experiments/bench.py [--n-prompts 10] [--max-new-tokens 128] [--repeats 3]
    python experiments/bench.py --methods goose@auto tr:prompt suffix@60:run
    python experiments/bench.py --temperature 0.7 --top-p 0.95 --seed 0

With --temperature > 0 every method samples (goose.sampling) and must return AR sampling's tokens;
hf-greedy and hf-prompt-lookup then run Hugging Face's greedy loops on the same perturbed logits
(our noise added by a logits processor), so they sample the same tokens and stay the outside reference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from goose.benchmarks import LOADERS, load_prompts  # noqa: E402
from goose.budget import cost_curve  # noqa: E402
from goose.decode import generate  # noqa: E402
from goose.engine import Engine  # noqa: E402
from goose.errors import GooseError  # noqa: E402
from goose.methods import arm, build_drafters, method_names, parse_spec  # noqa: E402
from goose.models import identify_model, load_model, model_config, model_config_names, stop_ids  # noqa: E402  # noqa: E402
from goose.sampling import Sampling  # noqa: E402
from goose.timing import hf_greedy  # noqa: E402

# Methods from conf/method/ (and --search-path folders), as NAME[@BUDGET][:MEMORY]; each in its default
# memory mode unless one is given. REST reads the offline datastore (`make bench` builds it).
DEFAULT_METHODS = ("ar", "pld", "pld@auto", "tr", "iso3", "lookahead", "rest", "suffix-chain", "suffix",
                   "suffix@auto", "goose@16", "goose@32", "goose@60", "goose@auto", "goose-suffix",
                   "goose-suffix@auto")
HF_METHODS = ("hf-greedy", "hf-prompt-lookup")


def check_names(ap: argparse.ArgumentParser, args) -> None:
    """Unknown names are an error that lists the valid ones; none is dropped silently."""
    try:
        methods = [parse_spec(m)[0] for m in args.methods or [] if m not in HF_METHODS]
    except GooseError as e:
        ap.error(f"--methods: {e}")
    checks = [("--model", [args.model], model_config_names()), ("--benchmarks", args.benchmarks, sorted(LOADERS)),
              ("--methods", methods, method_names(args.search_path))]
    for flag, given, valid in checks:
        bad = [x for x in given if x not in valid]
        if bad:
            ap.error(f"{flag}: unknown {', '.join(map(repr, bad))}; choose from {', '.join(valid)}"
                     + (" (as NAME[@BUDGET][:MEMORY]), or hf-greedy, hf-prompt-lookup" if flag == "--methods" else ""))
    if args.repeats < 0 or args.n_prompts < 1 or args.max_new_tokens < 1:
        ap.error("--repeats must be >= 0, --n-prompts and --max-new-tokens >= 1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--benchmarks", nargs="+", default=["humaneval", "gsm8k", "mt_bench"])
    ap.add_argument("--n-prompts", type=int, default=10)
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
    args = ap.parse_args()
    check_names(ap, args)
    try:
        sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
    except GooseError as e:
        ap.error(str(e))

    specs = list(dict.fromkeys(["ar", *(m for m in args.methods or DEFAULT_METHODS if m not in HF_METHODS)]))
    try:
        sys.path.extend(args.search_path)  # a user's drafter file may sit beside its YAML
        built = build_drafters(specs, args.model, args.search_path,
                               [f"model.path={args.model_path}"] if args.model_path else [],
                               skip_missing=args.methods is None)
        cfg = model_config(args.model, args.model_path)
        model, tok, device, dtype = load_model(cfg, args.device, args.dtype)
        prompts = [(b, tok(p.text).input_ids) for b in args.benchmarks for p in load_prompts(b)[: args.n_prompts]]
        engine = Engine(model)
        ours = arm(built, lambda: cost_curve(engine, identify_model(cfg), device, dtype), tok, cfg.name)
    except GooseError as e:
        ap.exit(2, f"error: {e}\n")
    stops = stop_ids(tok, model)
    N = args.max_new_tokens

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def hf(extra):
        def run(ids):
            sync()
            t = time.perf_counter()
            out = hf_greedy(model, ids, N, stops, sampling, **extra)
            sync()
            return out, time.perf_counter() - t, 0
        return run

    def mine(drafter):
        def run(ids):
            g = generate(engine, ids, drafter, N, stops, sampling)
            return g.tokens, g.wall_s, g.steps
        return run

    runners = {HF_METHODS[0]: hf({}), HF_METHODS[1]: hf({"prompt_lookup_num_tokens": 10})}
    if args.methods and HF_METHODS[1] not in args.methods:
        del runners[HF_METHODS[1]]
    runners.update({k: mine(d) for k, d in ours.items()})
    names = list(runners)

    initial = {m: d.save_memory() for m, d in ours.items()}  # empty; restored before every pass

    def fresh_memory():
        for m, d in ours.items():
            if initial[m] is not None:
                d.restore_memory(initial[m])

    for fn in runners.values():  # warm-up
        fn(prompts[0][1][:64])
    print(f"{args.model} {str(dtype).replace('torch.', '')} on {device} ({torch.get_num_threads()} threads): "
          f"{len(prompts)} prompts ({', '.join(args.benchmarks)}) x {N} new tokens, {args.repeats} repeat(s), "
          + (f"sampling {sampling.label()} (hf-* run greedy on the same perturbed logits)" if not sampling.greedy
             else "greedy"), flush=True)

    benches = list(dict.fromkeys(b for b, _ in prompts))
    # tok[rep][method][bench] and sec[...]; steps/lossless from the first repeat
    tok_ = [{m: dict.fromkeys(benches, 0) for m in names} for _ in range(args.repeats)]
    sec = [{m: dict.fromkeys(benches, 0.0) for m in names} for _ in range(args.repeats)]
    steps = {m: 0 for m in names}
    lossless = {m: 0 for m in names}
    for rep in range(args.repeats):
        fresh_memory()
        t0 = time.perf_counter()
        for i, (bench, ids) in enumerate(prompts):
            k = (i + rep) % len(names)
            outs = {}
            for m in names[k:] + names[:k]:
                out, s, n = runners[m](ids)
                tok_[rep][m][bench] += len(out)
                sec[rep][m][bench] += s
                outs[m] = out
                if rep == 0:
                    steps[m] += n
            if rep == 0:
                for m in names:
                    lossless[m] += int(outs[m] == outs["hf-greedy"])
        print(f"  repeat {rep + 1} done in {time.perf_counter() - t0:.0f} s", flush=True)

    def tps(rep, m, bench=None):
        bs = benches if bench is None else [bench]
        return sum(tok_[rep][m][b] for b in bs) / sum(sec[rep][m][b] for b in bs)

    def med_spread(vals):
        return statistics.median(vals), min(vals), max(vals)

    if args.repeats:
        print("\n| method | tokens/s (median, min-max) | tau | x our AR | x HF greedy | x HF prompt lookup | "
              + " | ".join(f"x AR {b}" for b in benches) + " | lossless |")
        print("|---|---|---|---|---|---|" + "---|" * len(benches) + "---|")
        for m in names:
            t, lo, hi = med_spread([tps(r, m) for r in range(args.repeats)])
            ratio = {
                base: statistics.median([tps(r, m) / tps(r, base) for r in range(args.repeats)])
                for base in ("ar", "hf-greedy", "hf-prompt-lookup") if base in names
            }
            per_b = [statistics.median([tps(r, m, b) / tps(r, "ar", b) for r in range(args.repeats)]) for b in benches]
            total_tok = sum(tok_[0][m].values())
            tau = f"{total_tok / steps[m]:.2f}" if steps[m] else "-"
            ll = "ref" if m == "hf-greedy" else f"{lossless[m]}/{len(prompts)}"
            cells = [f"{t:.2f} ({lo:.2f}-{hi:.2f})", tau] + [f"{ratio[b]:.2f}" if b in ratio else "-" for b in
                                                             ("ar", "hf-greedy", "hf-prompt-lookup")]
            print(f"| {m} | " + " | ".join(cells + [f"{x:.2f}" for x in per_b] + [ll]) + " |")

    # Per-step overhead breakdown, from a separate profiled pass (syncs on).
    engine.profile = True
    fresh_memory()
    print("\nper-step time, profiled pass (ms): forward | engine overhead (mask, top-k, walk, KV) | drafter | "
          "overhead share")
    width = max(map(len, ours))
    for m, d in ours.items():
        if m not in names:
            continue
        fw = ov = dr = 0.0
        n = 0
        for _, ids in prompts[:: max(1, len(prompts) // 6)]:  # six prompts across the benchmarks
            g = generate(engine, ids, d, N, stops, sampling)
            fw, ov, dr, n = fw + g.forward_s, ov + g.overhead_s, dr + g.draft_s, n + g.steps - 1
        if n:
            share = (ov + dr) / (fw + ov + dr)
            ms = [x / n * 1e3 for x in (fw, ov, dr)]
            print(f"  {m:{width}s} {ms[0]:8.2f} | {ms[1]:6.2f} | {ms[2]:6.2f} | {share * 100:5.1f}%")
    engine.profile = False


if __name__ == "__main__":
    main()
