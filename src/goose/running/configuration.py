"""The decode loop of one configuration over a loaded model: every prompt's turns timed against AR, their
outputs records and rows written as they finish (goose.running.batched: the same at concurrency > 1)."""

from __future__ import annotations

import sys
from pathlib import Path

from goose.drafting.budget import cost_curve
from goose.drafting.contract import Drafter
from goose.engine.backends import apply_backend
from goose.engine.single import Engine
from goose.models.loading import ModelIdentity, load_model, load_tokenizer, stop_ids
from goose.running.inputs import Turn, build_input, check_budget, check_chat_template, token_room, turns_of
from goose.running.loop import generate
from goose.running.registry import prepare_drafter
from goose.running.spec import RunSpec
from goose.running.timing import Timer, hf_reference, reference_key
from goose.storage.fingerprints import digest
from goose.storage.metrics import summarize
from goose.storage.result_files import OutputsFile, ReferenceStore, ResultsFile, TimingStore, token_pieces
from goose.storage.row_schema import make_row
from goose.storage.run_folder import RunIdentity
from goose.storage.run_records import environment, latest_rows, run_name, write_trace


def load_engine(spec: RunSpec, drafter: Drafter, identity: ModelIdentity):
    """The model on its backend, the engine over it, and the drafter prepared (tokenizer, budget=auto)."""
    import torch

    torch.manual_seed(spec.seed)
    if spec.chat_template:  # refused before the weights load, not at the first prompt
        tok = load_tokenizer(spec.model, identity, spec.torch_dtype)
        check_chat_template(tok, True, f"model '{identity.label}' ({identity.description})")
    model, tok, device, dtype = load_model(spec.model, spec.device, spec.dtype, identity)
    engine = Engine(apply_backend(model, spec.backend), profile=spec.profile)
    check_budget(spec.budget.nodes, engine.max_positions, spec.budget.auto)  # before budget=auto measures a curve
    if spec.concurrency == 1:  # at concurrency N the batch arms it (goose.running.batched)
        prepare_drafter(drafter, spec.budget, tok, spec.model.name, lambda: cost_curve(engine, identity, device, dtype))
    return engine, model, tok


class Decoding:
    """One configuration's decode loop over a loaded model: what every turn needs, gathered once."""

    def __init__(self, spec: RunSpec, drafter: Drafter, ident: RunIdentity, run_dir: Path, results: ResultsFile,
                 outputs: OutputsFile):
        self.spec, self.drafter, self.ident, self.run_dir = spec, drafter, ident, run_dir
        self.results, self.outputs = results, outputs
        self.engine, self.model, self.tok = load_engine(spec, drafter, ident.model)
        self.cost_fp = ""  # budget=auto: the cost its trees are pruned against (read back from its cache: cheap)
        if spec.budget.auto and spec.concurrency == 1:
            self.cost_fp = digest(cost_curve(self.engine, ident.model, spec.torch_device, spec.torch_dtype).to_json(),
                                  12)
        self.stops = stop_ids(self.tok, self.model)
        self.env = environment(spec.torch_device, spec.torch_dtype)
        refs = Path(spec.results_dir) / "references"
        self.timer = Timer(self.engine, spec, self.stops, ident.conditions, ReferenceStore(refs),
                           TimingStore(refs / "timings"))

    def ids(self, history: list[tuple[str, str]], text: str) -> list[int]:
        return build_input(self.tok, history, text, self.spec.chat_template)

    def check_room(self, todo) -> None:
        """Refuse a prompt that cannot fit before spending time on the others; say which ones are capped."""
        limit, n = self.engine.max_positions, self.spec.max_new_tokens
        rooms = {p.id: token_room(p.id, len(self.ids([], p.text)), limit, n) for p in todo}
        capped = [i for i, r in rooms.items() if r < n]
        if capped:
            print(f"[goose] {len(capped)} prompt(s) ({', '.join(capped[:8])}{', ...' if len(capped) > 8 else ''}) "
                  f"leave less than max_new_tokens={n} of the model's context ({limit}): they generate until it is "
                  "full, every method alike (rows record capped_at)", flush=True)

    def run(self, prompts, todo, done: set[str]) -> None:
        """Decode `todo` (rows appended as they finish). Under memory=run the finished prompts before them
        are decoded again, untimed, so the drafter reaches each prompt with the state an uninterrupted
        run gives it."""
        from tqdm import tqdm

        from goose.running.tracking import Tracker

        spec, ident = self.spec, self.ident
        self.check_room(todo)
        self.check_cost()
        for _ in range(spec.warmup):
            generate(self.engine, self.ids([], todo[0].text), Drafter(), min(16, spec.max_new_tokens), self.stops)
        w = spec.logging
        tracker = Tracker(w.mode, w.project, run_name(spec, ident.model.label),
                          f"{ident.model.label}/{spec.benchmark.name}",
                          {**spec.plain, "method": spec.plain_section("method")}, self.run_dir, w.entity)
        logged = []
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
                        tokens = generate(self.engine, ids, self.drafter, room, self.stops, spec.sampling).tokens
                    else:
                        row, tokens = self.turn(t, ids, room, len(logged))
                        self.results.append(row)
                        tracker.log_prompt(len(logged), row)
                        logged.append(row)
                    history.append((t.text, self.tok.decode(tokens, skip_special_tokens=True)))
        finally:
            bar.close()
            tracker.finish(summarize(latest_rows(self.results.rows(), ident.config_hash)), logged)

    def turn(self, t: Turn, ids: list[int], room: int, index: int) -> tuple[dict, list[int]]:
        """One timed turn: its measurement, its outputs record (written first, so every row has one), its row.
        `index` alternates who goes first under speedup_reference=interleaved."""
        spec, ident = self.spec, self.ident
        m = self.timer.measure(ids, self.drafter, reference_key(spec, ident, ids, self.stops, self.env, room), index,
                               room)
        if spec.trace:
            write_trace(self.run_dir / "trace.jsonl", t.id, self.drafter.take_trace())
        if m.source == "self":
            # Comparing AR with itself proves nothing: check it against HF generate instead (under
            # sampling, HF's loop and cache with our noise added to its scores).
            m.reference = hf_reference(self.model, ids, room, self.stops, spec.sampling)
        return self.record(t, ids, m, room), m.gen.tokens

    def record(self, t: Turn, ids: list[int], m, room: int) -> dict:
        """The outputs record of a measured turn (written first, so every row has one), and its row."""
        self.outputs.append(t.id, self.ident.config_hash, t.fingerprint, m.gen.tokens,
                            token_pieces(self.tok, m.gen.tokens), m.gen.origins, m.gen.margins, m.gen.runners_up,
                            m.gen.gaps)
        return make_row(self.spec, self.ident, t, ids, m, self.env, room, self.cost_fp)

    def check_cost(self) -> None:
        """budget=auto's trees depend on the cost they were pruned against (this machine's curve: its threads,
        backend, device): rows kept from another are not what this run would add beside them, so it refuses."""
        mine = self.ident.config_hash
        kept = {r.get("cost_fingerprint") for r in self.results.rows() if r.get("config_hash") == mine} - {"", None}
        if kept and kept != {self.cost_fp}:
            from goose.errors import GooseError

            raise GooseError(f"{self.run_dir} holds budget=auto rows pruned against another cost (fingerprint "
                             f"{', '.join(sorted(kept))}; here {self.cost_fp}: another machine, thread count or "
                             "backend, or a re-measured curve). Resume where they were measured, or give another "
                             "results_dir (or run_dir) to run afresh here.")
