"""One configuration, end to end: config -> drafter, model + prompts -> decode loop -> rows -> summary.

Each concern has its own module: settings (checks, hashing), methods (drafters), inputs (prompts
to ids), run_folder (where rows go), timing (AR references and speedups), records (rows, summaries).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from goose.backends import apply_backend
from goose.benchmarks import Prompt
from goose.budget import AutoBudget, Budget, cost_curve
from goose.decode import generate
from goose.drafter import NO_MEMORY, Drafter, memory_label
from goose.engine import Engine
from goose.errors import GooseError
from goose.fingerprints import prompts_fingerprint
from goose.inputs import benchmark_prompts, build_input, check_length, single_prompt_text, token_room, turns_of
from goose.methods import budget_label, make_drafter
from goose.metrics import summarize
from goose.models import ModelIdentity, identify_model, load_model, stop_ids
from goose.records import environment, print_summary, row_for, run_name, write_summary_csv, write_trace
from goose.results import OutputsFile, ReferenceStore, ResultsFile, RunLock, TimingStore, token_pieces
from goose.run_folder import (
    Interrupted,
    RunIdentity,
    check_one_configuration,
    default_run_dir,
    remove_empty,
    write_config,
)
from goose.sampling import Sampling
from goose.settings import config_hash, resolved_backend, resolved_device_dtype, validate
from goose.timing import Timer, conditions, hf_greedy, reference_key

__all__ = ["Interrupted", "exit_status", "run"]


def exit_status(call) -> int:
    """Run `call()` as a command: 0 when it finishes, 2 after printing a GooseError (`error: ...`), 130
    after printing what an interrupted run kept."""
    try:
        call()
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Interrupted as e:
        print(f"\n{e}", file=sys.stderr)
        return 130
    return 0


def prepare(cfg: DictConfig) -> tuple[DictConfig, Drafter, Budget]:
    """Check the settings and build the drafter, before any model or data is touched. The returned
    config records the drafter's full configuration and the budget its rows carry."""
    validate(cfg)
    budget = Budget.parse(cfg.budget)
    drafter, record = make_drafter(cfg.method, budget, cfg.get("memory"))
    if cfg.get("memory") == "run" and memory_label(drafter.config) == NO_MEMORY:
        print(f"[goose] {cfg.method.name} keeps no state across prompts: memory=run changes nothing (rows record "
              "memory=none)", flush=True)
    sampling = Sampling.from_config(cfg)
    if sampling.greedy and (sampling.top_k or sampling.top_p < 1):
        print("[goose] temperature=0 decodes greedily: top_k and top_p change nothing (and are not recorded in "
              "the config hash)", flush=True)
    cfg = copy.deepcopy(cfg)  # the caller's config stays as given
    with open_dict(cfg):
        cfg.budget = budget_label(drafter, cfg.budget)
        cfg.memory = memory_label(drafter.config)
        cfg.method.drafter = OmegaConf.create(record)
    return cfg, drafter, budget


def run(cfg: DictConfig, sweep_id: str = "") -> dict | None:
    """Run one (model, benchmark, method, budget) configuration; return its summary."""
    cfg, drafter, budget = prepare(cfg)
    device, dtype = resolved_device_dtype(cfg)
    backend = resolved_backend(cfg, device, dtype)
    if cfg.prompt is not None or cfg.prompt_file is not None:
        return run_single(cfg, drafter, budget)
    model = identify_model(cfg.model)
    every, prompts = benchmark_prompts(cfg)
    pfp = prompts_fingerprint(every)
    chash = config_hash(cfg, {"model_fingerprint": model.fingerprint, "prompts_fingerprint": pfp,
                              "device": device.type, "dtype": str(dtype), "backend": backend})
    ident = RunIdentity(model, pfp, chash, device, dtype, conditions(device, backend, sweep_id))
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
                decode_all(cfg, drafter, budget, prompts, todo, done, results, run_dir, ident)
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
                    "budget": cfg.budget, "memory": cfg.memory, "config_hash": chash,
                    "speedup_reference": cfg.speedup_reference,
                    "speedup_sources": ",".join(sorted({str(r.get("speedup_source")) for r in rows})),
                    "run_dir": str(run_dir)})
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    write_summary_csv(run_dir / "summary.csv", summary)
    print_summary(summary, results.path)
    return summary


def load_engine(cfg: DictConfig, drafter: Drafter, budget: Budget, identity: ModelIdentity | None = None):
    torch.manual_seed(cfg.seed)
    identity = identity or identify_model(cfg.model)
    model, tok, device, dtype = load_model(cfg.model, cfg.device, cfg.dtype, identity)
    engine = Engine(apply_backend(model, resolved_backend(cfg, device, dtype)), profile=cfg.profile)
    if drafter.capabilities.tokenizer_bound:
        drafter.bind_tokenizer(tok, cfg.model.name)  # REST names its default datastore by model config
    if budget.auto:
        drafter.enable_auto_budget(AutoBudget(cost_curve(engine, identity, device, dtype)))
    return engine, model, tok, device, dtype


