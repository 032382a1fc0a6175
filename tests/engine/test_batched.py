"""Many requests in one forward (goose.engine.batched, goose.running.batch_loop): every method batched returns each
request's unbatched AR tokens, with continuous refill, ragged prompts and stops, greedy and sampled."""

import pytest
import torch
from conftest import drafter_for, hf_greedy, many_prompts

from goose.drafting.budget import AutoBudget, CostCurve
from goose.drafting.contract import Drafter
from goose.drafting.cost_surface import CostSurface, batch_cost, choose_widths, surface_rows
from goose.engine.batched import BatchEngine
from goose.engine.draft import Draft
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.registry import method_names


def test_batched_ar_is_ar_row_by_row_with_ragged_prompts_and_refill(tiny):
    prompts = many_prompts()
    want = [hf_greedy(tiny, p, 12 + i) for i, p in enumerate(prompts)]
    engine = BatchEngine(tiny, rows=3)
    reqs = [Request(p, Drafter(), 12 + i) for i, p in enumerate(prompts)]
    got, wall = decode_batch(engine, reqs)
    assert [g.tokens for g in got] == want and engine.active == 0 and wall > 0
    assert all(g.steps == len(g.tokens) for g in got)  # AR: one token per forward
    admitted = [g.admitted_s for g in got]
    assert admitted[:3] == sorted(admitted[:3]) and min(admitted[3:]) > max(admitted[:3])  # 3 at once, then refill
    assert all(g.admitted_s <= g.first_token_s <= g.done_s for g in got)


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m == "goose" else pytest.mark.integration)
                                  for m in method_names()])
def test_every_method_batched_returns_each_requests_ar_tokens(name, tiny, store):
    prompts = many_prompts()
    template, _ = drafter_for(name, extra=[f"rest_datastore={store}"])
    if template.capabilities.tokenizer_bound:
        from tiny import byte_tokenizer

        template.bind_tokenizer(byte_tokenizer(), "tiny")
    want = [generate(Engine(tiny), p, Drafter(), 24).tokens for p in prompts]
    for rows in (1, 4):
        reqs = [Request(p, template.spawn(), 24) for p in prompts]
        got, _ = decode_batch(BatchEngine(tiny, rows=rows), reqs)
        assert [g.tokens for g in got] == want, (name, rows)


def test_sampled_requests_in_a_batch_draw_what_they_draw_alone(tiny):
    prompts = many_prompts()
    s = Sampling(0.8, 0, 0.95, 4)
    want = [generate(Engine(tiny), p, Drafter(), 20, sampling=s).tokens for p in prompts]
    template, _ = drafter_for("goose")
    got, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 20) for p in prompts], sampling=s)
    assert [g.tokens for g in got] == want


def test_a_request_stopping_at_once_and_at_eos_frees_its_row(tiny):
    prompts = many_prompts()
    eos = hf_greedy(tiny, prompts[1], 6)[3]  # the 4th token of prompt 1 is its stop
    want = [generate(Engine(tiny), p, Drafter(), 1 if i == 0 else 15, frozenset({eos})).tokens
            for i, p in enumerate(prompts)]
    reqs = [Request(p, Drafter(), 1 if i == 0 else 15) for i, p in enumerate(prompts)]
    got, _ = decode_batch(BatchEngine(tiny, rows=2), reqs, frozenset({eos}))
    assert [g.tokens for g in got] == want and got[0].tokens == want[0] and len(got[1].tokens) == 4


