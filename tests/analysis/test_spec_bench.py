"""Spec-Bench: categories, stratified selection, MT-Bench turns, full passes (trials), the table and figure."""

import json
import subprocess
import sys

import pytest
from conftest import SPEC_BENCH, hash_of, spec_of
from runs import ROOT, rows, run_folder, run_here, run_py

from goose.analysis.artifacts import make
from goose.analysis.load import load_rows
from goose.analysis.spec_bench import mean_accepted, spec_bench_table
from goose.benchmarks.builtin import CATEGORY_ORDER, MULTI_TURN
from goose.benchmarks.prompts import load_prompts
from goose.errors import GooseError
from goose.running.inputs import select
from goose.storage.result_files import ResultsFile


# --- prompts --------------------------------------------------------------------------------
@SPEC_BENCH
def test_spec_bench_has_six_categories_of_80_and_n_prompts_takes_the_first_n_of_each():
    every = load_prompts("spec_bench")
    counts = {c: sum(p.category == c for p in every) for c in CATEGORY_ORDER}
    assert counts == dict.fromkeys(CATEGORY_ORDER, 80)
    assert every[0].category == MULTI_TURN and every[0].later_turns  # MT-Bench's "writing" is multi-turn
    picked = select(every, 2, stratified=True)
    assert [p.id for p in picked] == ["81", "82", "161", "162", "241", "242", "321", "322", "401", "402", "481", "482"]
    assert select(every, 2) == every[:2]  # other benchmarks: the first N


@SPEC_BENCH
def test_spread_prompts_takes_n_round_robin_over_the_categories_so_a_grown_n_appends():
    every = load_prompts("mt_bench", turns=1)  # filed by category: its first 10 are all writing
    assert {p.category for p in select(every, 10)} == {"writing"}
    ten = select(every, 10, spread=True)
    assert [p.id for p in ten] == ["81", "91", "101", "111", "121", "131", "141", "151", "82", "92"]
    assert len({p.category for p in ten}) == 8
    assert select(every, 20, spread=True)[:10] == ten  # a grown run decodes its first 10 in the same order
    assert select(every, 3, stratified=True, spread=True) == ten[:3]  # spread is n in all, even where stratified
    assert select(every, None, spread=True) == every and len(select(every, 500, spread=True)) == 80


@SPEC_BENCH
def test_mt_bench_decodes_both_turns_unless_turns_is_1():
    both, first = load_prompts("mt_bench"), load_prompts("mt_bench", turns=1)
    assert len(both) == len(first) == 80
    assert all(len(p.later_turns) == 1 for p in both) and all(p.later_turns == () for p in first)
    assert [p.text for p in both] == [p.text for p in first]
    assert both[0].category == "writing"  # MT-Bench's own category
    with pytest.raises(GooseError, match="benchmark.turns must be 1"):
        load_prompts("mt_bench", turns=3)


