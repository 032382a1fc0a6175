"""run.py end to end on a tiny local model folder: results rows, resume, clear errors."""

import json
import os
import subprocess
import sys

import pytest
from runs import ROOT, rows, run_folder, run_here


@pytest.mark.integration
def test_goose_run_writes_lossless_rows_and_resumes(tiny_folder, prompt_file, tmp_path, run_goose):
    args = ["model=hf", f"model.path={tiny_folder}", "method=goose", "budget=60", "benchmark=jsonl",
            f"benchmark.path={prompt_file}", "max_new_tokens=24", f"results_dir={tmp_path / 'res'}", "n_prompts=2"]
    _, first = run_goose(*args)
    out = run_folder(tmp_path / "res", "model", "jsonl", "goose", "B60-Mprompt-N24") / "results.csv"
    got = rows(out)
    assert [r["prompt_id"] for r in got] == ["p0", "p1"]
    for col in ("model", "benchmark", "method", "budget", "prompt_id", "new_tokens", "steps", "tau", "wall_s",
                "tokens_per_s", "lossless", "method.drafter.rho", "config_hash", "dtype", "torch"):
        assert col in got[0]
    assert all(r["lossless"] == "True" for r in got)
    assert all(float(r["tau"]) == pytest.approx(int(r["new_tokens"]) / int(r["steps"]), abs=1e-5) for r in got)
    assert "lossless 2/2" in first
    # Simulate a kill in the middle of writing a row, then resume with more prompts.
    with open(out, "a") as f:
        f.write("model,jsonl,goose,60,p2,12")
    _, second = run_goose(*args[:-1], "n_prompts=4")
    assert "resuming: 2 row(s)" in second
    assert [r["prompt_id"] for r in rows(out)] == ["p0", "p1", "p2", "p3"]
    _, third = run_goose(*args[:-1], "n_prompts=4")
    assert "resuming: 4 row(s)" in third and len(rows(out)) == 4
    summary = json.loads((out.parent / "summary.json").read_text())
    assert summary["prompts"] == 4 and summary["lossless"] == 4


@pytest.mark.integration
def test_ar_run_is_checked_against_hf_generate(tiny_folder, prompt_file, tmp_path, run_goose):
    run_goose("model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
              "max_new_tokens=16", f"results_dir={tmp_path}", "n_prompts=2")
    got = rows(run_folder(tmp_path, "model", "jsonl", "ar", "Bfixed-Mnone-N16") / "results.csv")
    assert all(x["lossless"] == "True" and x["tau"] == "1.0" for x in got)


@pytest.mark.integration
def test_single_prompt_mode_prints_text(tiny_folder, tmp_path, run_goose):
    _, out = run_goose("model=hf", f"model.path={tiny_folder}", "method=pld", "prompt=hello hello hello",
                       "max_new_tokens=8", f"results_dir={tmp_path}")
    assert "8 tokens" in out


@pytest.mark.parametrize("args,message", [
    (["model=nope"], "error: model=nope: no such model; one of gemma3-270m, gguf,"),
    (["method=nope"], "error: method=nope: no such method; one of ar,"),
])
@pytest.mark.integration
def test_unknown_config_names_are_clear_errors(args, message, tmp_path):
    r = run_here(*args, f"results_dir={tmp_path}")
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("args,message", [
    (["budget=0"], "budget must be"),
    (["budget=-3"], "budget must be"),
    (["benchmark=jsonl", "benchmark.path=/no/such/file.jsonl"], "does not exist"),
    (["model=hf", "model.path=/no/such/folder"], "does not exist"),
    (["method=rest", "method.drafter.datastore=/no/such/store"], "no REST datastore at /no/such/store"),
])
def test_bad_input_is_a_clear_error(args, message, tmp_path, run_goose):
    from goose.errors import GooseError  # run.py prints it as `error: ...`, exit 2 (test_trust checks that)

    with pytest.raises(GooseError, match=message):
        run_goose(*args, f"results_dir={tmp_path}")


def test_prompt_longer_than_context_is_refused(tmp_path, run_goose):
    from tiny import save_tiny

    from goose.errors import GooseError

    folder = save_tiny(tmp_path / "short", max_positions=256)
    with pytest.raises(GooseError, match="exceeds the model's context"):
        run_goose("model=hf", f"model.path={folder}", "prompt=" + "word " * 50, "max_new_tokens=8",
                  f"results_dir={tmp_path}")


@pytest.mark.integration
def test_hub_model_without_weights_fails_fast(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "model=vicuna-7b", "method=goose", "budget=64",
                        "device=cpu", f"results_dir={tmp_path}"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert "vicuna-7b" in r.stderr and "model=hf model.path" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.integration
def test_trace_jsonl_per_step(tiny_folder, prompt_file, tmp_path, run_goose):
    run_goose("model=hf", f"model.path={tiny_folder}", "method=goose", "budget=60", "benchmark=jsonl",
              f"benchmark.path={prompt_file}", "max_new_tokens=16", "n_prompts=1", "trace=true",
              f"results_dir={tmp_path}")
    run = run_folder(tmp_path, "model", "jsonl", "goose", "B60-Mprompt-N16")
    steps = [json.loads(x) for x in (run / "trace.jsonl").read_text().splitlines()]
    row = rows(run / "results.csv")[0]
    assert len(steps) == int(row["steps"]) - 1  # one line per verification (prefill excluded)
    assert {"route", "size", "spine", "spine_accepted", "branch", "branch_accepted", "continuation"} <= set(steps[0])
    assert sum(s["accepted"] for s in steps) + len(steps) + 1 >= int(row["new_tokens"])
