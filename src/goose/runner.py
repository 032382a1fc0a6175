"""From a resolved config to result rows: config -> model + prompts -> decode -> CSV."""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from goose.benchmarks import Prompt, load_prompts
from goose.decode import Drafter, Generation, generate
from goose.engine import Engine
from goose.errors import GooseError
from goose.metrics import first_divergence, summarize
from goose.models import load_model, stop_ids
from goose.results import ReferenceStore, ResultsFile

# Keys that change which prompts run or where output goes, not what a row contains.
NOT_HASHED = ("n_prompts", "results_dir", "logging", "prompt", "warmup", "profile")


def validate(cfg: DictConfig) -> None:
    b = cfg.budget
    if not (isinstance(b, int) and not isinstance(b, bool) and b >= 1):
        raise GooseError(f"budget must be a whole number of nodes >= 1 (got {b!r}), e.g. budget=60.")
    if not (isinstance(cfg.max_new_tokens, int) and cfg.max_new_tokens >= 1):
        raise GooseError(f"max_new_tokens must be an integer >= 1 (got {cfg.max_new_tokens!r}).")
    if cfg.n_prompts is not None and not (isinstance(cfg.n_prompts, int) and cfg.n_prompts >= 1):
        raise GooseError(f"n_prompts must be an integer >= 1 or null for all (got {cfg.n_prompts!r}).")


def config_hash(cfg: DictConfig) -> str:
    plain = OmegaConf.to_container(cfg, resolve=True)
    kept = {k: v for k, v in plain.items() if k not in NOT_HASHED}
    return hashlib.sha1(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:12]


def make_drafter(method: DictConfig) -> Drafter:
    from hydra.utils import instantiate

    drafter = instantiate(method.drafter, _convert_="all")
    if not isinstance(drafter, Drafter):
        raise GooseError(f"method '{method.name}': {method.drafter._target_} is not a goose Drafter.")
    return drafter


def flat(prefix: str, node) -> dict:
    out = {}
    for k, v in node.items():
        if k.startswith("_"):
            continue
        key = f"{prefix}.{k}" if prefix else k
        out.update(flat(key, v) if isinstance(v, dict) else {key: v})
    return out


def environment(device: torch.device, dtype: torch.dtype) -> dict:
    import transformers

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    return {
        "device": str(device),
        "device_name": name,
        "dtype": str(dtype).replace("torch.", ""),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }


def encode(tokenizer, prompt: Prompt, limit: int | None, max_new_tokens: int, margin: int) -> list[int]:
    ids = tokenizer(prompt.text).input_ids
    if limit is not None and len(ids) + max_new_tokens + margin > limit:
        raise GooseError(
            f"prompt '{prompt.id}' has {len(ids)} tokens; with max_new_tokens={max_new_tokens} and drafts of "
            f"up to {margin} nodes it exceeds the model's context of {limit}. Lower max_new_tokens or "
            "shorten the prompt."
        )
    return ids


def hf_greedy(model, ids: list[int], max_new_tokens: int, stops: frozenset[int]) -> list[int]:
    """Hugging Face generate, greedy: the outside reference for our own AR."""
    out = model.generate(
        torch.tensor([ids], device=model.device),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=sorted(stops) or None,
        pad_token_id=sorted(stops)[0] if stops else 0,
    )
    return out[0, len(ids) :].tolist()


def select(prompts: list[Prompt], n: int | None) -> list[Prompt]:
    return prompts if n is None else prompts[:n]


def row_for(cfg, prompt, ids, gen: Generation, ref: dict, lossless_against: list[int], env, chash) -> dict:
    div = first_divergence(gen.tokens, lossless_against)
    row = {
        "model": cfg.model.name,
        "benchmark": cfg.benchmark.name,
        "method": cfg.method.name,
        "budget": cfg.budget,
        "prompt_id": prompt.id,
        "prompt_tokens": len(ids),
        "new_tokens": len(gen.tokens),
        "steps": gen.steps,
        "tau": round(gen.tau, 6),
        "wall_s": round(gen.wall_s, 6),
        "tokens_per_s": round(gen.tokens_per_s, 4),
        "lossless": div is None,
        "first_divergence": -1 if div is None else div,
        "ar_tokens_per_s": round(ref["tokens_per_s"], 4),
        "speedup": round(gen.tokens_per_s / ref["tokens_per_s"], 4) if ref["tokens_per_s"] else 0.0,
        "mean_width": round(sum(gen.widths) / len(gen.widths), 3) if gen.widths else 1.0,
        "max_new_tokens": cfg.max_new_tokens,
        "config_hash": chash,
    }
    row.update(gen.stats)
    row.update(env)
    plain = OmegaConf.to_container(cfg, resolve=True)
    for section in ("model", "method", "benchmark"):
        row.update(flat(section, plain[section]))
    row["seed"] = cfg.seed
    return row


