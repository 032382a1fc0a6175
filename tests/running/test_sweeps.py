"""Benchmarks, sweeps, the AR reference store, W&B offline runs, the SLURM launcher config."""

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ALL_DATA, unit_keeps
from runs import ROOT, rows, run_folder, run_py

from goose.benchmarks.prompts import load_prompts


@pytest.mark.parametrize("name,count,first", [
    ("humaneval", 164, "from typing import List\n\n\ndef has_close_elements("),
    ("mbpp", 500, "# Write a python function to remove first and last occurrence of a given character"),
    ("classeval", 100, "import logging\nimport datetime\n\nclass AccessGatewayFilter:"),
    ("gsm8k", 1319, "Question: Janet’s ducks lay 16 eggs per day."),
    ("mt_bench", 80, "Compose an engaging travel blog post about a recent trip to Hawaii"),
    ("spec_bench", 480, "Compose an engaging travel blog post about a recent trip to Hawaii"),
])
@ALL_DATA
def test_loaders_counts_and_prompt_formats(name, count, first):
    prompts = load_prompts(name)
    assert len(prompts) == count
    assert prompts[0].text.startswith(first)
    assert len({p.id for p in prompts}) == count


@ALL_DATA
def test_prompt_formats_exactly():
    g = load_prompts("gsm8k")[0].text
    assert g.endswith("\n\nAnswer: Let me solve step by step.\n") and g.startswith("Question: ")
    m = load_prompts("mbpp")
    assert m[0].id == "11" and m[-1].id == "510" and m[0].text.endswith("\n") and m[0].text.startswith("# ")
    sb = load_prompts("spec_bench")
    assert len(sb[0].later_turns) == 1 and all(len(p.later_turns) == 1 for p in sb[:80])
    assert all(p.later_turns == () for p in sb[80:])


