"""Benchmark: our AR decode loop vs Hugging Face `generate` (greedy) on the same prompts, one run.

Interleaves the two per prompt and repeat so machine noise hits both alike; prints per-repeat
pooled tokens/s, the median ratio, and checks the tokens are identical.

    python experiments/bench_ar.py [--benchmarks humaneval gsm8k mt_bench] [--n-prompts 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from goose.benchmarks import load_prompts  # noqa: E402
from goose.decode import Drafter, generate  # noqa: E402
from goose.engine import Engine  # noqa: E402
from goose.models import load_model, stop_ids  # noqa: E402
from goose.runner import hf_greedy  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--benchmarks", nargs="+", default=["humaneval", "gsm8k", "mt_bench"])
    ap.add_argument("--n-prompts", type=int, default=10)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    cfg = OmegaConf.load(ROOT / "conf" / "model" / f"{args.model}.yaml")
    model, tok, device, dtype = load_model(cfg)
    stops = stop_ids(tok, model)
    engine = Engine(model)
    prompts = [tok(p.text).input_ids for b in args.benchmarks for p in load_prompts(b)[: args.n_prompts]]

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    def hf(ids):
        sync()
        t = time.perf_counter()
        out = hf_greedy(model, ids, args.max_new_tokens, stops)
        sync()
        return out, time.perf_counter() - t

    def ours(ids):
        g = generate(engine, ids, Drafter(), args.max_new_tokens, stops)
        return g.tokens, g.wall_s

    hf(prompts[0])  # warm-up, both paths
    ours(prompts[0])
    ratios, identical = [], True
    print(f"{args.model} {dtype} on {device}: {len(prompts)} prompts x {args.max_new_tokens} new tokens")
    for rep in range(args.repeats):
        tot = {"hf": [0, 0.0], "ours": [0, 0.0]}
        for i, ids in enumerate(prompts):
            order = [("hf", hf), ("ours", ours)] if (i + rep) % 2 == 0 else [("ours", ours), ("hf", hf)]
            outs = {}
            for name, fn in order:
                toks, secs = fn(ids)
                outs[name] = toks
                tot[name][0] += len(toks)
                tot[name][1] += secs
            identical &= outs["hf"] == outs["ours"]
        hf_tps, our_tps = (tot[k][0] / tot[k][1] for k in ("hf", "ours"))
        ratios.append(our_tps / hf_tps)
        print(f"  repeat {rep + 1}: HF generate {hf_tps:.2f} tokens/s, our AR {our_tps:.2f} tokens/s, "
              f"ratio {our_tps / hf_tps:.3f}")
    spread = f"min {min(ratios):.3f}, max {max(ratios):.3f}"
    print(f"our AR / HF generate: median {statistics.median(ratios):.3f} ({spread}); "
          f"tokens identical: {identical}")


if __name__ == "__main__":
    main()
