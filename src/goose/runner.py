"""From a resolved config to result rows: config -> model + prompts -> decode -> CSV."""

from __future__ import annotations

import hashlib
import json
import platform
import statistics
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from goose.benchmarks import Prompt, load_prompts
from goose.budget import DEFAULT_WIDTHS, AutoBudget, CostCurve
from goose.decode import Drafter, Generation, generate
from goose.engine import Engine
from goose.errors import GooseError
from goose.metrics import first_divergence, summarize
from goose.models import load_model, stop_ids, tokenizer_fingerprint
from goose.results import ReferenceStore, ResultsFile

# Keys that change which prompts run or where output goes, not what a row contains.
NOT_HASHED = ("n_prompts", "results_dir", "logging", "prompt", "warmup", "profile", "data_dir", "trace")


def validate(cfg: DictConfig) -> None:
    b = cfg.budget
    if b != "auto" and not (isinstance(b, int) and not isinstance(b, bool) and b >= 1):
        raise GooseError(f"budget must be a whole number of nodes >= 1 or auto (got {b!r}), e.g. budget=60.")
    if not (isinstance(cfg.max_new_tokens, int) and cfg.max_new_tokens >= 1):
        raise GooseError(f"max_new_tokens must be an integer >= 1 (got {cfg.max_new_tokens!r}).")
    if cfg.n_prompts is not None and not (isinstance(cfg.n_prompts, int) and cfg.n_prompts >= 1):
        raise GooseError(f"n_prompts must be an integer >= 1 or null for all (got {cfg.n_prompts!r}).")


def config_hash(cfg: DictConfig) -> str:
    plain = OmegaConf.to_container(cfg, resolve=True)
    kept = {k: v for k, v in plain.items() if k not in NOT_HASHED}
    return hashlib.sha1(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:12]


def make_drafter(method: DictConfig) -> Drafter:
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        drafter = instantiate(method.drafter, _convert_="all")
    except InstantiationException as e:  # a drafter's own clear error, not Hydra's wrapper
        if isinstance(e.__cause__, GooseError):
            raise e.__cause__ from None
        raise
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


def hf_greedy(model, ids: list[int], max_new_tokens: int, stops: frozenset[int], **extra) -> list[int]:
    """Hugging Face generate, greedy: the outside reference for our own AR (`extra`: e.g. prompt lookup)."""
    out = model.generate(
        torch.tensor([ids], device=model.device),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=sorted(stops) or None,
        pad_token_id=sorted(stops)[0] if stops else 0,
        **extra,
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


def turns_of(prompt: Prompt) -> list[tuple[str, str]]:
    """(row id, user text) per turn; later turns get ids '<id>#2', '<id>#3', ..."""
    texts = [prompt.text, *prompt.later_turns]
    return [(prompt.id if i == 0 else f"{prompt.id}#{i + 1}", t) for i, t in enumerate(texts)]


def build_input(tokenizer, history: list[tuple[str, str]], text: str, chat: bool) -> list[int]:
    """Token ids for a turn. Raw (the paper's default): earlier prompts and answers, then the new
    prompt, joined by blank lines. Chat: the tokenizer's chat template."""
    if chat:
        msgs = [m for user, answer in history for m in ({"role": "user", "content": user},
                                                        {"role": "assistant", "content": answer})]
        msgs.append({"role": "user", "content": text})
        out = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)
    raw = "".join(f"{user}{answer}\n\n" for user, answer in history) + text
    return tokenizer(raw).input_ids


def timed(engine, ids, drafter, cfg, stops) -> Generation:
    """Generate `repeats` times (tokens are identical); wall time = mean, its std kept."""
    gens = [generate(engine, ids, drafter, cfg.max_new_tokens, stops) for _ in range(cfg.repeats)]
    walls = [g.wall_s for g in gens]
    gen = gens[-1]
    gen.wall_s = sum(walls) / len(walls)
    gen.stats["wall_s_std"] = round(statistics.pstdev(walls), 6) if len(walls) > 1 else 0.0
    return gen