def test_missing_data_says_where_it_looked(tmp_path, monkeypatch):
    from goose.errors import GooseError

    monkeypatch.setenv("GOOSE_DATA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("goose.benchmarks.prompts.REPO_ROOT", tmp_path / "clone")  # a clone without ../shared beside it
    with pytest.raises(GooseError) as e:
        load_prompts("mt_bench")
    for where in (tmp_path / "env", tmp_path / "shared" / "data", tmp_path / "cache" / "data"):
        assert str(where) in str(e.value)
    assert "make data" in str(e.value)


@pytest.mark.integration
def test_cached_sweep_times_ar_once_per_prompt_and_second_run_skips_everything(tiny_folder, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"a b c a b c {i} " * 3}) + "\n"
                               for i in range(3)))
    args = ["-m", "model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
            "method=pld,goose", "budget=60", "max_new_tokens=16", "speedup_reference=cached",
            f"results_dir={tmp_path / 'res'}"]
    first = run_py(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    refs = sorted((tmp_path / "res" / "references").rglob("*.json"))
    assert len(refs) == 3  # one per prompt, shared by both methods
    timings = sorted((tmp_path / "res" / "references" / "timings").rglob("*.jsonl"))
    assert [len(t.read_text().splitlines()) for t in timings] == [1, 1, 1]  # AR timed once in the sweep
    stamps = [r.stat().st_mtime_ns for r in refs]
    for m, tag in (("pld", "Bfixed-Mnone-N16"), ("goose", "B60-Mprompt-N16")):
        got = rows(run_folder(tmp_path / "res", "model", "jsonl", m, tag) / "results.csv")
        assert len(got) == 3 and all(r["lossless"] == "True" for r in got)
        assert all(r["speedup_source"] == "cached" and r["speedup_stale"] == "False" for r in got)
    second = run_py(*args)
    assert second.returncode == 0
    assert second.stdout.count("resuming: 3 row(s)") == 2 and "Loading weights" not in second.stderr
    assert [r.stat().st_mtime_ns for r in refs] == stamps  # computed once, reused


@ALL_DATA
@pytest.mark.integration
def test_spec_bench_second_turn_carries_first_answer(tiny_folder, tmp_path, monkeypatch):
    data = tmp_path / "data" / "spec_bench"
    data.mkdir(parents=True)
    (data / "question.jsonl").write_text(json.dumps({"question_id": 81, "turns": ["Say x.", "Now y."]}) + "\n")
    r = run_py("model=hf", f"model.path={tiny_folder}", "benchmark=spec_bench", "method=goose", "budget=60",
               "max_new_tokens=8",
               f"data_dir={tmp_path / 'data'}", f"results_dir={tmp_path / 'res'}")
    assert r.returncode == 0, r.stderr[-2000:]
    got = rows(run_folder(tmp_path / "res", "model", "spec_bench", "goose", "B60-Mprompt-N8") / "results.csv")
    assert [x["prompt_id"] for x in got] == ["81", "81#2"]
    assert int(got[1]["prompt_tokens"]) > int(got[0]["prompt_tokens"]) + 8  # carries turn 1 and its answer
    assert all(x["lossless"] == "True" for x in got)


@pytest.mark.integration
def test_wandb_offline_run_holds_config_and_metrics(tiny_folder, tmp_path):
    env = dict(os.environ, WANDB_MODE="offline", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "model=hf", f"model.path={tiny_folder}",
                        "method=pld", "budget=60", "n_prompts=2", "max_new_tokens=8", f"results_dir={tmp_path}"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    folder = run_folder(tmp_path, "model", "humaneval", "pld", "Bfixed-Mnone-N8")
    runs = list((folder / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    blob = next(p for p in runs[0].rglob("*.wandb")).read_bytes()
    assert b"max_new_tokens" in blob and b"ngram_rate" in blob  # the config, and a per-prompt metric
    for row in rows(folder / "results.csv"):  # each prompt's own measured values were logged
        for col in ("tokens_per_s", "ar_wall_s"):
            assert row[col].encode() in blob, (col, row[col])


def hydra_config(*overrides):
    """The `hydra` node run.py would see (composed in this process)."""
    from hydra import compose, initialize_config_dir

    from goose.paths import register_experiments

    register_experiments()
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def test_slurm_launcher_composes():
    launcher = hydra_config("+experiment=figure4-paper", "hydra/launcher=slurm").hydra.launcher
    assert "SlurmLauncher" in launcher._target_ and launcher.gpus_per_node == 1


@pytest.mark.parametrize("exp", ["figure1", "figure4", "table1", "table2", "budget_sweep", "all_methods", "suffix",
                                 "sampling", "sampling_seeds"])
@pytest.mark.parametrize("profile", ["paper", "local"])
def test_experiment_configs_compose_and_name_real_methods(exp, profile):
    from goose.running.registry import method_names

    params = hydra_config(f"+experiment={exp}-{profile}").hydra.sweeper.params
    assert set(str(params.method).split(",")) <= set(method_names())


@pytest.mark.integration
def test_reproduce_paper_profile_without_gpu_fails_at_once():
    import shutil

    import torch

    if torch.cuda.is_available() or not shutil.which("make"):
        pytest.skip("needs a machine without CUDA, with make")
    for target in ("reproduce-table2", "reproduce-sampling"):
        r = subprocess.run(["make", "-s", target, "PROFILE=paper"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode != 0 and "PROFILE=paper needs a CUDA GPU" in r.stderr + r.stdout


def test_an_unknown_profile_is_one_line_before_anything_runs():
    import shutil

    if not shutil.which("make"):
        pytest.skip("needs make")
    for target in ("reproduce-claims", "reproduce-table2", "reproduce-sampling", "reproduce-spec-bench",
                   "reproduce-concurrency"):
        # As a user types it: CI calls pytest from `make test`, whose MAKELEVEL would make this a sub-make ("make[1]:")
        env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        r = subprocess.run(["make", "-s", target, "PROFILE=bogus", "PYTHON=false"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, env=env)
        said = [line for line in r.stderr.splitlines() if not re.match(r"make(\[\d+\])?:", line)]
        assert r.returncode == 2 and r.stdout == "" and len(said) == 1
        assert "PROFILE=bogus" in said[0] and "PROFILE=local" in said[0] and "PROFILE=paper" in said[0]


def test_the_slurm_launcher_without_sbatch_is_one_line(monkeypatch):
    import shutil

    from goose.cli import refused

    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    why = refused(["-m", "method=ar,pld", "hydra/launcher=slurm"])
    assert why is not None and "sbatch" in why and "not on PATH" in why
    assert refused(["-m", "method=ar,pld"]) is None


# --- every reproduce target says its plan and estimate first (#61) ------------------------------------------------
def make_env() -> dict:
    """The environment a user's `make` gets (CI runs pytest from `make test`, whose MAKELEVEL makes a sub-make)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


COMMITTED_ROWS = {"production-peers": "results/production-peers-local"}  # beside claims' (not a target here)


def reproduce_targets() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    return sorted({*re.findall(r"^EXPERIMENT_([\w-]+) =", makefile, re.M),
                   *re.findall(r"^reproduce-([\w-]+):", makefile, re.M)} - {"%", "all", "claims", "serving"})


def make_calls(target: str, tmp_path) -> list[list[str]]:
    """What `make -s TARGET PROFILE=local` runs with a stand-in for python that records its calls (nothing is
    decoded): each call's arguments, the profile and GPU checks (python -c) left out."""
    import shutil

    if not shutil.which("make"):
        pytest.skip("needs make")
    log = tmp_path / "calls"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nfor a in \"$@\"; do printf '%s\\t' \"$a\"; done >> {log}; echo >> {log}\n")
    fake.chmod(0o755)
    r = subprocess.run(["make", "-s", target, "PROFILE=local", f"PYTHON={fake}"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, env=make_env())
    assert r.returncode == 0, r.stderr
    argvs = [c.rstrip("\t").split("\t") for c in log.read_text().splitlines()]
    return [a for a in argvs if a[0] != "-c"]


@pytest.mark.parametrize("target", unit_keeps(reproduce_targets(), {"table2"}))
def test_every_reproduce_target_says_its_plan_and_estimate_before_it_runs_anything(target, tmp_path):
    """The first thing each target runs after its profile checks (make_calls) is the plan; the plan, run for real
    with the same arguments, is two lines: the sweeps with their runs, prompts and tokens, where rows and artifacts
    go; about how long."""
    argvs = make_calls(f"reproduce-{target}", tmp_path)
    calls = [" ".join(a) for a in argvs]
    rows = COMMITTED_ROWS.get(target, "results/local")  # a target whose local rows are committed: their folder
    assert calls[0].startswith(f"-m goose.experiments.sweep_plan --profile local --results {rows} "), calls
    assert any(c.startswith(("run.py", "-m goose.baselines.rest")) for c in calls[1:]), calls
    out = subprocess.run([sys.executable, *argvs[0]], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, HF_HUB_OFFLINE="1"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2
    out_dir = "docs/results" if target in COMMITTED_ROWS else f"{rows}/artifacts"
    said = (rf"== {target} with PROFILE=local: the sweep \S+-local .*\(\d+ runs, \d+ prompts, [\d,]+ new tokens at "
            rf"most\).*; rows into {rows}, then .+ into {out_dir}$")
    assert re.match(said, lines[0]), lines[0]
    assert re.match(r"== about [\d.]+ (min|hours) on this repository's 2-core machine", lines[1]), lines[1]


def test_reproduce_serving_says_its_plan_and_estimate_before_it_runs_anything(tmp_path, capsys):
    """reproduce-serving is no Hydra sweep (servers under GuideLLM's load): its first call is its own plan's
    module, which prints the plan (servers, rates, where rows and the page go) and an estimate before anything runs."""
    calls = [" ".join(a) for a in make_calls("reproduce-serving", tmp_path)]
    assert calls[0].startswith(
        "-m goose.measurement.serving_experiment --profile local --results results/local/serving"), calls
    from goose.measurement import serving_experiment

    serving_experiment.main(["--profile", "local", "--plan"])  # what make calls first, in this process
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("== serving with PROFILE=local: goose-serve model=") and "rows into results/" in lines[0]
    assert re.match(r"== about [\d.]+ (min|hours) on this repository's 2-core machine", lines[1]), lines[1]


def test_a_plan_counts_the_sweeps_jobs_with_the_targets_overrides():
    from goose.experiments.sweep_plan import plan, sweep_jobs

    _, jobs = sweep_jobs("concurrency-local method=pld,goose budget=auto")
    assert len(jobs) == 3 * 3 * 2 and {j["method"] for j in jobs} == {"pld", "goose"}
    assert {j["budget"] for j in jobs} == {"auto"}
    first, second = plan("table1", "local", "results/local", "results/local/artifacts", ["table1"], ["table1-local"])
    assert "table1-local (9 runs, 90 prompts, 11,520 new tokens at most)" in first
    assert second.startswith("== about 40 min")  # 23,040 decoded tokens (AR timed beside each) and 9 runs


def test_a_plan_takes_the_overrides_its_help_documents(capsys):
    """`--sweep "table2-local n_prompts=2"` (its --help's form): the values typed as run.py's command line types
    them, so a number counts prompts; an override that is no KEY=VALUE is one line naming it."""
    from goose.errors import GooseError
    from goose.experiments.sweep_plan import main, sweep_jobs

    _, jobs = sweep_jobs("table2-local n_prompts=2 method=pld,goose")
    assert {j["n_prompts"] for j in jobs} == {2} and {j["method"] for j in jobs} == {"pld", "goose"}
    main(["--target", "table2", "--profile", "local", "--results", "r", "--out", "o", "--artifacts", "table2",
          "--sweep", "table2-local n_prompts=2"])
    assert "the sweep table2-local n_prompts=2 (21 runs, 42 prompts," in capsys.readouterr().out
    with pytest.raises(GooseError, match=r"'n_prompts' is no KEY=VALUE override .*n_prompts=2"):
        sweep_jobs("table2-local n_prompts")


def test_a_plan_of_an_unknown_sweep_is_one_line_with_the_close_name_and_exit_2(capsys):
    """The fresh-clone trial of 2026-12-06: `--sweep table2-lokal` exited 1 with no suggestion."""
    from goose.experiments.sweep_plan import main

    with pytest.raises(SystemExit) as e:
        main(["--target", "table2", "--profile", "local", "--results", "r", "--out", "o", "--artifacts", "table2",
              "--sweep", "table2-lokal"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == ("error: no sweep table2-lokal (experiments/table2-lokal.yaml) (did you "
                                               "mean table2-local?)")
