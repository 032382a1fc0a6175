"""One configuration at concurrency N > 1: its prompts decoded N at a time (continuous batching,
goose.running.batch_loop), each batch timed against batched AR over the same prompts (goose.running.batch_timing), every
request compared with unbatched AR (the reference store's, computed alone where it is missing).

A batch is a pass over the run's prompts: their first turns, then (multi-turn benchmarks) their second turns
after the first answers. A request's row depends on the requests beside it (the state they share under
memory=run, budget=auto's widths, its share of the pass), so the prompt list is part of the configuration
(goose.storage.run_folder.config_hash) and a resumed run decodes every prompt again in the same batches, writing only
the rows it lacks: they are an uninterrupted run's.
"""

from __future__ import annotations

from goose.drafting.contract import Drafter
from goose.drafting.cost_surface import cost_surface
from goose.engine.batched import BatchEngine
from goose.running.batch_timing import BatchTimer
from goose.running.configuration import Decoding
from goose.running.inputs import token_room, turns_of
from goose.running.registry import prepare_drafter
from goose.running.timing import Measured, reference_entry, reference_key
from goose.storage.fingerprints import digest
from goose.storage.run_records import write_trace


class BatchedDecoding(Decoding):
    def __init__(self, spec, drafter, ident, run_dir, results, outputs):
        super().__init__(spec, drafter, ident, run_dir, results, outputs)
        self.batch = BatchEngine(self.engine.model, spec.concurrency, profile=spec.profile)
        surface = None
        if spec.budget.auto:
            surface = cost_surface(self.batch, ident.model, spec.torch_device, spec.torch_dtype, spec.concurrency)
        prepare_drafter(drafter, spec.budget, self.tok, spec.model.name, lambda: surface.curve(1), defer=True)
        self.cost_fp = digest(surface.to_json(), 12) if surface is not None else ""
        self.batch_timer = BatchTimer(self.batch, self.stops, spec.repeats, spec.speedup_reference, spec.sampling,
                                      surface, spec.trace)

    def reference(self, ids: list[int], room: int) -> tuple[str, dict]:
        """Unbatched AR's tokens for this input: from the store, or decoded alone now (untimed)."""
        key = reference_key(self.spec, self.ident, ids, self.stops, self.env, room)
        ref = self.timer.refs.get(key)
        if ref is None or "margins" not in ref:
            from goose.running.loop import generate

            ref = reference_entry(generate(self.engine, ids, Drafter(), room, self.stops, self.spec.sampling))
            self.timer.refs.put(key, ref)
        return key, ref

    def run(self, prompts, todo, done: set[str]) -> None:
        from goose.running.tracking import Tracker

        spec, ident = self.spec, self.ident
        self.check_room(todo)
        self.check_cost()
        order = prompts
        if len(order) > len(todo):
            print(f"[goose] concurrency {spec.concurrency}: decoding the {len(order) - len(todo)} finished prompt(s) "
                  "again in their batches, so the rows it adds are an uninterrupted run's", flush=True)
        w = spec.logging
        tracker = Tracker(w.mode, w.project, f"{ident.model.label}-{spec.benchmark.name}-{spec.method.name}-"
                          f"c{spec.concurrency}", f"{ident.model.label}/{spec.benchmark.name}",
                          {**spec.plain, "method": spec.plain_section("method")}, self.run_dir, w.entity)
        histories = {p.id: [] for p in order}
        turns = {p.id: turns_of(p) for p in order}
        logged = []
        try:
            for k in range(max(len(t) for t in turns.values())):  # one batch per turn index
                batch = [(p, turns[p.id][k]) for p in order if len(turns[p.id]) > k]
                items = []
                for p, t in batch:
                    ids = self.ids(histories[p.id], t.text)
                    items.append((ids, token_room(t.id, len(ids), self.engine.max_positions, spec.max_new_tokens)))
                if k == 0:
                    for _ in range(spec.warmup):
                        self.batch_timer._pass([(ids, min(16, n)) for ids, n in items[: spec.concurrency]], Drafter)
                print(f"[goose] {spec.method.name} at concurrency {spec.concurrency}: {len(items)} request(s)"
                      + (f", turn {k + 1}" if k else ""), flush=True)
                measured = self.batch_timer.measure(items, self.drafter, k)
                for i, ((p, t), (ids, room)) in enumerate(zip(batch, items)):
                    gen = measured["gens"][i]
                    histories[p.id].append((t.text, self.tok.decode(gen.tokens, skip_special_tokens=True)))
                    if t.id in done:
                        continue
                    key, ref = self.reference(ids, room)
                    source = "self" if "ar_gens" not in measured and "ar_pass_wall_s" in measured else (
                        "interleaved" if "ar_pass_wall_s" in measured else "none")
                    m = Measured(gen, ref, self.batch_timer.ar_timing(measured, i, ident.conditions), source, key,
                                 {k2: measured.get(k2, "") for k2 in ("pass_wall_s", "pass_tokens", "ar_pass_wall_s")})
                    if spec.trace:
                        write_trace(self.run_dir / "trace.jsonl", t.id, measured["drafters"][i].take_trace())
                    row = self.record(t, ids, m, room)
                    self.results.append(row)
                    tracker.log_prompt(len(logged), row)
                    logged.append(row)
        finally:
            from goose.storage.metrics import summarize
            from goose.storage.run_records import latest_rows

            tracker.finish(summarize(latest_rows(self.results.rows(), ident.config_hash)), logged)