def test_padding_nodes_never_reach_a_walk_and_rows_keep_their_own_caches(tiny):
    """Row 0 verifies a 6-node chain, row 1 the root alone: row 1's forward carries 5 padding nodes; its result
    is AR's, and row 0's context is untouched by row 1's padding."""
    a, b = many_prompts()[:2]
    engine = BatchEngine(tiny, rows=2)
    ra, ba = engine.admit(a)
    rb, bb = engine.admit(b)
    cont = hf_greedy(tiny, a, 7)
    res = engine.verify([Draft.chain([ba.bonus, *cont[1:6]]), Draft([bb.bonus], [-1])])
    assert res[0].path == [0, 1, 2, 3, 4, 5] and res[0].bonus == cont[6] and res[0].width == 6
    assert res[1].path == [0] and res[1].bonus == hf_greedy(tiny, b, 2)[1] and res[1].width == 1
    assert engine.lengths == [len(a) + 6, len(b) + 1]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_each_row_verifies_its_own_width_of_its_own_tree_as_it_would_alone(attention):
    """Per-row widths in one packed forward: rows of 5, 1 and 3 nodes (trees, not chains), each cut to its width,
    give the path, bonus and logit margins the single-request engine gives that row's cut tree alone; with the
    model's attention either sdpa or eager (goose.engine.packed wraps whichever it finds)."""
    from tiny import tiny_model

    tiny = tiny_model(seed=0)
    tiny.set_attn_implementation(attention)
    prompts = many_prompts()[:3]
    engine = BatchEngine(tiny, rows=3)
    drafts, alone = [], []
    for p in prompts:
        _, pre = engine.admit(p)
        cont = hf_greedy(tiny, p, 3)
        drafts.append(Draft([pre.bonus, cont[1], 5, cont[2], 9, 11], [-1, 0, 0, 1, 1, 2]))
    for p, d, w in zip(prompts, drafts, [5, 1, 3]):
        single = Engine(tiny)
        single.prefill(p)
        alone.append(single.verify(d.prefix(w)))
    got = engine.verify(drafts, width=[5, 1, 3])
    assert [r.width for r in got] == [5, 1, 3]
    for g, a in zip(got, alone):
        assert (g.path, g.bonus) == (a.path, a.bonus)
        assert g.margins == pytest.approx(a.margins, abs=1e-4)
    assert engine.lengths == [len(p) + len(g.path) for p, g in zip(prompts, got)]


def test_a_finished_row_takes_the_next_prompt_and_the_last_row_moves_into_a_freed_one(tiny):
    a, b, c = many_prompts()[:3]
    engine = BatchEngine(tiny, rows=3)
    for p in (a, b, c):
        engine.admit(p)
    assert engine.release(0) == 2 and engine.lengths == [len(c), len(b)]  # c moved from row 2 to row 0
    roots = [hf_greedy(tiny, c, 1)[0], hf_greedy(tiny, b, 1)[0]]
    res = engine.verify([Draft([t], [-1]) for t in roots])
    assert [r.bonus for r in res] == [hf_greedy(tiny, c, 2)[1], hf_greedy(tiny, b, 2)[1]]


def test_the_batch_width_maximises_expected_tokens_per_second_and_is_todays_choice_alone():
    curve = CostCurve([1, 4, 16], [1.0, 1.2, 3.0])
    surface = CostSurface([1, 4], [1, 4, 16], [[1.0, 1.2, 3.0], [1.5, 2.0, 8.0]])
    gains = [1.0, 1.8, 2.4, 2.7, 2.9, 3.0]  # expected tokens from the first k nodes
    # alone: the cost curve's decision, the width with the most tokens per second. The curve is linear between its
    # points: cost(1..6) = 1.0, 1.0667, 1.1333, 1.2, 1.35, 1.5 (1.2 + 1.8 / 12 per node past 4), so gain / cost =
    # 1.0, 1.69, 2.12, 2.25, 2.15, 2.0: width 4, on the curve and on the surface's one-row line (the same points)
    assert [curve(b) for b in (2, 5)] == [pytest.approx(1.0666667), pytest.approx(1.35)]
    assert choose_widths([gains], surface, 1) == [4]
    # four requests: the same tree pays less per request as the forward grows (cost(4, W) rises faster)
    assert choose_widths([gains] * 4, surface, 4) == [4] * 4
    # 2 rows lie a third of the way from 1 row to 4: at width 4, 1.2 + (2.0 - 1.2) / 3 = 1.4667
    assert surface(4, 16) == 8.0 and surface(2, 4) == pytest.approx(1.4666667)
    steep = CostSurface([1, 4], [1, 2, 4], [[1.0, 1.0, 1.0], [1.0, 3.0, 9.0]])
    assert choose_widths([gains] * 4, steep, 4) == [1] * 4 and choose_widths([gains], steep, 1) == [4]
    assert surface_rows(16) == [1, 2, 4, 8, 16] and surface_rows(6) == [1, 2, 4, 6]