def run(cfg: DictConfig, run_dir: Path) -> dict | None:
    """Run one (model, benchmark, method, budget) configuration; return its summary."""
    validate(cfg)
    drafter = make_drafter(cfg.method)
    if cfg.prompt is not None:
        return run_single(cfg, drafter)
    prompts = select(load_prompts(cfg.benchmark.name, cfg.data_dir, cfg.benchmark.get("path")), cfg.n_prompts)
    chash = config_hash(cfg)
    results = ResultsFile(run_dir / "results.csv")
    done = results.done(chash)
    todo = [p for p in prompts if not all(rid in done for rid, _ in turns_of(p))]
    if done:
        print(f"[goose] resuming: {len(done)} row(s) already in {results.path}, {len(todo)} prompt(s) to go",
              flush=True)
    if todo:
        decode_all(cfg, drafter, todo, done, results, run_dir, chash)
    rows = [r for r in results.rows() if r.get("config_hash") == chash]
    summary = summarize(rows)
    summary.update({"model": cfg.model.name, "benchmark": cfg.benchmark.name, "method": cfg.method.name,
                    "budget": cfg.budget, "config_hash": chash, "run_dir": str(run_dir)})
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    write_summary_csv(run_dir / "summary.csv", summary)
    print_summary(summary, results.path)
    return summary


def write_summary_csv(path: Path, summary: dict) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary))
        w.writeheader()
        w.writerow(summary)


def load_engine(cfg: DictConfig, drafter: Drafter):
    torch.manual_seed(cfg.seed)
    model, tok, device, dtype = load_model(cfg.model, cfg.device, cfg.dtype)
    engine = Engine(model, profile=cfg.profile)
    drafter.check_tokenizer(tokenizer_fingerprint(tok))
    if cfg.budget == "auto":
        if not hasattr(drafter, "enable_auto_budget"):
            raise GooseError(f"budget=auto needs a tree drafter (goose, tr, iso3, iso5, pld); not '{cfg.method.name}'.")
        drafter.enable_auto_budget(AutoBudget(cost_curve(engine, cfg.model.name, device, dtype)))
    return engine, model, tok, device, dtype


def cost_curve(engine: Engine, name: str, device: torch.device, dtype: torch.dtype) -> CostCurve:
    """The verification cost curve of this model on this machine, measured once and cached."""
    from goose.models import cache_root

    where = device.type if device.type == "cpu" else torch.cuda.get_device_name(device).replace(" ", "_")
    key = f"{name}-{where}-{str(dtype).replace('torch.', '')}-threads{torch.get_num_threads()}.json"
    path = cache_root() / "profiles" / key
    if path.is_file():
        return CostCurve.load(path)
    print(f"[goose] measuring the verification cost curve once ({path})", flush=True)
    widths = list(DEFAULT_WIDTHS)
    curve = CostCurve(widths, engine.measure_cost(widths))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(curve.to_json())
    return curve


def run_single(cfg: DictConfig, drafter: Drafter) -> None:
    engine, model, tok, _, _ = load_engine(cfg, drafter)
    stops = stop_ids(tok, model)
    ids = build_input(tok, [], str(cfg.prompt), cfg.chat_template)
    check_length(Prompt("prompt", str(cfg.prompt)), len(ids), engine.max_positions, cfg)
    gen = generate(engine, ids, drafter, cfg.max_new_tokens, stops)
    print(tok.decode(gen.tokens, skip_special_tokens=True))
    print(f"\n[{len(gen.tokens)} tokens, {gen.steps} forwards, tau {gen.tau:.2f}, {gen.tokens_per_s:.1f} tokens/s]")


