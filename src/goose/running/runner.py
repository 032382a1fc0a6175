"""One configuration, end to end: config -> run spec -> model + prompts -> decode loop -> rows -> summary.

Each concern has its own module: running.spec (every setting, typed and checked), running.registry
(methods by name), running.inputs (prompts to ids), running.decoding (the engine and the shared run
scaffold), running.loop (the step), running.timing (AR references and speedups), storage.row_schema (the
rows), storage.result_files (durable files), storage.run_records (summaries), storage.run_folder (identity,
hash and folder), storage.code_identity (the code a row comes from, and resuming rows of other code).
"""

from __future__ import annotations

import sys
from pathlib import Path

from goose.core.fingerprints import prompts_fingerprint
from goose.core.sections import ModelSpec, section
from goose.drafting.contract import NO_MEMORY, Drafter
from goose.errors import GooseError
from goose.models.loading import identify_model, load_tokenizer, stop_ids
from goose.running.decoding import BatchedDecoding, Decoding, SingleDecoding, load_engine, prepare_single
from goose.running.inputs import (
    benchmark_prompts,
    build_input,
    check_length,
    single_prompt_text,
    turns_of,
)
from goose.running.loop import generate
from goose.running.registry import make_drafter, prepare_drafter
from goose.running.spec import DeviceError, RunSpec
from goose.running.timing import conditions
from goose.storage.code_identity import check_code, code_fingerprint
from goose.storage.metrics import summarize
from goose.storage.result_files import OutputsFile, ResultsFile, RunLock
from goose.storage.run_folder import (
    Interrupted,
    RunIdentity,
    check_one_configuration,
    config_hash,
    data_fingerprint,
    default_run_dir,
    remove_empty,
    write_config,
)
from goose.storage.run_records import latest_rows, print_summary, write_summary

__all__ = ["Interrupted", "exit_status", "run", "checked_spec"]


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


def checked_spec(cfg) -> RunSpec:
    """The run spec of a composed config. A missing device is said together with a missing model, so a user
    learns both at once (model=vicuna-7b on a machine with neither a GPU nor the weights)."""
    try:
        return RunSpec.from_config(cfg)
    except DeviceError as e:
        try:
            from omegaconf import OmegaConf

            model = cfg.model if isinstance(cfg, dict) else OmegaConf.to_container(cfg.model, resolve=True)
            identify_model(section(ModelSpec, "model", model))
        except GooseError as missing:
            raise GooseError(f"{e} Also: {missing}") from None
        raise


