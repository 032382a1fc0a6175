"""The scorecard's power section: what each comparison's sweeps ask for (the plan written beside the rows) and
what the missing prompts cost, against hand-computed numbers; and a page without a plan that says so."""

import pandas as pd
import pytest

from goose.analysis.artifacts import make, rows_for
from goose.analysis.claims.card import scorecard
from goose.analysis.claims.power import CLOCK, TAU, cost, find_plan, n_reached, stop_shares
from goose.analysis.load import load_rows
from goose.experiments.claims_plan import grid, write_plan
from goose.paths import CLAIMS_PLAN
from goose.storage.result_files import ResultsFile


def put(root, method, walls, timed=None):
    """A configuration's rows on model m, HumanEval: prompt i took walls[i] seconds; `timed` = (ar_wall_s,
    threads, repeats) for a clock row."""
    budget = "fixed" if method == "pld" else "60"
    chash = f"{method}-{'timed' if timed else 'tau'}"
    f = ResultsFile(root / "m" / "humaneval" / method / chash / "results.csv")
    for i, w in enumerate(walls):
        clock = ({"speedup_reference": "interleaved", "speedup_source": "interleaved", "speedup": 2.0,
                  "ar_wall_s": timed[0], "threads": timed[1], "repeats": timed[2]} if timed
                 else {"speedup_reference": "none", "speedup_source": "none", "threads": 1, "repeats": 1})
        f.append({"model": "m", "benchmark": "humaneval", "method": method, "budget": budget, "prompt_id": str(i),
                  "new_tokens": 120, "steps": 40, "tau": 3.0, "wall_s": w, "tokens_per_s": 120 / w,
                  "lossless": True, "config_hash": chash, "timed_at": "2026-12-03T10:00:00+0000",
                  "device_name": "cpu", "dtype": "float32", "model_fingerprint": "abcdef0123",
                  "chat_template": False, **clock})


PLAN = """# sweeps: first second
model,benchmark,method,budget,chat_template,timed,repeats,n_prompts
m,humaneval,goose,60,False,False,1,5
m,humaneval,pld,60,False,False,1,5
m,humaneval,goose,60,False,True,2,2
m,humaneval,pld,60,True,False,1,2
"""


def test_the_rest_costs_what_its_own_prompts_cost(tmp_path):
    """goose: 3 of 5 prompts at 10/20/30 s (2 missing x 20 s); PLD 3 of 5 at 40 s (2 x 40 s); two prompts new to
    the cell need AR's reference (2 x 120 tokens x 0.1 core-s a token: AR's 6 s on 2 threads for 120 tokens in
    the clock row); the clock job asks 2 prompts at 2 repeats where one ran at 1 repeat: (2 + 6) s x 2 threads
    = 16 core-s a repeat, 32 a prompt, 64 for the two. PLD with the chat template has no rows: costed by its raw
    ones (2 x 40 s), and its cell's two new prompts need AR's references (2 x 120 x 0.1 s)."""
    put(tmp_path, "goose", [10.0, 20.0, 30.0])
    put(tmp_path, "pld", [40.0, 40.0, 40.0])
    put(tmp_path, "goose", [2.0], timed=(6.0, 2, 1))
    (tmp_path / CLAIMS_PLAN).write_text(PLAN)
    rows = load_rows(tmp_path)
    plan, why = find_plan(rows)
    assert why == ""
    assert plan.attrs["sweeps"] == "first second" and len(plan) == 4
    jobs = cost(rows, plan)
    chat = jobs[jobs.chat_template].set_index("method")
    assert chat.loc["pld", "done"] == 0 and chat.loc["pld", "core_h_left"] * 3600 == pytest.approx(80.0)
    assert chat.loc["ar (references)", "core_h_left"] * 3600 == pytest.approx(24.0)
    assert chat.loc["ar (references)", "references"] == 2
    jobs = jobs[~jobs.chat_template].set_index(["method", "part"])
    assert jobs.loc[("goose", TAU), "done"] == 3 and jobs.loc[("pld", TAU), "done"] == 3
    assert jobs.loc[("goose", TAU), "core_h_left"] * 3600 == pytest.approx(40.0)
    assert jobs.loc[("pld", TAU), "core_h_left"] * 3600 == pytest.approx(80.0)
    assert jobs.loc[("ar (references)", TAU), "core_h_left"] * 3600 == pytest.approx(24.0)
    assert jobs.loc[("goose", CLOCK), "done"] == 0  # its repeats are not the plan's: a new run folder
    assert jobs.loc[("goose", CLOCK), "core_h_left"] * 3600 == pytest.approx(64.0)
    assert jobs.loc[("goose", TAU), "core_h_taken"] * 3600 == pytest.approx(60.0)


