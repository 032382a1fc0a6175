"""From a resolved config to result rows: config -> model + prompts -> decode -> CSV."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from goose.benchmarks import Prompt, load_prompts
from goose.budget import DEFAULT_WIDTHS, AutoBudget, CostCurve
from goose.decode import Drafter, generate
from goose.engine import Engine
from goose.errors import GooseError
from goose.fingerprints import digest, prompts_fingerprint
from goose.metrics import first_divergence, speedup_stale, summarize
from goose.models import (
    ModelIdentity,
    identify_model,
    load_model,
    resolve_device,
    resolve_dtype,
    stop_ids,
    tokenizer_fingerprint,
)
from goose.results import ReferenceStore, ResultsFile, RunLock, TimingStore
from goose.timing import MODES, Measured, Timer, conditions, device_name

# Keys that change which prompts run or where output goes, not what a row contains. Paths are
# left out too: the model's and the prompts' contents are hashed instead (fingerprints).
NOT_HASHED = ("n_prompts", "results_dir", "run_dir", "logging", "prompt", "prompt_file", "warmup", "data_dir",
              "trace")


def _whole(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def validate(cfg: DictConfig) -> None:
    """Every check that needs no model and no data, so a bad command fails before anything is created."""
    b = cfg.budget
    if b != "auto" and not _whole(b, 1):
        raise GooseError(f"budget must be a whole number of nodes >= 1 or auto (got {b!r}), e.g. budget=60.")
    if not _whole(cfg.max_new_tokens, 1):
        raise GooseError(f"max_new_tokens must be an integer >= 1 (got {cfg.max_new_tokens!r}).")
    if cfg.n_prompts is not None and not _whole(cfg.n_prompts, 1):
        raise GooseError(f"n_prompts must be an integer >= 1 or null for all (got {cfg.n_prompts!r}).")
    if not _whole(cfg.repeats, 1):
        raise GooseError(f"repeats must be an integer >= 1: timed generations per prompt (got {cfg.repeats!r}).")
    if not _whole(cfg.warmup, 0):
        raise GooseError(f"warmup must be an integer >= 0: untimed generations first (got {cfg.warmup!r}).")
    if cfg.speedup_reference not in MODES:
        raise GooseError(f"speedup_reference must be one of {', '.join(MODES)} (got {cfg.speedup_reference!r}).")
    if cfg.prompt is not None and cfg.prompt_file is not None:
        raise GooseError("give prompt=... or prompt_file=..., not both.")


def resolved_device_dtype(cfg: DictConfig) -> tuple[torch.device, torch.dtype]:
    device = resolve_device(cfg.device if cfg.device != "auto" else cfg.model.get("device", "auto"))
    return device, resolve_dtype(cfg.dtype if cfg.dtype != "auto" else cfg.model.get("dtype", "auto"), device)


def config_hash(cfg: DictConfig, identity: dict) -> str:
    """Every key that changes a row, plus what the config points at (model and prompts content,
    resolved device and dtype, backend)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    kept = {k: v for k, v in plain.items() if k not in NOT_HASHED}
    for section in ("model", "benchmark"):
        kept[section] = {k: v for k, v in kept[section].items() if k != "path"}
    kept.update(identity)
    return digest(kept, 12)


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

    return {
        "device": str(device),
        "device_name": device_name(device),
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


TOP_LEVEL = ("seed", "chat_template", "repeats", "warmup", "speedup_reference", "profile")


def row_for(cfg, rid: str, ids, m: Measured, env: dict, run: RunIdentity) -> dict:
    gen, ar = m.gen, m.ar_timing
    div = first_divergence(gen.tokens, m.ar_tokens)
    row = {
        "model": run.model.label,
        "benchmark": cfg.benchmark.name,
        "method": cfg.method.name,
        "budget": cfg.budget,
        "prompt_id": rid,
        "prompt_tokens": len(ids),
        "new_tokens": len(gen.tokens),
        "steps": gen.steps,
        "tau": round(gen.tau, 6),
        "wall_s": round(gen.wall_s, 6),
        "tokens_per_s": round(gen.tokens_per_s, 4),
        "lossless": div is None,
        "first_divergence": -1 if div is None else div,
        "speedup": round(ar["wall_s"] / gen.wall_s, 4) if ar and gen.wall_s > 0 else "",
        "speedup_source": m.source,
        "ar_wall_s": round(ar["wall_s"], 6) if ar else "",
        "ar_tokens_per_s": round(ar["tokens_per_s"], 4) if ar else "",
        "mean_width": round(sum(gen.widths) / len(gen.widths), 3) if gen.widths else 1.0,
        "max_new_tokens": cfg.max_new_tokens,
        "config_hash": run.config_hash,
        "model_config": cfg.model.name,
        "model_fingerprint": run.model.fingerprint,
        "model_source": run.model.description,
        "prompts_fingerprint": run.prompts_fingerprint,
        "reference_key": m.key,
        "timed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **{k: run.conditions[k] for k in ("host", "threads", "backend", "sweep_id")},
        **{f"ar_{k}": (ar or {}).get(k, "") for k in ("at", "host", "threads", "torch", "backend", "device_name",
                                                      "sweep_id")},
    }
    row.update(gen.stats)
    row.update(env)
    stale = speedup_stale(row)
    row["speedup_stale"] = "" if stale is None else stale
    plain = OmegaConf.to_container(cfg, resolve=True)
    for section in ("model", "method", "benchmark"):
        row.update(flat(section, plain[section]))
    row.update({k: plain[k] for k in TOP_LEVEL})
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


@dataclass
class RunIdentity:
    """What one configuration's rows are keyed by."""

    model: ModelIdentity
    prompts_fingerprint: str
    config_hash: str
    device: torch.device
    dtype: torch.dtype
    conditions: dict = field(default_factory=dict)


class Interrupted(Exception):
    """Ctrl-C during a run: the rows written so far are kept."""

    def __init__(self, rows: int, path: Path):
        super().__init__(f"interrupted: {rows} row(s) kept in {path}; rerun the same command to resume")


def default_run_dir(cfg: DictConfig, label: str, chash: str) -> Path:
    """<results_dir>/<model>/<benchmark>/<method>/B<budget>-N<max_new_tokens>-<config hash>: readable, and
    one configuration per folder."""
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in label)
    return (Path(cfg.results_dir) / safe / cfg.benchmark.name / cfg.method.name
            / f"B{cfg.budget}-N{cfg.max_new_tokens}-{chash}")


