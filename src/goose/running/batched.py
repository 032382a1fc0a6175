"""One configuration at concurrency N > 1: its prompts decoded N at a time (continuous batching,
goose.running.batch_loop), each batch timed against batched AR over the same prompts (goose.running.timing.BatchTimer),
every request compared with unbatched AR (the reference store's, computed alone where it is missing).

A batch is a pass over the run's prompts: their first turns, then (multi-turn benchmarks) their second turns
after the first answers. A request's row depends on the requests beside it (the state they share under
memory=run, budget=auto's widths, its share of the pass), so the prompt list is part of the configuration
(goose.storage.run_folder.config_hash) and a resumed run decodes every prompt again in the same batches, writing only
the rows it lacks: they are an uninterrupted run's.
"""

from __future__ import annotations

from pathlib import Path

from goose.benchmarks.prompts import Prompt
from goose.core.fingerprints import digest
from goose.drafting.contract import Drafter
from goose.drafting.cost_surface import cost_surface
from goose.engine.batched import BatchEngine
from goose.running.configuration import Decoding
from goose.running.inputs import token_room, turns_of
from goose.running.loop import generate
from goose.running.registry import prepare_drafter
from goose.running.spec import RunSpec
from goose.running.timing import BatchTimer, reference_entry, reference_key
from goose.storage.result_files import OutputsFile, ResultsFile
from goose.storage.run_folder import RunIdentity


class BatchedDecoding(Decoding):
    """Concurrency N: every turn index of the run's prompts one pass, N requests in flight, against batched AR."""

    def __init__(self, spec: RunSpec, drafter: Drafter, ident: RunIdentity, run_dir: Path, results: ResultsFile,
                 outputs: OutputsFile):
        super().__init__(spec, drafter, ident, run_dir, results, outputs)
        self.batch_timer = BatchTimer(self.batch, self.stops, spec.repeats, spec.speedup_reference, spec.sampling,
                                      self.surface, spec.trace)

    def prepare(self) -> str:
        """The batch engine over the same model; budget=auto: the cost surface up to N requests, the batch picks
        every request's width from (the drafter is armed deferred)."""
        spec = self.spec
        self.batch = BatchEngine(self.engine.model, spec.concurrency, profile=spec.profile)
        self.surface = None
        if spec.budget.auto:
            self.surface = cost_surface(self.batch, self.ident.model, spec.torch_device, spec.torch_dtype,
                                        spec.concurrency)
        prepare_drafter(self.drafter, spec.budget, self.tok, spec.model.name, lambda: self.surface.curve(1),
                        defer=True)
        return digest(self.surface.to_json(), 12) if self.surface is not None else ""

    def reference(self, ids: list[int], room: int) -> tuple[str, dict]:
        """Unbatched AR's tokens for this input: from the store, or decoded alone now (untimed)."""
        key = reference_key(self.spec, self.ident, ids, self.stops, self.env, room)
        ref = self.timer.refs.get(key)
        if ref is None or "margins" not in ref:
            ref = reference_entry(generate(self.engine, ids, Drafter(), room, self.stops, self.spec.sampling))
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
