"""GPU check (run by hand on a machine with a CUDA device; never in CI).

For SmolLM2 (the one model such a machine can load without network), in fp32 and fp16:
every method in conf/method/ and GOOSE under budget=auto (REST included; REST's offline datastore is built if
missing) against Hugging Face greedy in the same dtype (fp32: must be identical; fp16:
token match rate and first divergence, since near-ties may flip), and its tokens/s over
our AR. About 3 minutes on one modern GPU.

    python experiments/gpu_check.py [--n-prompts 3] [--max-new-tokens 128]
    python experiments/gpu_check.py --device cpu --n-prompts 1 --max-new-tokens 16   # smoke test
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from goose.benchmarks import load_prompts
from goose.budget import cost_curve
from goose.engine import Engine
from goose.methods import arm, build_drafters, method_names
from goose.metrics import first_divergence
from goose.models import identify_model, load_model, model_config, stop_ids
from goose.timing import hf_greedy

ROOT = Path(__file__).resolve().parents[1]


def method_specs() -> list[str]:
    """Every method in conf/method/ at budget 60, and GOOSE under budget=auto."""
    return [*method_names(), "goose@auto"]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python experiments/gpu_check.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n-prompts", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--device", default="cuda", help="cpu only to smoke-test this script")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device; this check is for a GPU machine (CPU losslessness is in `make test`).")
        return 2
    from goose.decode import generate

    cfg = model_config("smollm2-135m")
    texts = [p.text for b in ("humaneval", "gsm8k", "mt_bench") for p in load_prompts(b)[: args.n_prompts]]
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(f"{where}: {len(texts)} prompts x {args.max_new_tokens} tokens")
    failed = False
    for dtype in ("float32", "float16"):
        model, tok, device, dt = load_model(cfg, args.device, dtype)
        stops = stop_ids(tok, model)
        engine = Engine(model)
        prompts = [tok(t).input_ids for t in texts]
        refs = [hf_greedy(model, ids, args.max_new_tokens, stops) for ids in prompts]
        curve = cost_curve(engine, identify_model(cfg), device, dt)
        print(f"\n{dtype}: cost(T)/cost(1) = " + ", ".join(f"T={w}: {s / curve.seconds[0]:.2f}"
                                                         for w, s in zip(curve.widths, curve.seconds)))
        print("| method | tau | tokens/s | x AR | identical prompts | token match | first divergence |")
        print("|---|---|---|---|---|---|---|")
        ar_tps = None
        built = build_drafters(method_specs(), "smollm2-135m", skip_missing=True)
        drafters = arm(built, lambda c=curve: c, tok, "smollm2-135m")
        for name, d in drafters.items():
            saved = d.save_memory()
            generate(engine, prompts[0], d, 16, stops)  # warm-up
            if saved is not None:  # memory=run: the timed prompts never see the warm-up's answer
                d.restore_memory(saved)
            toks = steps = same = match = 0
            secs = 0.0
            divs = []
            for ids, ref in zip(prompts, refs):
                g = generate(engine, ids, d, args.max_new_tokens, stops)  # syncs around its own timing
                secs += g.wall_s
                toks, steps = toks + len(g.tokens), steps + g.steps
                div = first_divergence(g.tokens, ref)
                same += div is None
                n = len(ref) if div is None else div
                match += n
                if div is not None:
                    divs.append(div)
            tps = toks / secs
            ar_tps = ar_tps or tps
            rate = match / sum(len(r) for r in refs)
            print(f"| {name} | {toks / steps:.2f} | {tps:.1f} | {tps / ar_tps:.2f} | {same}/{len(prompts)} | "
                  f"{rate:.3f} | {min(divs) if divs else '-'} |", flush=True)
            if dtype == "float32" and same != len(prompts):
                failed = True
        del model, engine
        if args.device == "cuda":
            torch.cuda.empty_cache()
    print("\nfp32 lossless for every method:", "NO" if failed else "yes")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