def run(cfg: DictConfig, sweep_id: str = "") -> dict | None:
    """Run one (model, benchmark, method, budget) configuration; return its summary."""
    validate(cfg)
    device, dtype = resolved_device_dtype(cfg)
    drafter = make_drafter(cfg.method)
    if cfg.prompt is not None or cfg.prompt_file is not None:
        return run_single(cfg, drafter)
    model = identify_model(cfg.model)
    every = load_prompts(cfg.benchmark.name, cfg.data_dir, cfg.benchmark.get("path"))
    prompts = select(every, cfg.n_prompts)
    pfp = prompts_fingerprint(every)
    chash = config_hash(cfg, {"model_fingerprint": model.fingerprint, "prompts_fingerprint": pfp,
                              "device": device.type, "dtype": str(dtype), "backend": Engine.backend})
    ident = RunIdentity(model, pfp, chash, device, dtype, conditions(device, Engine.backend, sweep_id))
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg, model.label, chash)
    existed = run_dir.exists()
    with RunLock(run_dir):
        results = ResultsFile(run_dir / "results.csv")
        try:
            check_one_configuration(results, run_dir, chash)
            done = results.done(chash)
            todo = [p for p in prompts if not all(rid in done for rid, _ in turns_of(p))]
            if done:
                print(f"[goose] resuming: {len(done)} row(s) already in {results.path}, {len(todo)} prompt(s) to go",
                      flush=True)
            if todo:
                write_config(run_dir, cfg, ident)
                decode_all(cfg, drafter, todo, done, results, run_dir, ident)
        except KeyboardInterrupt:
            kept = len(results.done(chash))
            if not kept and not existed:
                remove_empty(run_dir, Path(cfg.results_dir))
            raise Interrupted(kept, results.path) from None
        except BaseException:
            if not existed and not results.rows():
                remove_empty(run_dir, Path(cfg.results_dir))
            raise
    rows = [r for r in results.rows() if r.get("config_hash") == chash]
    summary = summarize(rows)
    summary.update({"model": model.label, "benchmark": cfg.benchmark.name, "method": cfg.method.name,
                    "budget": cfg.budget, "config_hash": chash, "speedup_reference": cfg.speedup_reference,
                    "speedup_sources": ",".join(sorted({str(r.get("speedup_source")) for r in rows})),
                    "run_dir": str(run_dir)})
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    write_summary_csv(run_dir / "summary.csv", summary)
    print_summary(summary, results.path)
    return summary


def check_one_configuration(results: ResultsFile, run_dir: Path, chash: str) -> None:
    """A run folder holds one configuration: rows of another are never mixed in or reused."""
    other = sorted({r.get("config_hash") for r in results.rows()} - {chash})
    if other:
        raise GooseError(
            f"{run_dir} holds rows of another configuration (config hash {', '.join(map(str, other))}; this one is "
            f"{chash}): a different model, prompts file or setting. Use a new results_dir (or run_dir), or delete "
            "the folder."
        )


