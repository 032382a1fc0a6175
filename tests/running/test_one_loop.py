"""One loop above the engines (goose.running.loop.Flight, goose.running.decoding.Decoding,
goose.running.timing): a request's step is the same code alone and in a batch, so one request run through the
batched loop gives the single loop's tokens, steps and row; both timers alternate and restore memory alike; one
tracker name serves every concurrency."""

import pytest
import torch
from conftest import drafter_for

from goose.drafting.contract import Capabilities, Drafter
from goose.engine.batched import BatchEngine
from goose.engine.single import Engine
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.timing import BatchMeasurement, BatchTimer, alternating, from_saved_memory


def some_prompts():
    g = torch.Generator().manual_seed(5)
    base = torch.randint(0, 250, (10,), generator=g).tolist()
    return [base * 3, torch.randint(0, 250, (17,), generator=g).tolist(), (base[:6] + [3, 3]) * 3]


@pytest.mark.parametrize("name", ["ar", "pld", "goose", "tr", "lookahead", "goose@16:run"])
def test_one_request_at_a_time_in_the_batched_loop_steps_as_the_single_loop(name, tiny):
    """rows=1: the batch engine verifies each request alone, so every step is the single loop's: the same tokens,
    forwards, widths, origins and drafter counters (under memory=run the spawned drafters share what one drafter
    keeps, in the same order)."""
    alone, _ = drafter_for(name)
    want = [generate(Engine(tiny), p, alone, 24) for p in some_prompts()]
    template, _ = drafter_for(name)
    got, _ = decode_batch(BatchEngine(tiny, rows=1), [Request(p, template.spawn(), 24) for p in some_prompts()])
    for g, w in zip(got, want):
        assert (g.tokens, g.steps, g.widths, g.origins, g.stats) == (w.tokens, w.steps, w.widths, w.origins,
                                                                     w.stats), name
        assert g.margins == pytest.approx(w.margins, abs=1e-4)
        assert g.widths_chosen == []  # no cost surface: no width was chosen for it


WALL_CLOCK = {"wall_s", "wall_s_std", "tokens_per_s", "ttft_s", "tpot_s", "speedup", "ar_wall_s", "ar_tokens_per_s",
              "admitted_s", "first_token_s", "done_s", "pass_wall_s", "ar_pass_wall_s", "timed_at", "ar_at",
              "speedup_stale", "row_check"}


@pytest.mark.integration
@pytest.mark.parametrize("method", [["method=goose", "budget=60"],
                                    ["method=tr", "budget=60", "memory=run", "repeats=2"]])
def test_a_configuration_at_concurrency_1_gives_the_single_loops_rows_through_the_batched_loop(
        method, tiny_folder, prompt_file, tmp_path, run_goose, monkeypatch):
    """The run scaffolding (goose.running.decoding.Decoding) is shared and only the schedule differs: forced
    through the batched loop at concurrency 1, a configuration writes the single loop's rows, every column but the
    wall clock's and the batch's own (pass_tokens: blank alone)."""
    from goose.running import runner
    from goose.running.decoding import BatchedDecoding
    from goose.storage.result_files import OutputsFile, ResultsFile

    base = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
            "n_prompts=null", "max_new_tokens=20", *method]
    single, _ = run_goose(*base, f"results_dir={tmp_path / 'single'}")
    monkeypatch.setattr(runner, "decoding_for", lambda spec: BatchedDecoding)
    batched, out = run_goose(*base, f"results_dir={tmp_path / 'batched'}")
    assert "at concurrency 1: 4 request(s)" in out  # it did go through the batch
    rows = [ResultsFile(f"{s['run_dir']}/results.csv").rows() for s in (single, batched)]
    assert len(rows[0]) == len(rows[1]) == 4
    for a, b in zip(*rows):
        assert a["pass_tokens"] == "" and b["pass_tokens"] == "80"  # one pass over the 4 prompts: 4 x 20 tokens
        assert {k: v for k, v in a.items() if k not in WALL_CLOCK | {"pass_tokens"}} == \
            {k: v for k, v in b.items() if k not in WALL_CLOCK | {"pass_tokens"}}
    outputs = [OutputsFile(f"{s['run_dir']}/outputs.jsonl").read() for s in (single, batched)]
    assert outputs[0] == outputs[1]
    assert single["run_dir"].split("/")[-1] == batched["run_dir"].split("/")[-1]


def test_two_configurations_that_differ_in_budget_or_memory_get_two_tracker_names_at_any_concurrency(tmp_path):
    """At concurrency 4 the tracker was once named by model, benchmark, method and concurrency alone: budget=60 and
    budget=auto were one W&B run name. Both loops now open it through one function."""
    from conftest import spec_of

    from goose.running.tracking import open_tracker

    def name(*overrides):
        return open_tracker(spec_of(*overrides), "tiny", tmp_path).name

    assert name("concurrency=4", "method=goose", "budget=60") == "tiny-humaneval-goose-B60-Mprompt-N64-c4"
    assert name("concurrency=4", "method=goose", "budget=auto") == "tiny-humaneval-goose-Bauto-Mprompt-N64-c4"
    assert name("concurrency=4", "method=tr", "memory=run") != name("concurrency=4", "method=tr", "memory=prompt")
    assert name("method=goose", "budget=60") == "tiny-humaneval-goose-B60-Mprompt-N64"  # concurrency 1 as before


