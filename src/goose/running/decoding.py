"""The decode loop of one configuration over a loaded model: every prompt's turns timed against AR, their
outputs records and rows written as they finish.

`Decoding` is what every concurrency shares: the model and its single-request engine (the reference), the checks
before the first prompt, the tracker, each turn's trace, outputs record and row. What differs is how the drafter is
armed (`prepare`) and how the turns are scheduled (`decode`): `SingleDecoding` one prompt at a time
(goose.running.loop), `BatchedDecoding` N at a time.

BatchedDecoding: One configuration at concurrency N > 1: its prompts decoded N at a time (continuous batching,
goose.running.batch_loop), each batch timed against batched AR over the same prompts (goose.running.timing.BatchTimer),
every request compared with unbatched AR (the reference store's, computed alone where it is missing).

A batch is a pass over the run's prompts: their first turns, then (multi-turn benchmarks) their second turns
after the first answers. A request's row depends on the requests beside it (the state they share under
memory=run, budget=auto's widths, its share of the pass), so the prompt list is part of the configuration
(goose.storage.run_folder.config_hash) and a resumed run decodes every prompt again in the same batches, writing only
the rows it lacks: they are an uninterrupted run's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from goose.benchmarks.prompts import Prompt
from goose.core.identity import ModelIdentity
from goose.drafting.budget import CostCurve, cost_curve, profile_key
from goose.drafting.contract import Drafter
from goose.drafting.cost_surface import CostSurface, cost_surface
from goose.engine.backends import apply_backend
from goose.engine.batched import BatchEngine
from goose.engine.single import Engine
from goose.models.loading import load_model, load_tokenizer, stop_ids
from goose.models.reference import hf_reference
from goose.running.inputs import Turn, build_input, check_budget, check_chat_template, token_room, turns_of
from goose.running.loop import generate, loop_stop
from goose.running.pruning_cost import cost_refusal, fingerprint, keep_cost, kept_cost, pruned_against
from goose.running.registry import prepare_drafter
from goose.running.rows import make_row
from goose.running.spec import RunSpec
from goose.running.timing import BatchTimer, Measured, Timer, reference_entry, reference_key
from goose.running.tracking import open_tracker
from goose.storage.metrics import summarize
from goose.storage.result_files import OutputsFile, ReferenceStore, ResultsFile, TimingStore, token_pieces
from goose.storage.run_folder import RunIdentity
from goose.storage.run_records import environment, latest_rows, write_trace


def load_engine(spec: RunSpec, identity: ModelIdentity) -> tuple[Engine, Any, Any]:
    """The model on its backend and the single-request engine over it: (engine, model, tokenizer)."""
    import torch

    torch.manual_seed(spec.seed)
    if spec.chat_template:  # refused before the weights load, not at the first prompt
        tok = load_tokenizer(spec.model, identity, spec.torch_dtype)
        check_chat_template(tok, True, f"model '{identity.label}' ({identity.description})")
    model, tok, _, _ = load_model(spec.model, spec.device, spec.dtype, identity)
    engine = Engine(apply_backend(model, spec.backend), profile=spec.profile)
    check_budget(spec.budget.nodes, engine.max_positions, spec.budget.auto)  # before budget=auto measures a curve
    return engine, model, tok


def prepare_single(spec: RunSpec, drafter: Drafter, engine: Engine, tok, identity: ModelIdentity,
                   kept: CostCurve | None = None) -> CostCurve | None:
    """Arm the drafter for one request at a time (its tokenizer; budget=auto: `kept`, the curve a resumed run's rows
    were pruned against, else this machine's cost curve, measured or read back from its cache); returns the curve
    (None without budget=auto)."""
    def curve() -> CostCurve:
        return kept if kept is not None else cost_curve(engine, identity, spec.torch_device, spec.torch_dtype)

    prepare_drafter(drafter, spec.budget, tok, spec.model.name, curve)
    return curve() if spec.budget.auto else None


class Decoding:
    """One configuration's decode loop over a loaded model: what every turn needs, gathered once."""

    def __init__(self, spec: RunSpec, drafter: Drafter, ident: RunIdentity, run_dir: Path, results: ResultsFile,
                 outputs: OutputsFile):
        self.spec, self.drafter, self.ident, self.run_dir = spec, drafter, ident, run_dir
        self.results, self.outputs = results, outputs
        self.engine, self.model, self.tok = load_engine(spec, ident.model)
        self.cost = None  # budget=auto: what prepare() armed the drafter with
        self.cost_fp = self.prepare()  # budget=auto: the cost its trees are pruned against
        self.stops = stop_ids(self.tok, self.model)
        self.env = environment(spec.torch_device, spec.torch_dtype)
        refs = Path(spec.results_dir) / "references"
        self.timer = Timer(self.engine, spec, self.stops, ident.conditions, ReferenceStore(refs),
                           TimingStore(refs / "timings"))
        self.tracker = None
        self.logged: list[dict] = []  # this run's rows, in order: the tracker's steps

    def prepare(self) -> str:
        """Arm the drafter for this loop; returns the cost fingerprint its rows record."""
        raise NotImplementedError

    def measured_on(self) -> str:
        """The kind of machine a budget=auto cost is measured on (goose.drafting.budget.profile_key)."""
        return profile_key(self.engine, self.ident.model, self.spec.torch_device, self.spec.torch_dtype)

    def kept(self, kind):
        """budget=auto: the cost (CostCurve or CostSurface) the folder's rows were pruned against, where it can be
        had here (goose.running.pruning_cost.kept_cost: refused now where it cannot be), else None."""
        if not self.spec.budget.auto:
            return None
        return kept_cost(self.run_dir, self.results.rows(), self.ident.config_hash, self.measured_on(), kind)

    def priced(self, cost) -> str:
        """Record the cost the drafter was armed with; its fingerprint (blank without budget=auto)."""
        self.cost = cost
        return fingerprint(cost) if cost is not None else ""

    def decode(self, prompts: list[Prompt], todo: list[Prompt], done: set[str]) -> None:
        """Decode `todo` (and what they need decoded before them), `log`ging each new turn's row."""
        raise NotImplementedError

    def run(self, prompts: list[Prompt], todo: list[Prompt], done: set[str]) -> None:
        """Decode `todo` (rows appended as they finish); the tracker sees every row and, at the end, the summary."""
        self.check_room(todo)
        self.check_cost()
        if self.cost is not None:
            keep_cost(self.run_dir, self.cost, self.measured_on())
        self.tracker, self.logged = open_tracker(self.spec, self.ident.model.label, self.run_dir), []
        try:
            self.decode(prompts, todo, done)
        finally:
            self.tracker.finish(summarize(latest_rows(self.results.rows(), self.ident.config_hash)), self.logged)

    def log(self, row: dict) -> None:
        self.results.append(row)
        self.tracker.log_prompt(len(self.logged), row)
        self.logged.append(row)

    def ids(self, history: list[tuple[str, str]], text: str) -> list[int]:
        return build_input(self.tok, history, text, self.spec.chat_template)

    def check_room(self, todo: list[Prompt]) -> None:
        """Refuse a prompt that cannot fit before spending time on the others; say which ones are capped."""
        limit, n = self.engine.max_positions, self.spec.max_new_tokens
        rooms = {p.id: token_room(p.id, len(self.ids([], p.text)), limit, n) for p in todo}
        capped = [i for i, r in rooms.items() if r < n]
        if capped:
            print(f"[goose] {len(capped)} prompt(s) ({', '.join(capped[:8])}{', ...' if len(capped) > 8 else ''}) "
                  f"leave less than max_new_tokens={n} of the model's context ({limit}): they generate until it is "
                  "full, every method alike (rows record capped_at)", flush=True)

    def record(self, t: Turn, ids: list[int], m: Measured, room: int, drafter: Drafter) -> dict:
        """A measured turn's trace (trace=true: `drafter`'s steps), its outputs record (written first, so every
        row has one) and its row."""
        if self.spec.trace:
            write_trace(self.run_dir / "trace.jsonl", t.id, drafter.take_trace())
        self.outputs.append(t.id, self.ident.config_hash, t.fingerprint, m.gen.tokens,
                            token_pieces(self.tok, m.gen.tokens), m.gen.origins, m.gen.margins, m.gen.runners_up,
                            m.gen.gaps)
        return make_row(self.spec, self.ident, t, ids, m, self.env, room, self.cost_fp)

    def check_cost(self) -> None:
        """budget=auto's trees depend on the cost they were pruned against (this machine's curve: its threads,
        backend, device): rows kept from another are not what this run would add beside them, so it refuses."""
        kept = pruned_against(self.results.rows(), self.ident.config_hash)
        if kept and kept != {self.cost_fp}:
            raise cost_refusal(self.run_dir, kept, self.cost_fp, "another kind of machine, thread count or backend")


class SingleDecoding(Decoding):
    """Concurrency 1: one prompt at a time, each turn timed against AR on the same prompt (goose.running.timing)."""

    def prepare(self) -> str:
        return self.priced(prepare_single(self.spec, self.drafter, self.engine, self.tok, self.ident.model,
                                          self.kept(CostCurve)))

    def decode(self, prompts: list[Prompt], todo: list[Prompt], done: set[str]) -> None:
        """Under memory=run the finished prompts before `todo` are decoded again, untimed, so the drafter reaches
        each prompt with the state an uninterrupted run gives it."""
        from tqdm import tqdm

        spec = self.spec
        for _ in range(spec.warmup):
            generate(self.engine, self.ids([], todo[0].text), Drafter(), min(16, spec.max_new_tokens), self.stops)
        order = prompts if self.drafter.capabilities.memory else todo
        if len(order) > len(todo):
            print(f"[goose] memory=run: decoding the {len(order) - len(todo)} finished prompt(s) again, untimed, to "
                  "rebuild the state they leave", flush=True)
        bar = tqdm(order, desc=f"{spec.method.name} on {spec.benchmark.name}", unit="prompt", file=sys.stderr)
        try:
            for prompt in bar:
                history: list[tuple[str, str]] = []
                for t in turns_of(prompt):
                    ids = self.ids(history, t.text)
                    room = token_room(t.id, len(ids), self.engine.max_positions, spec.max_new_tokens)
                    if t.id in done:  # needed only for what follows it (a later turn, the drafter's memory): no row
                        tokens = generate(self.engine, ids, self.drafter, room, self.stops, spec.sampling,
                                          spec.stop_at_loop).tokens
                    else:
                        row, tokens = self.turn(t, ids, room, len(self.logged))
                        self.log(row)
                    history.append((t.text, self.tok.decode(tokens, skip_special_tokens=True)))
        finally:
            bar.close()

    def turn(self, t: Turn, ids: list[int], room: int, index: int) -> tuple[dict, list[int]]:
        """One timed turn: its measurement and its row. `index` alternates who goes first under
        speedup_reference=interleaved."""
        spec, ident = self.spec, self.ident
        m = self.timer.measure(ids, self.drafter, reference_key(spec, ident, ids, self.stops, self.env, room), index,
                               room)
        if m.source == "self":
            # Comparing AR with itself proves nothing: check it against HF generate instead (under
            # sampling, HF's loop and cache with our noise added to its scores).
            m.reference = hf_reference(self.model, ids, room, self.stops, spec.sampling)
            if spec.stop_at_loop:  # Hugging Face decodes on past the loop: its answer as far as ours goes
                kept = loop_stop(m.reference["tokens"])
                m.reference = {k: v[:kept] for k, v in m.reference.items()}
        return self.record(t, ids, m, room, self.drafter), m.gen.tokens


def batch_engine(spec: RunSpec, model, identity: ModelIdentity, drafter: Drafter, tok,
                 profile: bool, kept: CostSurface | None = None) -> tuple[BatchEngine, CostSurface | None]:
    """A batch engine of `spec.concurrency` rows over `model`; budget=auto: the cost surface up to that many requests
    (measured once per machine, then cached) and the drafter armed deferred, so the batch picks every request's
    width (`kept`: the surface a resumed run's rows were pruned against). What a concurrency=N run and goose-serve
    both stand on."""
    batch = BatchEngine(model, spec.concurrency, profile=profile)
    surface = None
    if spec.budget.auto:
        surface = kept if kept is not None else cost_surface(batch, identity, spec.torch_device, spec.torch_dtype,
                                                             spec.concurrency)
    prepare_drafter(drafter, spec.budget, tok, spec.model.name, lambda: surface.curve(1), defer=True)
    return batch, surface


class BatchedDecoding(Decoding):
    """Concurrency N: every turn index of the run's prompts one pass, N requests in flight, against batched AR."""

    def __init__(self, spec: RunSpec, drafter: Drafter, ident: RunIdentity, run_dir: Path, results: ResultsFile,
                 outputs: OutputsFile):
        super().__init__(spec, drafter, ident, run_dir, results, outputs)
        self.batch_timer = BatchTimer(self.batch, self.stops, spec.repeats, spec.speedup_reference, spec.sampling,
                                      self.surface, spec.trace, spec.stop_at_loop)

    def prepare(self) -> str:
        """The batch engine over the same model; budget=auto: the cost surface up to N requests, the batch picks
        every request's width from (the drafter is armed deferred)."""
        self.batch, self.surface = batch_engine(self.spec, self.engine.model, self.ident.model, self.drafter, self.tok,
                                                self.spec.profile, self.kept(CostSurface))
        return self.priced(self.surface)

    def reference(self, ids: list[int], room: int) -> tuple[str, dict]:
        """Unbatched AR's tokens for this input: from the store, or decoded alone now (untimed)."""
        key = reference_key(self.spec, self.ident, ids, self.stops, self.env, room)
        ref = self.timer.refs.get(key)
        if ref is None or "margins" not in ref:
            ref = reference_entry(generate(self.engine, ids, Drafter(), room, self.stops, self.spec.sampling,
                                           self.spec.stop_at_loop))
            self.timer.refs.put(key, ref)
        return key, ref

    def decode(self, prompts: list[Prompt], todo: list[Prompt], done: set[str]) -> None:
        """Every prompt, finished ones included: a row depends on the requests beside it, so the batches are the
        uninterrupted run's and only the rows it lacks are written."""
        spec = self.spec
        order = prompts
        if len(order) > len(todo):
            print(f"[goose] concurrency {spec.concurrency}: decoding the {len(order) - len(todo)} finished prompt(s) "
                  "again in their batches, so the rows it adds are an uninterrupted run's", flush=True)
        histories = {p.id: [] for p in order}
        turns = {p.id: turns_of(p) for p in order}
        for k in range(max(len(t) for t in turns.values())):  # one batch per turn index
            batch = [(p, turns[p.id][k]) for p in order if len(turns[p.id]) > k]
            items = []
            for p, t in batch:
                ids = self.ids(histories[p.id], t.text)
                items.append((ids, token_room(t.id, len(ids), self.engine.max_positions, spec.max_new_tokens)))
            if k == 0:
                for _ in range(spec.warmup):
                    self.batch_timer.decode([(ids, min(16, n)) for ids, n in items[: spec.concurrency]], Drafter)
            print(f"[goose] {spec.method.name} at concurrency {spec.concurrency}: {len(items)} request(s)"
                  + (f", turn {k + 1}" if k else ""), flush=True)
            measured = self.batch_timer.measure(items, self.drafter, k)
            for i, ((p, t), (ids, room)) in enumerate(zip(batch, items)):
                histories[p.id].append((t.text, self.tok.decode(measured.gens[i].tokens, skip_special_tokens=True)))
                if t.id in done:
                    continue
                key, ref = self.reference(ids, room)
                m = measured.measured(i, ref, key, self.ident.conditions)
                self.log(self.record(t, ids, m, room, measured.drafters[i]))