def write_config(run_dir: Path, cfg: DictConfig, ident: RunIdentity) -> None:
    """The resolved config and what it pointed at, beside the rows."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["identity"] = {"config_hash": ident.config_hash, "model": ident.model.description,
                         "model_fingerprint": ident.model.fingerprint, "prompts_fingerprint": ident.prompts_fingerprint,
                         "device": str(ident.device), "dtype": str(ident.dtype).replace("torch.", "")}
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(plain)))


def remove_empty(run_dir: Path, stop: Path) -> None:
    """Undo the folder a failed first run created (its lock and config only), and empty parents up to `stop`."""
    for name in (".lock", "config.yaml"):
        (run_dir / name).unlink(missing_ok=True)
    d = run_dir
    stop = stop.resolve()
    while d.resolve() != stop and d.is_dir() and not any(d.iterdir()):
        d.rmdir()
        d = d.parent


def write_summary_csv(path: Path, summary: dict) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary))
        w.writeheader()
        w.writerow(summary)


def load_engine(cfg: DictConfig, drafter: Drafter, identity: ModelIdentity | None = None):
    torch.manual_seed(cfg.seed)
    identity = identity or identify_model(cfg.model)
    model, tok, device, dtype = load_model(cfg.model, cfg.device, cfg.dtype, identity)
    engine = Engine(model, profile=cfg.profile)
    drafter.check_tokenizer(tokenizer_fingerprint(tok))
    if cfg.budget == "auto":
        if not hasattr(drafter, "enable_auto_budget"):
            raise GooseError(f"budget=auto needs a tree drafter (goose, tr, iso3, iso5, pld); not '{cfg.method.name}'.")
        drafter.enable_auto_budget(AutoBudget(cost_curve(engine, identity, device, dtype)))
    return engine, model, tok, device, dtype


def cost_curve(engine: Engine, model: ModelIdentity, device: torch.device, dtype: torch.dtype) -> CostCurve:
    """The verification cost curve of this model on this machine, measured once and cached, keyed by
    the model's content, device, dtype, threads, backend and torch version."""
    from goose.models import cache_root

    where = device.type if device.type == "cpu" else torch.cuda.get_device_name(device).replace(" ", "_")
    key = (f"{model.label}-{model.fingerprint}-{where}-{str(dtype).replace('torch.', '')}"
           f"-threads{torch.get_num_threads()}-{engine.backend}-torch{torch.__version__}.json")
    path = cache_root() / "profiles" / key
    if path.is_file():
        return CostCurve.load(path)
    print(f"[goose] measuring the verification cost curve once ({path})", flush=True)
    widths = list(DEFAULT_WIDTHS)
    curve = CostCurve(widths, engine.measure_cost(widths))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(curve.to_json())
    return curve


def single_prompt_text(cfg: DictConfig) -> str:
    if cfg.prompt_file is None:
        return str(cfg.prompt)
    path = Path(os.path.expanduser(str(cfg.prompt_file)))
    if not path.is_file():
        raise GooseError(f"prompt_file '{path}' does not exist.")
    return path.read_text(encoding="utf-8")


def run_single(cfg: DictConfig, drafter: Drafter) -> None:
    text = single_prompt_text(cfg)
    engine, model, tok, _, _ = load_engine(cfg, drafter)
    stops = stop_ids(tok, model)
    ids = build_input(tok, [], text, cfg.chat_template)
    check_length("prompt", len(ids), engine.max_positions, cfg)
    gen = generate(engine, ids, drafter, cfg.max_new_tokens, stops)
    print(tok.decode(gen.tokens, skip_special_tokens=True))
    print(f"\n[{len(gen.tokens)} tokens, {gen.steps} forwards, tau {gen.tau:.2f}, {gen.tokens_per_s:.1f} tokens/s]")


def reference_key(ident: RunIdentity, ids: list[int], cfg: DictConfig, stops: frozenset[int], env: dict) -> str:
    """Everything that decides AR's tokens for this input (and the conditions its timing is compared under)."""
    return digest({"model": ident.model.fingerprint, "prompt": list(ids), "dtype": env["dtype"],
                   "device": ident.device.type, "device_name": env["device_name"],
                   "threads": ident.conditions["threads"], "backend": ident.conditions["backend"],
                   "max_new_tokens": cfg.max_new_tokens, "stops": sorted(stops), "chat_template": cfg.chat_template,
                   "torch": env["torch"], "transformers": env["transformers"]}, 24)