def test_budget_auto_in_a_batch_orders_each_tree_most_valuable_first(tiny):
    template, _ = drafter_for("goose@auto")
    template.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.0]), defer=True))
    prompts = many_prompts()
    want = [generate(Engine(tiny), p, Drafter(), 24).tokens for p in prompts]
    surface = CostSurface([1, 4], [1, 64], [[1.0, 1.3], [1.2, 1.6]])
    got, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 24) for p in prompts],
                          cost=surface)
    assert [g.tokens for g in got] == want
    assert any(len(set(g.widths_chosen)) > 1 for g in got)  # the width followed the drafts
    assert all(w <= c for g in got for w, c in zip(g.widths, g.widths_chosen))


def test_budget_auto_in_a_batch_harvests_a_prompt_only_where_the_harvest_pays(tiny, monkeypatch):
    """A prompt's top-k costs the same at any concurrency, a request's share of a forward shrinks with the batch:
    under budget=auto the batch skips a harvest that costs more than HARVEST_SHARE of the request's share of
    its forwards (tokens unchanged); a fixed budget harvests as configured."""
    from goose.drafting.cost_surface import HARVEST_SHARE, harvest_pays

    surface = CostSurface([1, 16], [1, 64], [[0.030, 0.05], [0.060, 0.2]], harvest_s=0.0002)  # 100 tokens: 20 ms
    assert harvest_pays(surface, 100, 128, 1)  # 20 ms against 1% of 128 x 30 ms = 38 ms
    assert not harvest_pays(surface, 100, 128, 16)  # against 1% of 128 x 60 / 16 ms = 5 ms
    assert HARVEST_SHARE == 0.01
    asked = []
    admit = BatchEngine.admit
    monkeypatch.setattr(BatchEngine, "admit", lambda self, p, topk=0, sampler=None: asked.append(topk)
                        or admit(self, p, topk=topk, sampler=sampler))
    prompts = many_prompts()
    want = [generate(Engine(tiny), p, Drafter(), 24).tokens for p in prompts]
    for cost, budget, harvested in [(0.01, "auto", False), (0.0, "auto", True), (0.01, "fixed", True)]:
        template, _ = drafter_for("goose@auto" if budget == "auto" else "goose")
        if budget == "auto":
            template.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.0]), defer=True))
        dear = CostSurface([1, 4], [1, 64], [[0.030, 0.05], [0.040, 0.1]], harvest_s=cost)
        asked.clear()
        got, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 24) for p in prompts],
                              cost=dear)
        assert [g.tokens for g in got] == want
        assert all(k > 0 for k in asked) if harvested else asked and not any(asked)


@pytest.mark.parametrize("name", ["goose@auto", "pld@auto", "suffix@auto"])
def test_every_draft_in_a_batch_carries_the_gains_of_its_own_nodes(name, tiny, monkeypatch):
    """A bare root (nothing matched) once carried the previous tree's gains: the batch paid for widths no row
    could fill, and learned that drafts never pay (on SmolLM2 at concurrency 4: 43 drafted, 0 accepted)."""
    template, _ = drafter_for(name)
    template.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.0]), defer=True))
    seen = []
    verify = BatchEngine.verify

    def checked(self, drafts, **kw):
        seen.extend((len(d.tokens), len(d.gains)) for d in drafts if d.gains is not None)
        return verify(self, drafts, **kw)

    monkeypatch.setattr(BatchEngine, "verify", checked)
    surface = CostSurface([1, 4], [1, 64], [[1.0, 1.3], [1.2, 1.6]])
    decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 24) for p in many_prompts()],
                 cost=surface)
    assert seen and all(n == g for n, g in seen)
    assert any(n == 1 for n, _ in seen)  # bare roots were among them