def run_single(cfg: DictConfig, drafter: Drafter, budget: Budget) -> None:
    text = single_prompt_text(cfg)
    engine, model, tok, _, _ = load_engine(cfg, drafter, budget)
    stops = stop_ids(tok, model)
    ids = build_input(tok, [], text, cfg.chat_template)
    check_length("prompt", len(ids), engine.max_positions, cfg, budget.nodes)
    gen = generate(engine, ids, drafter, cfg.max_new_tokens, stops, Sampling.from_config(cfg))
    print(tok.decode(gen.tokens, skip_special_tokens=True))
    print(f"\n[{len(gen.tokens)} tokens, {gen.steps} forwards, tau {gen.tau:.2f}, {gen.tokens_per_s:.1f} tokens/s]")


def decode_all(cfg: DictConfig, drafter: Drafter, budget: Budget, prompts: list[Prompt], todo: list[Prompt],
               done: set[str], results: ResultsFile, run_dir: Path, ident: RunIdentity) -> None:
    """Decode `todo` (rows appended as they finish). Under memory=run the finished prompts before them
    are decoded again, untimed, so the drafter reaches each prompt with the state an uninterrupted
    run gives it."""
    from tqdm import tqdm

    from goose.tracking import Tracker

    engine, model, tok, device, dtype = load_engine(cfg, drafter, budget, ident.model)
    stops = stop_ids(tok, model)
    env = environment(device, dtype)
    refs = Path(cfg.results_dir) / "references"
    sampling = Sampling.from_config(cfg)
    timer = Timer(engine, cfg.max_new_tokens, stops, cfg.repeats, cfg.speedup_reference, ident.conditions,
                  ReferenceStore(refs), TimingStore(refs / "timings"), trace=cfg.trace, sampling=sampling)
    capped = []
    for p in todo:  # refuse a prompt that cannot fit before spending time on the others
        ids = build_input(tok, [], p.text, cfg.chat_template)
        if token_room(p.id, len(ids), engine.max_positions, cfg, budget.nodes) < cfg.max_new_tokens:
            capped.append(p.id)
    if capped:
        print(f"[goose] {len(capped)} prompt(s) ({', '.join(capped[:8])}{', ...' if len(capped) > 8 else ''}) leave "
              f"less than max_new_tokens={cfg.max_new_tokens} of the model's context ({engine.max_positions}): "
              "they generate until it is full, AR alike (rows record capped_at)", flush=True)
    for _ in range(cfg.warmup):
        generate(engine, build_input(tok, [], todo[0].text, cfg.chat_template), Drafter(),
                 min(16, cfg.max_new_tokens), stops)
    w = cfg.logging.wandb
    tracker = Tracker(w.mode, w.project, run_name(cfg, ident.model.label), f"{ident.model.label}/{cfg.benchmark.name}",
                      OmegaConf.to_container(cfg, resolve=True), run_dir, w.get("entity"))
    logged = []
    outputs = OutputsFile(run_dir / "outputs.jsonl")
    order = prompts if drafter.capabilities.memory else todo
    if len(order) > len(todo):
        print(f"[goose] memory=run: decoding the {len(order) - len(todo)} finished prompt(s) again, untimed, to "
              "rebuild the state they leave", flush=True)
    bar = tqdm(order, desc=f"{cfg.method.name} on {cfg.benchmark.name}", unit="prompt", file=sys.stderr)
    turn = 0
    try:
        for prompt in bar:
            history: list[tuple[str, str]] = []
            for rid, text in turns_of(prompt):
                ids = build_input(tok, history, text, cfg.chat_template)
                room = token_room(rid, len(ids), engine.max_positions, cfg, budget.nodes)
                if rid in done:  # needed only for what follows it (a later turn, the drafter's memory): no row
                    gen = generate(engine, ids, drafter, room, stops, sampling)
                    history.append((text, tok.decode(gen.tokens, skip_special_tokens=True)))
                    continue
                m = timer.measure(ids, drafter, reference_key(ident, ids, cfg, stops, env, room), turn, room)
                turn += 1
                if cfg.trace:
                    write_trace(run_dir / "trace.jsonl", rid, drafter.take_trace())
                if m.source == "self":
                    # Comparing AR with itself proves nothing: check it against HF generate instead (under
                    # sampling, HF's loop and cache with our noise added to its scores).
                    m.ar_tokens = hf_greedy(model, ids, room, stops, sampling)
                row = row_for(cfg, rid, prompt.category, ids, m, env, ident)
                row["capped_at"] = room if room < cfg.max_new_tokens else ""
                outputs.append(rid, ident.config_hash, m.gen.tokens, token_pieces(tok, m.gen.tokens), m.gen.origins)
                results.append(row)
                tracker.log_prompt(len(logged), row)
                logged.append(row)
                history.append((text, tok.decode(m.gen.tokens, skip_special_tokens=True)))
    finally:
        bar.close()
        rows = [r for r in results.rows() if r.get("config_hash") == ident.config_hash]
        tracker.finish(summarize(rows), logged)