# --- the timers' shared parts ---------------------------------------------------------------------------------
def test_who_goes_first_alternates_with_the_repeat_and_the_turn():
    calls = []

    def run(who):
        return lambda: calls.append(who) or who

    assert alternating(3, 0, run("m"), run("ar")) == (["m"] * 3, ["ar"] * 3)
    assert calls == ["ar", "m", "m", "ar", "ar", "m"]  # turn 0: AR first at repeats 0 and 2
    calls.clear()
    alternating(2, 1, run("m"), run("ar"))
    assert calls == ["m", "ar", "ar", "m"]  # turn 1: the method first at repeat 0
    calls.clear()
    assert alternating(2, 0, run("m"), None) == (["m", "m"], [])  # no AR timed: the method alone


class Remembers(Drafter):
    """A drafter whose memory is a list: save_memory copies it."""

    capabilities = Capabilities(memory=True)

    def __init__(self):
        super().__init__()
        self.seen = []

    def save_memory(self):
        return list(self.seen)

    def restore_memory(self, saved):
        self.seen = list(saved)


def test_every_timed_repeat_starts_from_the_memory_the_first_found():
    d = Remembers()
    d.seen = ["earlier prompt"]

    def decode():
        d.seen.append("this prompt")
        return list(d.seen)

    again = from_saved_memory(d, decode)
    d.seen.append("changed after saving")  # the state was saved when the repeats were set up, not at the first call
    first = again()
    assert first == ["earlier prompt", "changed after saving", "this prompt"]
    assert again() == again() == ["earlier prompt", "this prompt"]  # repeats 2 and 3: from the saved state
    assert d.seen == ["earlier prompt", "this prompt"]  # the last leaves what one run leaves


def test_a_batch_measurement_shares_ar_by_tokens_and_says_where_ar_came_from():
    from goose.running.batch_loop import Served

    gens = [Served(tokens=[1, 2, 3], steps=2, wall_s=0.75), Served(tokens=[4], steps=1, wall_s=0.25)]
    m = BatchMeasurement(gens, [Drafter(), Drafter()], wall_s=1.0, tokens=4, repeats=2, source="interleaved",
                         ar_wall_s=2.0, ar_tokens=[3, 1])
    cond = {"host": "h"}
    t = m.ar_timing(0, cond)
    assert t["wall_s"] == 1.5  # 2.0 s x 3 / 4 tokens
    assert t["tokens_per_s"] == 2.0  # 4 tokens / 2.0 s
    assert t["repeats"] == 2 and t["host"] == "h"
    assert m.ar_timing(1, cond)["wall_s"] == 0.5  # 2.0 x 1 / 4
    one = m.measured(1, {"tokens": [4]}, "k", cond)
    assert one.gen is gens[1] and one.source == "interleaved" and one.key == "k"
    assert one.batch == {"pass_wall_s": 1.0, "pass_tokens": 4, "ar_pass_wall_s": 2.0}
    untimed = BatchMeasurement(gens, [], wall_s=1.0, tokens=4, repeats=1, source="none")
    assert untimed.ar_timing(0, cond) is None
    assert untimed.measured(0, {}, "k", cond).batch == {"pass_wall_s": 1.0, "pass_tokens": 4, "ar_pass_wall_s": ""}


@pytest.mark.parametrize("mode", ["interleaved", "none"])
def test_the_batch_timer_times_ar_beside_the_method_or_takes_ars_own_pass(mode, tiny):
    items = [(p, 8) for p in some_prompts()]
    timer = BatchTimer(BatchEngine(tiny, rows=2), frozenset(), 2, mode, None)
    ar = timer.measure(items, drafter_for("ar")[0])  # AR itself: its own pass is the timing
    assert ar.source == "self" and ar.ar_wall_s == ar.wall_s and ar.ar_tokens == [8, 8, 8]
    template, _ = drafter_for("goose")
    m = timer.measure(items, template, turn=1)
    assert [g.tokens for g in m.gens] == [g.tokens for g in ar.gens] and len(m.drafters) == 3
    assert m.tokens == 24 and sum(g.wall_s for g in m.gens) == pytest.approx(m.wall_s)
    if mode == "interleaved":
        assert m.source == "interleaved" and m.ar_wall_s > 0 and m.ar_tokens == [8, 8, 8]
    else:
        assert m.source == "none" and m.ar_wall_s is None and m.ar_timing(0, {}) is None