# --- SGLang's draft format -----------------------------------------------------------------------
class ThroughSglang(Drafter):
    """A drafter whose every draft goes out in SGLang's form (D tokens, D x D mask) and is verified from it;
    what the walk accepted is told to the drafter in its own node order."""

    def __init__(self, inner, size):
        self.inner, self.size, self.config = inner, size, inner.config
        self.capabilities = inner.capabilities

    def start(self, context, prefill):
        self.inner.start(context, prefill)

    def propose(self, context):
        from goose.exports.sglang import bfs_order, from_sglang, to_sglang

        draft = self.inner.propose(context)
        assert len(draft) <= self.size
        self.order = bfs_order(draft.parents)
        tokens, mask = to_sglang(draft, self.size)
        assert len(tokens) == self.size and all(len(r) == self.size for r in mask)
        return from_sglang(tokens, mask)

    def accepted(self, result, context):
        from goose.engine.draft import Verification

        n = len(self.order)
        path = []
        for i in result.path:
            if i >= n:  # a padding node (token 0 under the root): the drafter never proposed it
                break
            path.append(self.order[i])
        back = [0] * n
        for new, old in enumerate(self.order):
            back[old] = new
        rows = None if result.topk_ids is None else back
        self.inner.accepted(Verification(path, result.bonus, None if rows is None else result.topk_ids[rows],
                                         None if rows is None else result.topk_scores[rows], width=n), context)

    def origins(self, path):
        return ["draft"] * (len(path) - 1)


def test_a_drafter_fed_through_sglangs_format_gives_the_same_tokens(tiny):
    from goose.exports.sglang import batch_to_sglang, from_sglang, to_sglang

    prompts = many_prompts()
    want = [generate(Engine(tiny), p, Drafter(), 30).tokens for p in prompts]
    for p, w in zip(prompts, want):
        inner, _ = drafter_for("goose@16")
        got = generate(Engine(tiny), p, ThroughSglang(inner, 128), 30)  # up to the bypass chain of 100
        assert got.tokens == w and got.steps < len(w)
    # the format itself: BFS order, token 0 the root, padding under the root, each row its node and ancestors
    draft = Draft([5, 6, 7, 8], [-1, 0, 1, 0])  # 5 -> 6 -> 7, 5 -> 8
    tokens, mask = to_sglang(draft, 6)
    assert tokens == [5, 6, 8, 7, 0, 0]
    assert mask == [[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0],
                    [1, 0, 0, 0, 1, 0], [1, 0, 0, 0, 0, 1]]
    assert from_sglang(tokens, mask).parents == [-1, 0, 0, 1, 0, 0]
    assert to_sglang(draft, 2) == ([5, 6], [[1, 0], [1, 1]])  # a prefix of the BFS order is a tree
    ids, masks = batch_to_sglang([draft, Draft([9], [-1])], 3)
    assert ids == [5, 6, 8, 9, 0, 0] and len(masks) == 2 * 9


# --- run.py at concurrency N -------------------------------------------------------------------
@pytest.mark.integration
def test_a_run_at_concurrency_3_times_batches_against_batched_ar_and_resumes(tiny_folder, tmp_path, run_goose):
    import json

    from conftest import hash_of

    from goose.storage.result_files import ResultsFile

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"def f{i}(x):\n    return x + {i}\n" * 2})
                               + "\n" for i in range(5)))
    base = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}", "n_prompts=null",
            "max_new_tokens=20", f"results_dir={tmp_path / 'res'}", "concurrency=3", "budget=60"]
    for method in ("method=goose", "method=tr", "method=ar"):
        summary, out = run_goose(*base, method)
        assert summary["lossless"] == 5 and summary["prompts"] == 5, out
        folder = summary["run_dir"]
        assert "-c3-" in folder
        rows = ResultsFile(f"{folder}/results.csv").rows()
        assert {r["concurrency"] for r in rows} == {"3"} and all(r["equality"] == "exact" for r in rows)
        walls = {r["pass_wall_s"] for r in rows}
        assert len(walls) == 1 and all(r["pass_tokens"] == "100" for r in rows)  # one batch of 5 x 20 tokens
        assert sum(float(r["wall_s"]) for r in rows) == pytest.approx(float(rows[0]["pass_wall_s"]), rel=1e-4)
        assert all(float(r["admitted_s"]) <= float(r["first_token_s"]) <= float(r["done_s"]) for r in rows)
        if method != "method=ar":
            assert all(r["speedup_source"] == "interleaved" and r["ar_pass_wall_s"] for r in rows)
            assert summary["speedup"] == pytest.approx(float(rows[0]["ar_pass_wall_s"]) / float(
                rows[0]["pass_wall_s"]), rel=1e-3)
    # concurrency=1 is today's configuration: the same hash as a run that never heard of concurrency
    assert hash_of("method=goose", "concurrency=1") == hash_of("method=goose") != hash_of("method=goose",
                                                                                         "concurrency=3")
    # resume: one row lost; memory=run (TR) decodes every prompt again in its batches and writes the lost one
    tr = next((tmp_path / "res").glob("*/jsonl/tr/*-c3-*")) / "results.csv"
    lines = tr.read_text().splitlines(keepends=True)
    tr.write_text("".join(lines[:-1]))
    before = {r["prompt_id"]: r for r in ResultsFile(tr).rows()}
    summary, out = run_goose(*base, "method=tr")
    assert "1 prompt(s) to go" in out and "decoding the 4 finished prompt(s) again" in out
    after = ResultsFile(tr).rows()
    assert len(after) == 5 and summary["prompts"] == 5 and summary["lossless"] == 5
    assert all(r == before[r["prompt_id"]] for r in after[:4])  # kept rows untouched
    with pytest.raises(GooseError, match="speedup_reference=cached"):
        run_goose(*base, "method=goose", "speedup_reference=cached")