def _questions(tmp_path, rows):
    data = tmp_path / "data" / "spec_bench"
    data.mkdir(parents=True)
    data.joinpath("question.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(tmp_path / "data")


def test_a_question_id_twice_is_refused_and_a_missing_category_is_named(tmp_path):
    root = _questions(tmp_path, [{"question_id": 3, "category": "translation", "turns": ["a"]},
                                 {"question_id": 3, "category": "qa", "turns": ["b"]}])
    with pytest.raises(GooseError, match="question id '3' appears twice"):
        load_prompts("spec_bench", root)
    other = _questions(tmp_path / "x", [{"question_id": 1, "turns": ["a", "b"]}])
    assert load_prompts("spec_bench", other)[0].category == "uncategorized"
    assert load_prompts("spec_bench", other, turns=1)[0].later_turns == ()
    assert load_prompts("spec_bench", other)[0].later_turns == ("b",)


def test_each_trial_and_each_turns_setting_is_its_own_configuration():
    assert len({hash_of(f"trial={t}") for t in (1, 2, 3)}) == 3
    # turns decides which prompts exist; their content is in the prompts fingerprint, which differs then
    assert hash_of("benchmark=mt_bench", "benchmark.turns=1") == hash_of("benchmark=mt_bench", "benchmark.turns=2")
    assert hash_of("benchmark=mt_bench", prompts_fp="one") != hash_of("benchmark=mt_bench", prompts_fp="two")


def test_each_trial_times_ar_under_its_own_reference_key():
    from goose.core.identity import ModelIdentity
    from goose.running.timing import reference_key
    from goose.storage.run_folder import RunIdentity

    ident = RunIdentity(ModelIdentity("m", "f", "", "hf", ""), "p", "", "h", {"threads": 1})
    env = {"device_name": "x", "torch": "t", "transformers": "u"}
    keys = [reference_key(spec_of(f"trial={t}"), ident, [1, 2], frozenset(), env, 8) for t in (1, 2, 3)]
    assert len(set(keys)) == 3
    assert keys[0] == reference_key(spec_of(), ident, [1, 2], frozenset(), env, 8)
    assert keys[0] != reference_key(spec_of(), ident, [1, 2], frozenset(), env, 9)


@pytest.mark.parametrize("bad, says", [("trial=0", "trial must be an integer >= 1"),
                                       ("benchmark.turns=3", "benchmark.turns must be 1")])
@pytest.mark.integration
def test_bad_trial_or_turns_is_refused_before_anything(bad, says, tiny_folder, tmp_path):
    extra = ["benchmark=mt_bench"] if "turns" in bad else []
    r = run_here("model=hf", f"model.path={tiny_folder}", *extra, bad, f"results_dir={tmp_path}")
    assert r.returncode == 2 and says in r.stderr
    assert not any(tmp_path.iterdir())


# --- the table --------------------------------------------------------------------------------
# (method, trial) -> wall seconds per row; AR's rows are its own timing (speedup source "self").
WALL = {("ar", 1): 4.0, ("ar", 2): 5.0, ("ar", 3): 6.0, ("pld", 1): 2.0, ("pld", 2): 2.0, ("pld", 3): 3.0}
STEPS = {"ar": 128, "pld": 43}  # 128 tokens; PLD: prefill + 42 decoding forwards (127 tokens) -> MAT 127/42


def write_rows(root, trials=(1, 2, 3), cut=None):
    for (method, trial), wall in WALL.items():
        if trial not in trials:
            continue
        f = ResultsFile(root / method / f"t{trial}" / "results.csv")
        ar_wall = WALL[("ar", trial)]
        for i, (pid, cat) in enumerate([("81", MULTI_TURN), ("81#2", MULTI_TURN), ("161", "translation")]):
            if cut and (method, trial) == cut and i == 2:
                continue
            f.append({"model": "m", "benchmark": "spec_bench", "method": method, "budget": "fixed",
                      "memory": "none", "prompt_id": pid, "category": cat, "trial": trial, "new_tokens": 128,
                      "steps": STEPS[method], "tau": 128 / STEPS[method], "wall_s": wall,
                      "tokens_per_s": 128 / wall, "lossless": True, "config_hash": f"{method}{trial}",
                      "speedup_source": "self" if method == "ar" else "cached", "ar_wall_s": ar_wall,
                      "speedup_stale": False, "host": "h", "ar_host": "h", "sweep_id": "s", "ar_sweep_id": "s"})


def test_table_gives_mean_and_std_over_passes_per_category_with_mat_excluding_the_prefill(tmp_path):
    write_rows(tmp_path)
    t = spec_bench_table(load_rows(tmp_path)).set_index(["method", "metric"])
    # PLD speedup per pass: 4/2, 5/2, 6/3 -> 2.0, 2.5, 2.0: mean 2.1667, sample std 0.2887
    assert t.loc[("pld", "speedup"), "overall"] == "2.17 ± 0.29"
    assert t.loc[("pld", "speedup"), "MT"] == "2.17 ± 0.29" and t.loc[("pld", "speedup"), "Trans"] == "2.17 ± 0.29"
    assert t.loc[("pld", "mean accepted tokens"), "overall"] == f"{127 / 42:.2f} ± 0.00"
    assert t.loc[("pld", "tau"), "overall"] == f"{128 / 43:.2f} ± 0.00"
    assert t.loc[("ar", "mean accepted tokens"), "overall"] == "1.00 ± 0.00"  # AR = 1 exactly, prefill excluded
    assert t.loc[("ar", "tau"), "overall"] == "1.00 ± 0.00"
    assert t.loc[("pld", "speedup"), "Spec-Bench (Vicuna-7B, A100)"] == "1.66x"
    assert t.loc[("pld", "mean accepted tokens"), "Spec-Bench (Vicuna-7B, A100)"] == "1.75"
    assert t.loc[("pld", "tau"), "Spec-Bench (Vicuna-7B, A100)"] == ""
    assert (t.passes == 3).all() and (t.questions == 2).all() and (t.lossless == "9/9").all()


def test_an_incomplete_pass_is_left_out_and_named(tmp_path):
    write_rows(tmp_path, cut=("pld", 3))
    t = spec_bench_table(load_rows(tmp_path)).set_index(["method", "metric"])
    assert t.loc[("pld", "speedup"), "overall"] == "2.25 ± 0.35"  # passes 1 and 2 only
    assert t.loc[("pld", "speedup"), "passes"] == 2
    assert t.loc[("pld", "speedup"), "left out"] == "trial 3 has 2/3 rows"


def test_mean_accepted_tokens_pools_decoding_forwards():
    import pandas as pd

    assert mean_accepted(pd.DataFrame({"new_tokens": [10, 1], "steps": [4, 1]})) == pytest.approx(9 / 3)


def test_runs_of_another_benchmark_identity_or_backend_are_never_pooled(tmp_path):
    """Same method, but a different token limit (another benchmark identity) or backend: rows of their own."""
    write_rows(tmp_path / "a")
    f = ResultsFile(tmp_path / "b" / "results.csv")
    for (method, trial), wall in WALL.items():
        for pid in ("81", "81#2", "161"):
            f.append({"model": "m", "benchmark": "spec_bench", "method": method, "budget": "fixed", "memory": "none",
                      "prompt_id": pid, "category": MULTI_TURN if pid.startswith("81") else "translation",
                      "trial": trial, "new_tokens": 64, "steps": 64, "tau": 1.0, "wall_s": wall,
                      "tokens_per_s": 64 / wall, "lossless": True, "config_hash": f"n64-{method}{trial}",
                      "max_new_tokens": 64, "backend": "prepacked", "speedup_source": "self", "ar_wall_s": wall})
    t = spec_bench_table(load_rows(tmp_path))
    pld = t[t.method == "pld"]
    assert len(pld) == 8 and pld.groupby(["model", "benchmark"]).ngroups == 2
    assert set(pld.lossless) == {"9/9"} and set(pld.passes) == {3}
    assert any("prepacked" in m for m in t.model) and any("max_new_tokens" in b for b in t.benchmark)


def test_other_artifacts_read_the_first_pass_only(tmp_path):
    write_rows(tmp_path)
    df = load_rows(tmp_path)
    assert sorted(df.trial.unique()) == [1, 2, 3] and not df.method.str.contains(r"\[").any()
    make("all_methods", df, tmp_path / "out")
    t = (tmp_path / "out" / "all_methods.csv").read_text()
    assert "3/3" in t and "9/9" not in t


# --- end to end ---------------------------------------------------------------------------------
@pytest.mark.integration
def test_three_categories_two_passes_end_to_end(tiny_folder, tmp_path):
    """A questions file of our own: two per category (n_prompts=1 takes the first of each), two passes of
    AR and PLD with cached AR timings; the table and figure cover every category, every row lossless."""
    data = tmp_path / "data" / "spec_bench"
    data.mkdir(parents=True)
    questions = [(1, "writing", ["Say a b c a b c.", "Again: a b c."]), (2, "writing", ["No.", "No."]),
                 (3, "translation", ["x y z x y z to French"]), (4, "translation", ["skip"]),
                 (5, "qa", ["q r s q r s?"]), (6, "qa", ["skip"])]
    data.joinpath("question.jsonl").write_text("".join(
        json.dumps({"question_id": i, "category": c, "turns": t}) + "\n" for i, c, t in questions))
    res = tmp_path / "res"
    r = run_py("-m", "model=hf", f"model.path={tiny_folder}", "benchmark=spec_bench", "n_prompts=1", "trial=1,2",
               "method=ar,pld", "budget=60", "max_new_tokens=12", "speedup_reference=cached",
               f"data_dir={tmp_path / 'data'}", f"results_dir={res}")
    assert r.returncode == 0, r.stderr[-2000:]
    got = rows(run_folder(res, "model", "spec_bench", "pld", "Bfixed-Mnone-N12-trial2") / "results.csv")
    assert [(x["prompt_id"], x["category"], x["trial"]) for x in got] == [
        ("1", MULTI_TURN, "2"), ("1#2", MULTI_TURN, "2"), ("3", "translation", "2"), ("5", "question answering", "2")]
    assert all(x["lossless"] == "True" and x["speedup_stale"] == "False" for x in got)
    timings = list((res / "references" / "timings").rglob("*.jsonl"))
    # AR timed once per row and pass (its own run in each pass), reused by PLD in the same pass
    assert len(timings) == 8 and all(len(t.read_text().splitlines()) == 1 for t in timings)
    out = tmp_path / "art"
    a = subprocess.run([sys.executable, "-m", "goose.analysis.reproduce", "spec_bench", "spec_bench_figure",
                        "--results", str(res), "--out", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert a.returncode == 0, a.stderr[-2000:]
    t = (out / "spec_bench.csv").read_text().splitlines()
    assert t[0].startswith("model,benchmark,method,budget,memory,metric,MT,Trans,QA,overall,")
    pld = [line for line in t if ",pld," in line]
    assert len(pld) == 4 and all(",2,3,8/8" in line for line in pld)  # 2 passes, 3 questions, lossless
    cells = {line.split(",")[5]: line.split(",")[6:10] for line in t if ",ar," in line}
    assert cells["mean accepted tokens"] == ["1.00 ± 0.00"] * 4 == cells["tau"]  # AR: nothing drafted, either pass
    # tau and accepted tokens can never fall below 1; a speedup is wall clock (PLD accepts almost nothing on the
    # tiny model, so it sits at 1 +- noise): only a positive number is asked of it here
    for line in pld:
        metric, values = line.split(",")[5], [float(c.split(" ")[0]) for c in line.split(",")[6:10]]
        assert all(v >= 1 for v in values) if metric in ("tau", "mean accepted tokens") else all(v > 0 for v in values)
    assert (out / "spec_bench_figure.png").stat().st_size > 0



@pytest.mark.integration
def test_a_prompt_near_the_context_end_generates_until_it_is_full_every_method_alike(tmp_path):
    """A benchmark prompt whose max_new_tokens would overrun the model's context is capped, not refused: it
    generates until the context is full, whatever the method or budget (near the end the engine verifies only
    the draft nodes that still fit), so AR's rows, recorded budget=fixed, never depend on the budget of the
    run that made them; one that cannot fit at all is refused."""
    from tiny import save_tiny

    folder = save_tiny(tmp_path / "short", max_positions=256)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "short", "prompt": "a b a b"}) + "\n"
                       + json.dumps({"id": "long", "prompt": "a b c " * 36}) + "\n")
    base = ["model=hf", f"model.path={folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
            "max_new_tokens=64", "speedup_reference=cached", f"results_dir={tmp_path / 'res'}"]
    r = run_py("-m", *base, "method=ar,goose", "budget=16,60")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "1 prompt(s) (long) leave less than max_new_tokens=64" in r.stdout and "every method alike" in r.stdout
    longs = []
    for method, tag in (("ar", "Bfixed-Mnone-N64"), ("goose", "B16-Mprompt-N64"), ("goose", "B60-Mprompt-N64")):
        got = {x["prompt_id"]: x for x in rows(run_folder(tmp_path / "res", "short", "jsonl", method, tag)
                                               / "results.csv")}
        room = 256 - int(got["long"]["prompt_tokens"])
        assert 0 < room < 64 and got["long"]["capped_at"] == str(room) and got["short"]["capped_at"] == ""
        assert all(x["lossless"] == "True" for x in got.values())
        longs.append(got["long"])
    assert len({x["new_tokens"] for x in longs}) == 1 and len({x["reference_key"] for x in longs}) == 1
    assert int(longs[0]["new_tokens"]) == 256 - int(longs[0]["prompt_tokens"])  # the context is full
    assert "Skipping" not in r.stdout and len(list((tmp_path / "res").glob("short/jsonl/ar/*"))) == 1
    prompts.write_text(json.dumps({"id": "huge", "prompt": "a b c " * 50}) + "\n")
    bad = run_py(*base, "method=pld", "budget=60", f"results_dir={tmp_path / 'res2'}")
    assert bad.returncode == 2 and "not one new token fits" in bad.stderr


def test_a_blank_timing_column_in_another_file_does_not_make_speedups_stale(tmp_path):
    """threads 1 vs ar_threads read as 1.0 (a blank elsewhere makes the column float) once called every
    timing stale and left the speedup cells empty with exit 0."""
    write_rows(tmp_path / "spec")
    for f in list((tmp_path / "spec").rglob("results.csv")):
        rows = ResultsFile(f).rows()
        f.unlink()
        for r in rows:
            ResultsFile(f).append({**r, "threads": 1, "ar_threads": 1})
    ResultsFile(tmp_path / "other" / "results.csv").append(
        {"model": "m", "benchmark": "gsm8k", "method": "pld", "budget": "fixed", "memory": "none", "prompt_id": "0",
         "new_tokens": 8, "steps": 4, "tau": 2.0, "wall_s": 1.0, "tokens_per_s": 8.0, "lossless": True,
         "config_hash": "other", "threads": 1, "ar_threads": "", "speedup_source": "none", "ar_wall_s": ""})
    t = spec_bench_table(load_rows(tmp_path)).set_index(["method", "metric"])
    assert t.loc[("pld", "speedup"), "overall"] == "2.17 ± 0.29"