def run(cfg: DictConfig, run_dir: Path) -> dict | None:
    """Run one (model, benchmark, method, budget) configuration; return its summary."""
    validate(cfg)
    drafter = make_drafter(cfg.method)
    if cfg.prompt is not None:
        prompts = [Prompt("prompt", str(cfg.prompt))]
    else:
        prompts = select(load_prompts(cfg.benchmark.name, cfg.data_dir, cfg.benchmark.get("path")), cfg.n_prompts)
    torch.manual_seed(cfg.seed)
    model, tok, device, dtype = load_model(cfg.model, cfg.device, cfg.dtype)
    engine = Engine(model, profile=cfg.profile)
    stops = stop_ids(tok, model)
    limit = engine.max_positions
    margin = max(cfg.budget, 1) + 128  # budget extension and long chains

    if cfg.prompt is not None:
        ids = encode(tok, prompts[0], limit, cfg.max_new_tokens, margin)
        gen = generate(engine, ids, drafter, cfg.max_new_tokens, stops)
        print(tok.decode(gen.tokens, skip_special_tokens=True))
        print(f"\n[{len(gen.tokens)} tokens, {gen.steps} forwards, tau {gen.tau:.2f}, {gen.tokens_per_s:.1f} tokens/s]")
        return None

    env = environment(device, dtype)
    chash = config_hash(cfg)
    results = ResultsFile(run_dir / "results.csv")
    done = results.done(chash)
    todo = [p for p in prompts if p.id not in done]
    ref_key = f"{cfg.model.name}/{cfg.benchmark.name}/{env['dtype']}-{device.type}-N{cfg.max_new_tokens}"
    refs = ReferenceStore(Path(cfg.results_dir) / "references", ref_key)
    if done:
        print(f"[goose] resuming: {len(done)} prompt(s) already in {results.path}, {len(todo)} to go", flush=True)

    if todo and cfg.warmup:
        warm = encode(tok, todo[0], limit, cfg.max_new_tokens, margin)
        for _ in range(cfg.warmup):
            generate(engine, warm, Drafter(), min(16, cfg.max_new_tokens), stops)

    from tqdm import tqdm

    is_ar = type(drafter) is Drafter or drafter.name == "ar"
    for prompt in tqdm(todo, desc=f"{cfg.method.name} on {cfg.benchmark.name}", unit="prompt", file=sys.stderr):
        ids = encode(tok, prompt, limit, cfg.max_new_tokens, margin)
        ref = refs.get(prompt.id)
        if ref is None and not is_ar:
            ar = generate(engine, ids, Drafter(), cfg.max_new_tokens, stops)
            ref = {"tokens": ar.tokens, "tokens_per_s": ar.tokens_per_s, "wall_s": ar.wall_s}
            refs.put(prompt.id, ref)
        gen = generate(engine, ids, drafter, cfg.max_new_tokens, stops)
        if is_ar:
            # Comparing AR with itself proves nothing: check it against HF generate instead.
            ref = {"tokens": gen.tokens, "tokens_per_s": gen.tokens_per_s, "wall_s": gen.wall_s}
            refs.put(prompt.id, ref)
            against = hf_greedy(model, ids, cfg.max_new_tokens, stops)
        else:
            against = ref["tokens"]
        results.append(row_for(cfg, prompt, ids, gen, ref, against, env, chash))

    rows = [r for r in results.rows() if r.get("config_hash") == chash]
    summary = summarize(rows)
    summary.update({"model": cfg.model.name, "benchmark": cfg.benchmark.name, "method": cfg.method.name,
                    "budget": cfg.budget, "config_hash": chash, "run_dir": str(run_dir)})
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    print_summary(summary, results.path)
    return summary


def print_summary(s: dict, path: Path) -> None:
    print(
        f"\n{s['method']} on {s['benchmark']} ({s['model']}, B={s['budget']}): {s['prompts']} prompts, "
        f"{s['new_tokens']} tokens\n"
        f"  tau {s['tau']:.3f} (tokens / forwards incl. prefill; mean over prompts {s['mean_tau']:.3f})\n"
        f"  {s['tokens_per_s']:.2f} tokens/s, speedup vs AR {s['speedup']:.3f}x\n"
        f"  lossless {s['lossless']}/{s['prompts']}\n"
        f"  rows: {path}",
        flush=True,
    )