@pytest.mark.integration
def test_a_grown_batched_run_gives_an_uninterrupted_runs_rows(tiny_folder, run_goose, tmp_path):
    """At concurrency > 1 a row depends on the requests beside it (TR's shared matrix under memory=run): a run
    grown from 1 to 3 prompts gives exactly the rows of a run of 3 prompts from the start, never the 1-prompt
    run's row for the first prompt (HumanEval/0 once kept steps 11 where an uninterrupted run has 13)."""
    import json

    from goose.storage.result_files import ResultsFile

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"def f{i}(x):\n    return x * {i} + {i}\n" * 2})
                               + "\n" for i in range(3)))
    base = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
            "max_new_tokens=24", "concurrency=4", "method=tr", "memory=run", "speedup_reference=none"]

    def rows(summary):
        return {r["prompt_id"]: (r["steps"], r["new_tokens"]) for r in ResultsFile(f"{summary['run_dir']}/results.csv")
                .rows()}

    grown = [run_goose(*base, f"results_dir={tmp_path / 'a'}", f"n_prompts={n}")[0] for n in (1, 3)]
    whole, _ = run_goose(*base, f"results_dir={tmp_path / 'b'}", "n_prompts=3")
    assert grown[0]["run_dir"] != grown[1]["run_dir"]  # the prompt list is part of the configuration
    assert rows(grown[1]) == rows(whole) and grown[1]["tau"] == whole["tau"]
    # and a resumed run of the same list adds the lost row as the uninterrupted run has it
    csv = f"{whole['run_dir']}/results.csv"
    lines = open(csv).read().splitlines(keepends=True)
    open(csv, "w").write("".join(lines[:2]))
    resumed, out = run_goose(*base, f"results_dir={tmp_path / 'b'}", "n_prompts=3")
    assert "decoding the 1 finished prompt(s) again" in out
    assert rows(resumed) == rows(grown[1])


@pytest.mark.integration  # runs bench's concurrency sweep end to end
def test_the_concurrency_bench_starts_every_level_from_empty_memory(tiny, capsys, tmp_path):
    """memory=run state is shared by a drafter's spawns: a level must not start from the previous level's prompts
    (SuffixDecoding's tree once held every answer of concurrency 1 at concurrency 4: tau 2.2 became 8.8)."""
    from argparse import Namespace

    from tiny import byte_tokenizer

    from goose.measurement import concurrency_sweep as concurrency
    from goose.running.registry import build_drafters

    prompts = [("tiny", p) for p in many_prompts()]

    def tau_at(levels, json=None, figure=None):
        built = build_drafters(["tr@60:run", "suffix@16:run"], "smollm2-135m")  # no budget: auto, not this test's
        args = Namespace(max_new_tokens=16, concurrency=levels, repeats=1, json=json, figure=figure, model="tiny")
        out = concurrency.run(args, tiny, byte_tokenizer(), frozenset(), prompts, built, None, None,
                              torch.device("cpu"), torch.float32, None)
        return {(r["method"], r["concurrency"]): r["tau"] for r in out}

    both, alone = tau_at([1, 2], tmp_path / "bench.json", tmp_path / "bench.png"), tau_at([2])
    for method in ("tr:run", "suffix@16:run"):  # its label: TR has no budget but auto
        assert both[(method, 2)] == alone[(method, 2)], method
    import json

    written = json.loads((tmp_path / "bench.json").read_text())  # --json, and --figure drawn from it
    assert written["threads"] >= 1 and written["backend"] == "eager" and (tmp_path / "bench.png").stat().st_size