def decode_all(cfg, drafter, todo: list[Prompt], done: set[str], results: ResultsFile, run_dir: Path,
               ident: RunIdentity):
    from tqdm import tqdm

    from goose.tracking import Tracker

    engine, model, tok, device, dtype = load_engine(cfg, drafter, ident.model)
    stops = stop_ids(tok, model)
    env = environment(device, dtype)
    refs = Path(cfg.results_dir) / "references"
    timer = Timer(engine, cfg.max_new_tokens, stops, cfg.repeats, cfg.speedup_reference, ident.conditions,
                  ReferenceStore(refs), TimingStore(refs / "timings"), trace=cfg.trace)
    for p in todo:  # refuse an over-long prompt before spending time on the others
        check_length(p.id, len(build_input(tok, [], p.text, cfg.chat_template)), engine.max_positions, cfg)
    if cfg.warmup:
        warm = build_input(tok, [], todo[0].text, cfg.chat_template)
        for _ in range(cfg.warmup):
            generate(engine, warm, Drafter(), min(16, cfg.max_new_tokens), stops)
    w = cfg.logging.wandb
    tracker = Tracker(w.mode, w.project, run_name(cfg, ident.model.label), f"{ident.model.label}/{cfg.benchmark.name}",
                      OmegaConf.to_container(cfg, resolve=True), run_dir, w.get("entity"))
    logged = []
    bar = tqdm(todo, desc=f"{cfg.method.name} on {cfg.benchmark.name}", unit="prompt", file=sys.stderr)
    turn = 0
    try:
        for prompt in bar:
            history: list[tuple[str, str]] = []
            for rid, text in turns_of(prompt):
                ids = build_input(tok, history, text, cfg.chat_template)
                check_length(rid, len(ids), engine.max_positions, cfg)
                m = timer.measure(ids, drafter, reference_key(ident, ids, cfg, stops, env), turn)
                turn += 1
                if cfg.trace and getattr(drafter, "trace", None) is not None:
                    write_trace(run_dir / "trace.jsonl", rid, drafter.trace)
                    drafter.trace = None
                if m.source == "self":
                    # Comparing AR with itself proves nothing: check it against HF generate instead.
                    m.ar_tokens = hf_greedy(model, ids, cfg.max_new_tokens, stops)
                if rid not in done:
                    row = row_for(cfg, rid, ids, m, env, ident)
                    results.append(row)
                    tracker.log_prompt(len(logged), row)
                    logged.append(row)
                history.append((text, tok.decode(m.gen.tokens, skip_special_tokens=True)))
    finally:
        bar.close()
        rows = [r for r in results.rows() if r.get("config_hash") == ident.config_hash]
        tracker.finish(summarize(rows), logged)


def write_trace(path: Path, prompt_id: str, steps: list[dict]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for i, step in enumerate(steps):
            f.write(json.dumps({"prompt_id": prompt_id, "step": i, **step}) + "\n")


def run_name(cfg: DictConfig, label: str) -> str:
    return f"{label}-{cfg.benchmark.name}-{cfg.method.name}-B{cfg.budget}-N{cfg.max_new_tokens}"


def check_length(prompt_id: str, n: int, limit: int | None, cfg: DictConfig) -> None:
    if limit is None:
        return
    drafts = (cfg.budget if cfg.budget != "auto" else 64) + 128  # the budget, chain extension and long chains
    if drafts + 1 >= limit:
        fix = (f"Use budget={limit - 130} or less." if limit > 130 else
               "Its context is too short for tree drafts: use method=ar.")
        raise GooseError(
            f"budget={cfg.budget} is too large for this model: a draft may take up to {drafts} positions "
            f"(the budget plus 128 for chain extension), which does not fit its context of {limit} tokens. {fix}"
        )
    if n + cfg.max_new_tokens + drafts > limit:
        raise GooseError(
            f"prompt '{prompt_id}' has {n} tokens; with max_new_tokens={cfg.max_new_tokens} and drafts of "
            f"up to {drafts} nodes it exceeds the model's context of {limit}. Lower max_new_tokens or "
            "shorten the prompt."
        )


def print_summary(s: dict, path: Path) -> None:
    if s["speedup_prompts"]:
        how = "AR is the method" if s["speedup_sources"] == "self" else f"{s['speedup_sources']} AR timing"
        speed = (f"speedup vs AR {s['speedup']:.3f}x ({how}, "
                 f"{s['speedup_prompts']}/{s['prompts']} prompts)")
    else:
        speed = f"speedup vs AR not measured (speedup_reference={s['speedup_reference']})"
    stale = f", {s['speedup_stale']} stale timing(s) left out" if s["speedup_stale"] else ""
    print(
        f"\n{s['method']} on {s['benchmark']} ({s['model']}, B={s['budget']}): {s['prompts']} prompts, "
        f"{s['new_tokens']} tokens\n"
        f"  tau {s['tau']:.3f} (tokens / forwards incl. prefill; mean over prompts {s['mean_tau']:.3f})\n"
        f"  {s['tokens_per_s']:.2f} tokens/s, {speed}{stale}\n"
        f"  lossless {s['lossless']}/{s['prompts']}\n"
        f"  rows: {path}",
        flush=True,
    )