def run(cfg, sweep_id: str = "") -> dict | None:
    """Run one (model, benchmark, method, budget) configuration; return its summary."""
    spec = checked_spec(cfg)
    drafter = make_drafter(spec.method, spec.budget)
    if spec.memory == "run" and spec.memory_label == NO_MEMORY:
        print(f"[goose] {spec.method.name} keeps no state across prompts: memory=run changes nothing (rows record "
              "memory=none)", flush=True)
    if spec.sampling.greedy and (spec.top_k or spec.top_p < 1):
        print("[goose] temperature=0 decodes greedily: top_k and top_p change nothing (and are not recorded in "
              "the config hash)", flush=True)
    if spec.single_prompt:
        return run_single(spec, drafter)
    model = identify_model(spec.model)
    every, prompts = benchmark_prompts(spec)
    if drafter.capabilities.tokenizer_bound:  # its data (REST's datastore) must exist before it is fingerprinted
        prepare_drafter(drafter, spec.budget, load_tokenizer(spec.model, model, spec.torch_dtype), spec.model.name)
    pfp, dfp = prompts_fingerprint(every), data_fingerprint(spec.method.config)
    chash = config_hash(spec, model, pfp, dfp, [p.id for p in prompts])
    ident = RunIdentity(model, pfp, dfp, chash, conditions(spec.torch_device, spec.backend, sweep_id),
                        code_fingerprint(type(drafter)))
    run_dir = Path(spec.run_dir).expanduser() if spec.run_dir else default_run_dir(spec, model.label, chash)
    asked = [t.id for p in prompts for t in turns_of(p)]
    existed = run_dir.exists()
    with RunLock(run_dir):
        results, outputs = ResultsFile(run_dir / "results.csv"), OutputsFile(run_dir / "outputs.jsonl")
        try:
            for d in results.repair():
                print(f"[goose] damaged row moved to {results.path.name}.damaged, its prompt is decoded again: {d}",
                      flush=True)
            rows = results.rows()
            check_one_configuration(rows, run_dir, chash)
            note = check_code(rows, run_dir, chash, ident.code_fingerprint, spec.accept_other_code)  # before decoding
            if note:
                print(note, flush=True)
            done = finished(rows, outputs, chash)
            todo = [p for p in prompts if not all(t.id in done for t in turns_of(p))]
            if done:
                print(f"[goose] resuming: {len(done)} row(s) already in {results.path}, {len(todo)} prompt(s) to go",
                      flush=True)
            if todo:
                write_config(run_dir, spec, ident)
                decoding_for(spec)(spec, drafter, ident, run_dir, results, outputs).run(prompts, todo, done)
        except KeyboardInterrupt:
            kept = len(finished(results.rows(), outputs, chash))
            if not kept and not existed:
                remove_empty(run_dir, Path(spec.results_dir))
            raise Interrupted(kept, results.path) from None
        except BaseException:
            if not existed and not results.rows():
                remove_empty(run_dir, Path(spec.results_dir))
            raise
        rows = latest_rows(results.rows(), chash, asked)
        summary = summarize(rows)
        summary.update({"model": model.label, "benchmark": spec.benchmark.name, "method": spec.method.name,
                        "budget": spec.budget_label, "memory": spec.memory_label, "config_hash": chash,
                        "speedup_reference": spec.speedup_reference,
                        "speedup_sources": ",".join(sorted({str(r.get("speedup_source")) for r in rows})),
                        "run_dir": str(run_dir)})
        write_summary(run_dir, summary)
    print_summary(summary, results.path, prunes=spec.method.cls.capabilities.auto_budget)
    return summary


def decoding_for(spec: RunSpec) -> type[Decoding]:
    """The decode loop of a configuration: one prompt at a time at concurrency 1, continuous batching above."""
    return SingleDecoding if spec.concurrency == 1 else BatchedDecoding


def finished(rows: list[dict], outputs: OutputsFile, chash: str) -> set[str]:
    """Prompt ids whose row and outputs record are both intact and of this configuration; any other is
    decoded again (a damaged outputs line is noticed here, not by the next equality report)."""
    kept = outputs.read()
    for d in outputs.damaged:
        print(f"[goose] damaged outputs line, its prompt is decoded again: {d}", flush=True)
    ok = {i for i, r in kept.items() if r.get("config_hash") == chash}
    return {r["prompt_id"] for r in rows if r.get("config_hash") == chash and r["prompt_id"] in ok}


def run_single(spec: RunSpec, drafter: Drafter) -> None:
    text = single_prompt_text(spec.prompt, spec.prompt_file)
    identity = identify_model(spec.model)
    engine, model, tok = load_engine(spec, identity)
    prepare_single(spec, drafter, engine, tok, identity)  # decoded alone, whatever the concurrency
    stops = stop_ids(tok, model)
    ids = build_input(tok, [], text, spec.chat_template)
    check_length("prompt", len(ids), engine.max_positions, spec.max_new_tokens)
    gen = generate(engine, ids, drafter, spec.max_new_tokens, stops, spec.sampling, spec.stop_at_loop)
    print(tok.decode(gen.tokens, skip_special_tokens=True))
    print(f"\n[{len(gen.tokens)} tokens, {gen.steps} forwards, tau {gen.tau:.2f}, {gen.tokens_per_s:.1f} tokens/s]")