def test_the_batch_reads_the_gains_scaled_by_what_the_walks_gave():
    from goose.drafting.cost_surface import Calibration

    c = Calibration()
    assert c.factor == 1 and c.scaled([1.0, 1.8, 2.4]) == [1.0, 1.8, 2.4]
    for _ in range(24):  # promised 1.4 extra tokens a step, given one in 4 steps (6 of the 24)
        c.observe([1.0, 1.8, 2.4], 3, 1 if _ % 4 else 2)
    # a prior of 8 request-steps at 1, then given / promised = (8 + 6) / (8 + 24 x 1.4) = 14 / 41.6
    assert c.factor == pytest.approx(0.3365385)
    # the first node is the bonus, kept as it is; the extra 2 tokens are scaled: 1 + 2 x 14 / 41.6
    assert c.scaled([1.0, 3.0]) == [1.0, pytest.approx(1.6730769)]
    surface = CostSurface([1, 4], [1, 2, 4], [[1.0, 1.05, 1.2], [1.2, 1.5, 2.2]])
    hopeful = [[1.0, 1.6, 2.2, 2.9]] * 4
    assert choose_widths(hopeful, surface, 4) == [4] * 4
    assert max(choose_widths([c.scaled(g) for g in hopeful], surface, 4)) < 4


# --- a batch that stops drafting where no width pays ----------------------------------------------
def test_the_pause_lasts_until_fewer_requests_are_in_flight_or_its_steps_run_out():
    from goose.running.batch_loop import Pause

    p = Pause()
    assert p.drafts(16)
    p.decided(3, 16)  # a width paid: keep drafting
    assert p.drafts(16)
    p.decided(1, 16)  # none paid at 16 requests: a short pause first, 4 steps
    assert [p.drafts(16) for _ in range(4)] == [False] * 4
    assert p.drafts(16)  # the steps ran out: look again
    p.decided(1, 16)
    assert not p.drafts(16) and not p.drafts(17) and p.drafts(15)  # one request fewer: look again at once
    p.decided(4, 15)
    assert p.drafts(15)


def test_the_pause_doubles_while_no_width_pays_and_is_short_again_once_one_does():
    from goose.running.batch_loop import Pause

    def paused_for(p, rows=16):
        n = 0
        while not p.drafts(rows):
            n += 1
        return n

    p = Pause()
    lengths = []
    for _ in range(6):
        p.decided(1, 16)
        lengths.append(paused_for(p))
    assert lengths == [4, 8, 16, 32, 64, 64]
    p.decided(6, 16)
    p.decided(1, 16)
    assert paused_for(p) == 4  # a width paid in between: the shortest pause again


def test_drafting_overhead_counts_only_for_widths_that_draft():
    surface = CostSurface([1, 16], [1, 2, 3], [[1.0, 1.0, 1.0], [1.0, 1.3, 1.7]])
    gains = [[1.0, 1.43, 1.9]] * 16
    assert choose_widths(gains, surface, 16) == [3] * 16  # 1.9 / 1.7 > 1.43 / 1.3 > 1
    assert choose_widths(gains, surface, 16, overhead_s=0.05) == [1] * 16  # 16 x 0.05 of drafting: AR wins
    assert choose_widths(gains[:1], surface, 1, overhead_s=0.05) == [3]  # one request: the same overhead is small