def test_each_comparison_is_held_to_what_its_sweeps_ask(tmp_path):
    """Claim 2's goose vs spine-only reads goose (asked 5) and spine-only (asked 3, all run): it is held to 3."""
    put(tmp_path, "goose", [10.0, 20.0, 30.0])
    for m in ("spine-only", "branches-only"):
        put(tmp_path, m, [5.0, 5.0, 5.0])
    (tmp_path / CLAIMS_PLAN).write_text("# sweeps: one\nmodel,benchmark,method,budget,chat_template,timed,repeats,"
                                        "n_prompts\nm,humaneval,goose,60,False,False,1,5\n"
                                        "m,humaneval,spine-only,60,False,False,1,3\n"
                                        "m,humaneval,branches-only,60,False,False,1,5\n")
    rows = load_rows(tmp_path)
    card = scorecard(rows_for("claims", rows))
    t = n_reached(card, rows, find_plan(rows)[0]).set_index(["claim", "reading"])
    two = t.loc[("2. non-degradation", "paper's protocol")]
    assert two["comparisons"] == 2 and two["n"] == "3" and two["prompts asked"] == "3-5"
    assert two["all asked run"] == "1 of 2"


def test_a_page_without_a_plan_says_what_it_cannot_know(tmp_path):
    put(tmp_path, "goose", [10.0, 20.0, 30.0])
    put(tmp_path, "pld", [40.0, 40.0, 40.0])
    text = make("claims", load_rows(tmp_path), tmp_path / "out")[0].read_text()
    power = text.split("## Power")[1].split("\n## ")[0]
    assert f"no {CLAIMS_PLAN} beside the rows" in power and "--write-plan" in power


@pytest.mark.parametrize("plan, why", [
    ("model,benchmark,method\nm,humaneval,goose\n", "lacks the column(s) budget, chat_template"),
    ("# sweeps: x\n" + PLAN.splitlines()[1] + "\n", "lists no job"),
    (PLAN.replace(",5\n", ",thirty\n", 1), "not a whole number >= 0"),
    (PLAN.replace(",5\n", ",-5\n", 1), "not a whole number >= 0"),
    ("", "could not be read"),
])
def test_a_plan_that_is_not_one_gives_the_page_without_it(tmp_path, plan, why):
    """A plan edited by hand into something else: the scorecard is still written, its Power section saying why
    it read no plan (not a traceback, and no numbers from a half-read plan)."""
    put(tmp_path, "goose", [10.0, 20.0, 30.0])
    put(tmp_path, "pld", [40.0, 40.0, 40.0])
    (tmp_path / CLAIMS_PLAN).write_text(plan)
    text = make("claims", load_rows(tmp_path), tmp_path / "out")[0].read_text()
    power = text.split("## Power")[1].split("\n## ")[0]
    assert why in power and "--write-plan" in power


def test_a_job_listed_twice_is_asked_once(tmp_path):
    put(tmp_path, "goose", [10.0, 20.0, 30.0])
    put(tmp_path, "pld", [40.0, 40.0, 40.0])
    put(tmp_path, "goose", [2.0], timed=(6.0, 2, 1))
    (tmp_path / CLAIMS_PLAN).write_text(PLAN + PLAN.split("\n", 2)[2])  # every job again
    rows = load_rows(tmp_path)
    jobs = cost(rows, find_plan(rows)[0])
    assert len(jobs[jobs.method.ne("ar (references)")]) == 4 and jobs.asked.sum() == 5 + 5 + 2 + 2


def test_the_plan_merges_a_sweeps_bases_and_keeps_the_largest_ask(tmp_path):
    """claims-local-chat-power inherits chat_template from claims-local-chat; claims-local-power-smollm2 grows
    claims-local's SmolLM2 jobs to 30 prompts, the ablations staying at 10."""
    assert {j["chat_template"] for j in grid("claims-local-chat-power")} == {True}
    path = write_plan(["claims-local", "claims-local-power-smollm2"], tmp_path)
    plan = pd.read_csv(path, comment="#", dtype={"budget": str}).set_index(["model", "benchmark", "method"])
    assert path.read_text().startswith("# sweeps: claims-local claims-local-power-smollm2\n")
    assert plan.loc[("smollm2-135m", "humaneval", "goose"), "n_prompts"] == 30
    assert plan.loc[("smollm2-135m", "humaneval", "goose-no-bigram"), "n_prompts"] == 10
    assert plan.loc[("gemma3-270m", "humaneval", "goose"), "n_prompts"] == 10


@pytest.mark.parametrize("argv, said", [
    (["--write-plan", "x", "--sweep", "claims-locl"], "no sweep claims-locl in experiments/"),
    (["--sweep", "claims-local"], "give --write-plan DIR with it"),
    (["--write-plan", "x"], "--sweep NAME, once per sweep"),
])
def test_a_plan_asked_wrongly_is_refused_in_one_line(argv, said, capsys):
    from goose.experiments.claims_plan import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and said in capsys.readouterr().err.splitlines()[-1]


def test_a_stopped_prompt_is_costed_by_what_stopping_saved_where_it_was_measured():
    """Stopped runs' own costs: per model x benchmark, the median over methods of stopped / whole seconds; a stopped
    job with no rows yet is its whole twin's cost times that share."""
    rows = pd.DataFrame({"model": "m", "benchmark": "humaneval", "timed": False, "chat_template": False,
                         "method": ["pld", "pld", "tr", "tr", "goose", "goose"],
                         "stop_at_loop": [False, True, False, True, False, False],
                         "core_s": [10.0, 4.0, 20.0, 10.0, 30.0, 30.0]})
    assert stop_shares(rows) == {("m", "humaneval"): pytest.approx(0.45)}  # median of 0.4 and 0.5; goose: whole only
    assert stop_shares(rows[~rows.stop_at_loop]) == {}