def decode_all(cfg, drafter, todo: list[Prompt], done: set[str], results: ResultsFile, run_dir: Path, chash: str):
    from tqdm import tqdm

    from goose.tracking import Tracker

    engine, model, tok, device, dtype = load_engine(cfg, drafter)
    stops = stop_ids(tok, model)
    env = environment(device, dtype)
    ref_key = f"{cfg.model.name}/{cfg.benchmark.name}/{env['dtype']}-{device.type}-N{cfg.max_new_tokens}"
    ref_key += "-chat" if cfg.chat_template else ""
    refs = ReferenceStore(Path(cfg.results_dir) / "references", ref_key)
    if cfg.warmup:
        warm = build_input(tok, [], todo[0].text, cfg.chat_template)
        for _ in range(cfg.warmup):
            generate(engine, warm, Drafter(), min(16, cfg.max_new_tokens), stops)
    w = cfg.logging.wandb
    tracker = Tracker(w.mode, w.project, run_name(cfg), f"{cfg.model.name}/{cfg.benchmark.name}",
                      OmegaConf.to_container(cfg, resolve=True), run_dir, w.get("entity"))
    is_ar = drafter.name == "ar"
    logged = []
    bar = tqdm(todo, desc=f"{cfg.method.name} on {cfg.benchmark.name}", unit="prompt", file=sys.stderr)
    for prompt in bar:
        history: list[tuple[str, str]] = []
        for rid, text in turns_of(prompt):
            ids = build_input(tok, history, text, cfg.chat_template)
            check_length(prompt, len(ids), engine.max_positions, cfg)
            ref = refs.get(rid)
            if ref is None and not is_ar:
                ar = timed(engine, ids, Drafter(), cfg, stops)
                ref = {"tokens": ar.tokens, "tokens_per_s": ar.tokens_per_s, "wall_s": ar.wall_s}
                refs.put(rid, ref)
            if cfg.trace and hasattr(drafter, "trace"):
                drafter.trace = []
            gen = timed(engine, ids, drafter, cfg, stops)
            if cfg.trace and getattr(drafter, "trace", None) is not None:
                write_trace(run_dir / "trace.jsonl", rid, drafter.trace)
                drafter.trace = None
            if is_ar:
                # Comparing AR with itself proves nothing: check it against HF generate instead.
                ref = {"tokens": gen.tokens, "tokens_per_s": gen.tokens_per_s, "wall_s": gen.wall_s}
                refs.put(rid, ref)
                against = hf_greedy(model, ids, cfg.max_new_tokens, stops)
            else:
                against = ref["tokens"]
            if rid not in done:
                row = row_for(cfg, Prompt(rid, text), ids, gen, ref, against, env, chash)
                results.append(row)
                tracker.log_prompt(len(logged), row)
                logged.append(row)
            history.append((text, tok.decode(gen.tokens, skip_special_tokens=True)))
    rows = [r for r in results.rows() if r.get("config_hash") == chash]
    tracker.finish(summarize(rows), logged)


def write_trace(path: Path, prompt_id: str, steps: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for i, step in enumerate(steps):
            f.write(json.dumps({"prompt_id": prompt_id, "step": i, **step}) + "\n")


def run_name(cfg: DictConfig) -> str:
    return f"{cfg.model.name}-{cfg.benchmark.name}-{cfg.method.name}-B{cfg.budget}-N{cfg.max_new_tokens}"


def check_length(prompt: Prompt, n: int, limit: int | None, cfg: DictConfig) -> None:
    margin = (cfg.budget if cfg.budget != "auto" else 64) + 128  # budget extension and long chains
    if limit is not None and n + cfg.max_new_tokens + margin > limit:
        raise GooseError(
            f"prompt '{prompt.id}' has {n} tokens; with max_new_tokens={cfg.max_new_tokens} and drafts of "
            f"up to {margin} nodes it exceeds the model's context of {limit}. Lower max_new_tokens or "
            "shorten the prompt."
        )


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