def test_each_request_verifies_the_nodes_that_pay_for_themselves_in_a_packed_forward():
    """One request with a long trusted chain among bare roots drafts alone: a packed forward costs its nodes (and
    a share of a node per padding query), not every row padded to its width."""
    from goose.drafting.cost_surface import PADDING_SHARE

    surface = CostSurface([1, 4], [1, 2, 4, 8], [[1.0, 1.0, 1.0, 1.2], [1.0, 1.1, 1.3, 2.0]])
    chain = [1.0 + 0.9 * k for k in range(8)]  # each node adds 0.9 expected tokens
    weak = [1.0, 1.05, 1.08]
    widths = choose_widths([chain, weak, weak, weak], surface, 4)
    assert widths[0] == 8 and widths[1:] == [1, 1, 1]
    # 8 + 1 + 1 + 1 = 11 nodes, padded to 4 x 8 = 32 queries: 21 padding ones at a quarter of a node each, so the
    # forward costs 4 rows at the mean width (11 + 21 / 4) / 4 = 4.0625 nodes: 1.3 + (0.0625 / 4) x (2.0 - 1.3)
    assert PADDING_SHARE == 0.25
    assert batch_cost(surface, widths) == pytest.approx(1.3109375)
    assert surface(4, 8) == 2.0  # where every row padded to 8 nodes (the bare roots' 7 each) would cost 2.0


PAUSING = ["goose@auto", "goose-suffix@auto", "tr@auto", "suffix@auto:run", "pld@auto"]


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m == "goose@auto" else pytest.mark.integration)
                                  for m in PAUSING])
def test_a_batch_that_pauses_drafting_still_returns_ar_tokens(name, tiny, monkeypatch):
    """An overhead so large no width pays: the batch pauses, drafters are told `skipped` (SuffixDecoding keeps
    its request's tokens), then a cheaper one resumes drafting mid-request: AR's tokens throughout."""
    import goose.running.batch_loop as batch_decode

    if "suffix" in name:
        pytest.importorskip("arctic_inference")
    template, _ = drafter_for(name)
    template.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.0]), defer=True))
    prompts = many_prompts()
    want = [generate(Engine(tiny), p, Drafter(), 24).tokens for p in prompts]
    surface = CostSurface([1, 4], [1, 64], [[1.0, 1.3], [1.2, 2.0]])
    skipped = []
    real_skipped = type(template).skipped

    def counting(self, context):
        skipped.append(len(context))
        real_skipped(self, context)

    monkeypatch.setattr(type(template), "skipped", counting)
    monkeypatch.setattr(batch_decode, "DRAFT_OVERHEAD", 1e6)
    got, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 24) for p in prompts], cost=surface)
    assert [g.tokens for g in got] == want and skipped
    assert all(max(g.widths) == 1 for g in got)  # nothing but roots verified

    looks = iter([1] + [4] * 1000)  # pause at 4 requests in flight, draft again once fewer are
    monkeypatch.setattr(batch_decode, "choose_widths", lambda gains, cost, n, overhead_s=0.0: [next(looks)] * n)
    got, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 24) for p in prompts], cost=surface)
    assert [g.tokens for g in got] == want
    assert any(w > 1 for g in got for w in g.widths)


def test_a_batch_harvests_a_prompt_only_when_its_drafter_first_needs_it(tiny):
    """The batch's prefill leaves the prompt's top-k for later (topk_later): the table a drafter reads first is
    the one an immediate harvest gives, and a request that never drafts never computes it."""
    from goose.drafting.tree import AdjacencyHarvester

    prompt = many_prompts()[1]
    now = Engine(tiny).prefill(prompt, topk=4)
    engine = BatchEngine(tiny, rows=2)
    _, later = engine.admit(prompt, topk=4)
    assert later.topk_ids is None and later.bonus == now.bonus
    calls = []
    wrapped = later.topk_later
    later.topk_later = lambda: calls.append(1) or wrapped()
    eager, lazy = AdjacencyHarvester(4, True), AdjacencyHarvester(4, True)
    eager.start(prompt + [now.bonus], now)
    lazy.start(prompt + [later.bonus], later)
    assert not calls and lazy.pending
    assert lazy.table.unigram == eager.table.unigram and lazy.table.bigram == eager.table.bigram and calls == [1]
    _ = lazy.table
    assert calls == [1] and not lazy.pending
