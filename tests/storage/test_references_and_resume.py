"""Numbers you can trust: content-keyed references and resume, one writer per run folder,
honest speedups, identity-aware analysis, clear errors. Inputs are made here, not ours."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from runs import ROOT, rows, run_py

from goose.errors import GooseError
from goose.measurement import bench
from goose.storage.metrics import speedup_stale, summarize


def jsonl(path, texts, ids=None):
    ids = ids or [f"p{i}" for i in range(len(texts))]
    path.write_text("".join(json.dumps({"id": i, "prompt": t}) + "\n" for i, t in zip(ids, texts)))
    return path


def tiny_args(folder, prompts, results, *extra):
    """A tiny-model run's settings; at the paper's B = 60 unless `extra` names a budget (these tests are about
    references, resumes and inputs, not the default budget: tests/running/test_spec.py pins that)."""
    budget = [] if any(e.startswith("budget=") for e in extra) else ["budget=60"]
    return ["model=hf", f"model.path={folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
            f"results_dir={results}", "max_new_tokens=12", *budget, *extra]


def all_rows(root):
    return [r for f in sorted(root.rglob("results.csv")) for r in rows(f)]


@pytest.mark.integration
def test_two_prompt_files_with_the_same_ids_are_both_lossless(tiny_folder, tmp_path, run_goose):
    a = jsonl(tmp_path / "a.jsonl", ["def add(a, b):\n    return a + b\n", "x = 1\ny = 2\n"])
    b = jsonl(tmp_path / "b.jsonl", ["the cat sat on the mat; the cat", "for i in range(10): print(i)"])
    for f in (a, b):
        _, out = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=goose"))
        assert "lossless 2/2" in out and "resuming" not in out
    got = all_rows(tmp_path / "res")
    assert len(got) == 4 and all(x["lossless"] == "True" for x in got)
    assert len({x["reference_key"] for x in got}) == 4  # same ids, different text: never one reference
    assert len({x["config_hash"] for x in got}) == 2


@pytest.mark.integration
def test_ids_that_sanitise_alike_and_missing_ids_do_not_share_references(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["alpha beta alpha beta", "gamma delta gamma"], ids=["p q", "p_q"])
    g = tmp_path / "noids.jsonl"
    g.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in ["one two one two", "three four three"]))
    for file in (f, g):
        _, out = run_goose(*tiny_args(tiny_folder, file, tmp_path / "res", "method=pld"))
        assert "lossless 2/2" in out


def test_duplicate_ids_are_an_error_naming_the_lines(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "dup.jsonl", ["a", "b", "c"], ids=["x", "y", "x"])
    with pytest.raises(GooseError, match="id 'x' is on lines 1 and 3"):
        run_goose(*tiny_args(tiny_folder, f, tmp_path / "res"))


@pytest.mark.integration
def test_an_edited_prompts_file_is_not_resumed(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["print('hello')\n" * 2, "a = [1, 2, 3]\n"])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "method=pld")
    run_goose(*args)
    jsonl(f, ["print('hello')\n" * 2, "b = {'k': 'v'}\n"])  # same ids, second prompt edited
    _, out = run_goose(*args)
    assert "resuming" not in out and "lossless 2/2" in out
    got = all_rows(tmp_path / "res")
    assert len(got) == 4 and len({x["prompts_fingerprint"] for x in got}) == 2


@pytest.mark.integration
def test_new_weights_at_the_same_path_are_not_resumed(tmp_path, run_goose):
    from tiny import save_tiny

    folder = save_tiny(tmp_path / "m", seed=0)
    f = jsonl(tmp_path / "p.jsonl", ["a b a b a b", "c d c d c d"])
    args = tiny_args(folder, f, tmp_path / "res", "method=pld")
    run_goose(*args)
    shutil.rmtree(folder)
    save_tiny(folder, seed=1)
    _, out = run_goose(*args)
    assert "resuming" not in out
    assert len({x["model_fingerprint"] for x in all_rows(tmp_path / "res")}) == 2


@pytest.mark.integration
def test_a_pinned_run_dir_refuses_rows_of_another_configuration(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["a b a b", "c d c d"])
    g = jsonl(tmp_path / "q.jsonl", ["e f e f", "g h g h"])
    pinned = f"run_dir={tmp_path / 'mine'}"
    run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", pinned))
    with pytest.raises(GooseError, match="holds rows of another configuration"):
        run_goose(*tiny_args(tiny_folder, g, tmp_path / "res", pinned))
    assert len(rows(tmp_path / "mine" / "results.csv")) == 2


def start(args):
    env = dict(os.environ, WANDB_MODE="disabled", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.integration
def test_two_processes_on_one_folder_one_refused_rows_unique(tiny_folder, tmp_path):
    f = jsonl(tmp_path / "p.jsonl", [f"v{i} = {i} * {i}\n" * 3 for i in range(8)])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "method=goose", "n_prompts=null", "max_new_tokens=100")
    procs = [start(args), start(args)]  # started together: both reach the lock within milliseconds
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [o[1][-1500:] for o in outs]
    winner = next(p for p in procs if p.returncode == 0)
    refused = outs[[p.returncode for p in procs].index(2)][1]
    assert f"another process (PID {winner.pid}" in refused and "Traceback" not in refused
    got = all_rows(tmp_path / "res")
    assert len(got) == 8 and len({x["prompt_id"] for x in got}) == 8


@pytest.mark.integration
def test_a_lock_left_by_a_killed_process_is_recovered(tiny_folder, tmp_path):
    f = jsonl(tmp_path / "p.jsonl", [f"w{i} = {i}\n" * 4 for i in range(6)])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "method=goose", "n_prompts=null", "max_new_tokens=100")
    p = start(args)
    while not list((tmp_path / "res").rglob(".lock")):
        time.sleep(0.05)
    p.kill()
    p.communicate()
    r = run_py(*args)
    assert r.returncode == 0 and "lossless 6/6" in r.stdout, r.stderr[-2000:]


@pytest.mark.integration
def test_ctrl_c_keeps_rows_and_the_rerun_resumes(tiny_folder, tmp_path):
    f = jsonl(tmp_path / "p.jsonl", [f"u{i} = [{i}] * {i}\n" * 3 for i in range(10)])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "method=goose", "n_prompts=null", "max_new_tokens=200",
                     "repeats=2")
    p = start(args)
    while not list((tmp_path / "res").rglob("results.csv")):
        time.sleep(0.02)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    kept = len(all_rows(tmp_path / "res"))
    assert p.returncode == 130 and "Traceback" not in err
    assert f"interrupted: {kept} row(s) kept in" in err and "rerun the same command to resume" in err
    assert 1 <= kept < 10
    r = run_py(*args)
    assert r.returncode == 0 and f"resuming: {kept} row(s)" in r.stdout and "lossless 10/10" in r.stdout
    assert len({x["prompt_id"] for x in all_rows(tmp_path / "res")}) == 10


@pytest.mark.integration
def test_two_hf_folders_with_one_name_never_pool(tmp_path, run_goose):
    from tiny import save_tiny

    from goose.analysis.load import load_rows
    from goose.analysis.pooling import by

    f = jsonl(tmp_path / "p.jsonl", ["k = 1\nk = 1\n", "z z z z"])
    for seed in (0, 1):
        folder = save_tiny(tmp_path / f"run{seed}" / "model", seed=seed)
        run_goose(*tiny_args(folder, f, tmp_path / "res", "method=pld"))
    df = load_rows(tmp_path / "res")
    t = by(df, ["model", "method"])
    assert len(t) == 2 and list(t.prompts) == [2, 2] and t.model.str.startswith("model [").all()


@pytest.mark.integration
def test_interleaved_speedup_times_ar_beside_each_prompt(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["m = m + 1\n" * 3, "n = n * 2\n" * 3])
    _, out = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=goose", "repeats=2"))
    assert "interleaved AR timing, 2/2 prompts" in out
    for x in all_rows(tmp_path / "res"):
        assert x["speedup_source"] == "interleaved" and x["speedup_stale"] == "False"
        assert float(x["speedup"]) == pytest.approx(float(x["ar_wall_s"]) / float(x["wall_s"]), rel=1e-3)
        assert x["ar_sweep_id"] == x["sweep_id"] and x["ar_host"] == x["host"]


@pytest.mark.integration
def test_cached_timing_of_another_sweep_is_not_reused(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["q = q - 1\n" * 3])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "speedup_reference=cached")
    run_goose(*args, "method=pld", sweep_id="sweep-1")
    run_goose(*args, "method=goose", sweep_id="sweep-2")  # another sweep: AR is timed afresh
    (timings,) = (tmp_path / "res" / "references" / "timings").rglob("*.jsonl")
    stamps = [json.loads(x) for x in timings.read_text().splitlines()]
    assert len(stamps) == 2 and stamps[0]["sweep_id"] != stamps[1]["sweep_id"]
    goose = [x for x in all_rows(tmp_path / "res") if x["method"] == "goose"][0]
    assert goose["ar_sweep_id"] == goose["sweep_id"] == stamps[1]["sweep_id"]


@pytest.mark.integration
def test_speedup_none_reports_tau_only(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["s = s + s\n" * 3])
    _, out = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=goose", "speedup_reference=none"))
    assert "speedup vs AR not measured" in out and "lossless 1/1" in out
    (x,) = all_rows(tmp_path / "res")
    assert x["speedup"] == "" and x["speedup_source"] == "none"
    # the row says which CPU ran it: its model and the instruction set its kernels dispatch on, not just "cpu"
    assert x["device_name"].endswith(f"({torch.backends.cpu.get_cpu_capability()})") and x["device_name"] != "cpu"


def test_a_stale_timing_is_flagged_and_left_out():
    fresh = {"new_tokens": 10, "steps": 5, "tau": 2.0, "wall_s": 1.0, "lossless": True, "speedup_source": "cached",
             "ar_wall_s": 2.0, "host": "a", "ar_host": "a", "threads": 2, "ar_threads": 2, "torch": "t",
             "ar_torch": "t", "backend": "eager", "ar_backend": "eager", "device_name": "cpu", "ar_device_name": "cpu",
             "sweep_id": "s1", "ar_sweep_id": "s1"}
    assert speedup_stale(fresh) is False
    for key, value in [("ar_host", "b"), ("ar_threads", 1), ("ar_torch", "u"), ("ar_backend", "compile"),
                       ("ar_sweep_id", "s0")]:
        stale = {**fresh, key: value, "ar_wall_s": 100.0}
        assert speedup_stale(stale) is True, key
        s = summarize([fresh, stale])
        assert s["speedup"] == pytest.approx(2.0) and s["speedup_prompts"] == 1 and s["speedup_stale"] == 1
    legacy = {"new_tokens": 10, "steps": 5, "tau": 2.0, "wall_s": 1.0, "lossless": True, "ar_tokens_per_s": 5.0}
    assert speedup_stale(legacy) is True
    assert summarize([legacy])["speedup_prompts"] == 0


@pytest.mark.integration
def test_the_command_line_data_dir_wins_over_the_environment(tiny_folder, tmp_path):
    """data_dir= on the command line is searched first; a GOOSE_DATA_DIR that holds nothing is passed over for
    the next folder that has the file, never mistaken for it. The files are the test's own (the cache folder's
    has three questions), so it passes wherever the real data is: the run must read the file the loader's rule
    finds (../shared/data where a checkout has it beside, else the cache's), which the test asks the same rule."""
    from goose.benchmarks.prompts import DataDirs

    def questions(folder, ids):
        (folder / "spec_bench").mkdir(parents=True)
        (folder / "spec_bench" / "question.jsonl").write_text(
            "".join(json.dumps({"question_id": i, "turns": [f"Question {i}?"]}) + "\n" for i in ids))

    questions(tmp_path / "data", [1])
    questions(tmp_path / "cache" / "data", [7, 8, 9])
    env = dict(os.environ, GOOSE_DATA_DIR=str(tmp_path / "nowhere"), GOOSE_CACHE=str(tmp_path / "cache"),
               WANDB_MODE="disabled", HF_HUB_OFFLINE="1")
    base = [sys.executable, str(ROOT / "run.py"), "model=hf", f"model.path={tiny_folder}", "benchmark=mt_bench",
            "benchmark.turns=1", "max_new_tokens=4", "n_prompts=2", "speedup_reference=none"]
    ok = subprocess.run([*base, f"data_dir={tmp_path / 'data'}", f"results_dir={tmp_path / 'a'}"], cwd=ROOT, env=env,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert [r["prompt_id"] for r in all_rows(tmp_path / "a")] == ["1"]  # the one question of data_dir's file
    fallback = subprocess.run([*base, f"results_dir={tmp_path / 'b'}"], cwd=ROOT, env=env, capture_output=True,
                              text=True)
    assert fallback.returncode == 0, fallback.stderr[-2000:]
    old = dict(os.environ)
    try:
        os.environ.update(GOOSE_DATA_DIR=env["GOOSE_DATA_DIR"], GOOSE_CACHE=env["GOOSE_CACHE"])
        found = DataDirs.of().find("spec_bench/question.jsonl")
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert found is not None and "nowhere" not in str(found)
    first = [str(json.loads(line)["question_id"]) for line in found.read_text().splitlines()[:2]]
    assert sorted({r["prompt_id"] for r in all_rows(tmp_path / "b")}) == sorted(first)


def bad_inputs(tmp_path):
    from tiny import save_tiny

    not_gguf = tmp_path / "weights.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a gguf file")
    no_tok = save_tiny(tmp_path / "notok")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (no_tok / name).unlink(missing_ok=True)
    store = tmp_path / "store"
    store.mkdir()
    (store / "meta.json").write_text("{}")
    (store / "tokens.npy").write_bytes(b"")
    short = save_tiny(tmp_path / "short", max_positions=128)
    return [
        (["repeats=0"], "repeats must be an integer >= 1"),
        (["repeats=-1"], "repeats must be an integer >= 1"),
        (["repeats=abc"], "repeats must be an integer >= 1"),
        (["device=tpu"], "unknown device 'tpu'"),
        (["model=gguf", f"model.path={not_gguf}"], "is not a GGUF file"),
        (["model=hf", f"model.path={no_tok}"], "has no tokenizer"),
        (["method=rest", f"method.drafter.datastore={store}"], f"{store / 'sa.npy'} is missing"),
        (["model=hf", f"model.path={short}", "method=goose", "budget=128"], "budget=128 is too large for this model"),
        (["model=hf", f"model.path={short}", "method=goose", "budget=auto"],
         "budget=auto builds drafts of 128 nodes, too many for this model: its context holds 128 positions"),
        (["prompt=x", f"prompt_file={not_gguf}"], "not both"),
    ]


@pytest.mark.integration
def test_bad_inputs_are_clear_errors_and_leave_no_run_folder(tmp_path, run_goose):
    res = tmp_path / "res"
    for args, message in bad_inputs(tmp_path):
        with pytest.raises(GooseError) as e:
            run_goose(*args, f"results_dir={res}", "max_new_tokens=4")
        assert message in str(e.value), (args, str(e.value))
        assert not res.exists() or not any(res.iterdir()), (args, list(res.rglob("*")))


@pytest.mark.integration
def test_run_py_prints_errors_without_a_traceback(tmp_path):
    r = run_py("repeats=abc", f"results_dir={tmp_path}")
    assert r.returncode == 2 and "error: repeats must be an integer >= 1" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.integration
def test_prompt_file_and_quoted_prompt_take_any_characters(tiny_folder, tmp_path):
    """Through bash's eyes: each argument below is what `'prompt="..."'` hands to run.py."""
    text = 'def f(x):\n    return "a (b)" + \'c\'  # 🦆\n'
    f = tmp_path / "prompt.txt"
    f.write_text(text)
    r = run_py("model=hf", f"model.path={tiny_folder}", f"prompt_file={f}", "max_new_tokens=4")
    assert r.returncode == 0 and "4 tokens" in r.stdout, r.stderr[-2000:]
    quoted = run_py("model=hf", f"model.path={tiny_folder}", 'prompt="def fib(n): return (n, 1) 🦆"',
                    "max_new_tokens=4")
    assert quoted.returncode == 0 and "4 tokens" in quoted.stdout, quoted.stderr[-2000:]


@pytest.mark.integration
def test_rest_build_and_bench_refuse_unknown_names(tmp_path, capsys):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, "-m", "goose.baselines.rest_datastore", "build", "--model", "nonexistent",
                        "--out", str(tmp_path / "s")], cwd=ROOT, env=env, capture_output=True, text=True)
    assert r.returncode == 2 and "unknown model 'nonexistent'" in r.stderr and "smollm2-135m" in r.stderr
    old = subprocess.run([sys.executable, "-m", "goose.baselines.rest", "build", "--model", "smollm2-135m"], cwd=ROOT,
                         env=env, capture_output=True, text=True)  # the builder's old address says where it went
    assert old.returncode == 1 and "python -m goose.baselines.rest_datastore build" in old.stderr
    for flag, name, valid in [("--model", "nope", "smollm2-135m"), ("--benchmarks", "humaneva", "humaneval"),
                              ("--methods", "gose", "goose-no-bigram")]:  # in this process: argparse's refusals
        with pytest.raises(SystemExit) as stop:
            bench.main([flag, name])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"unknown '{name}'" in err and valid in err, err


@pytest.mark.integration
@pytest.mark.parametrize("concurrency", [1, 3])
def test_budget_auto_rows_are_never_added_beside_rows_pruned_against_another_cost(tiny_folder, prompt_file, tmp_path,
                                                                                   run_goose, monkeypatch, concurrency):
    """budget=auto prunes against this machine's cost (curve; at concurrency > 1 surface): a resume on another
    kind of machine or thread count would add rows an uninterrupted run does not have, in the same folder. It
    refuses. A fresh machine of the same kind (an empty cache: a SLURM node, a new session) measures a curve of its
    own that differs by the clock's noise, so the run folder keeps the cost its rows were pruned against, and the
    resume prunes against that one: before, such a run could never be finished."""
    import goose.running.decoding
    from goose.errors import GooseError

    base = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
            "method=goose", "budget=auto", "max_new_tokens=12", "speedup_reference=none", "n_prompts=2",
            f"results_dir={tmp_path / 'r'}", f"concurrency={concurrency}"]
    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "a"))
    first, _ = run_goose(*base)
    folder = Path(first["run_dir"])
    csv = folder / "results.csv"
    assert "cost_fingerprint" in csv.read_text().splitlines()[0]
    pruned = {r["cost_fingerprint"] for r in rows(csv)}
    assert len(pruned) == 1 and [p.name for p in folder.glob("cost-*.json")] == [f"cost-{min(pruned)}.json"]

    def lose_a_row():  # an interrupted run: its last row never written
        csv.write_text("".join(csv.read_text().splitlines(keepends=True)[:-1]))

    lose_a_row()
    again, out = run_goose(*base)  # the same cost (its cache read back): resumed as usual
    assert "1 prompt(s) to go" in out and again["prompts"] == 2
    lose_a_row()
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # a re-measured cost: the cached one with its widest width dearer
    for profile in (tmp_path / "b" / "profiles").glob("*.json"):
        cost = json.loads(profile.read_text())
        last = cost["seconds"][-1]
        cost["seconds"][-1] = [x * 3 for x in last] if isinstance(last, list) else last * 3
        profile.write_text(json.dumps(cost))
    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "b"))
    again, out = run_goose(*base)  # a fresh machine of the same kind: the folder's cost
    assert "1 prompt(s) to go" in out and "resumes with the cost its rows were pruned against" in out
    assert again["prompts"] == 2 and {r["cost_fingerprint"] for r in rows(csv)} == pruned
    lose_a_row()
    monkeypatch.setattr(goose.running.decoding, "profile_key", lambda *a: "another kind of machine")

    def measured(*a, **k):
        raise AssertionError("a cost measured on a machine that can only refuse")

    def refused_before_measuring(says):  # on a fresh machine: its cache (b) holds only a cost of its own
        monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "b"))
        for name in ("cost_curve", "cost_surface"):  # its own cost cannot be the kept one: refused before measuring
            monkeypatch.setattr(goose.running.decoding, name, measured)
        with pytest.raises(GooseError, match=f"pruned against another cost .*here not measured.*{says}"):
            run_goose(*base)
        monkeypatch.undo()

    refused_before_measuring("measured on another kind of machine")
    kept = folder / f"cost-{min(pruned)}.json"
    original = kept.read_text()
    kept.write_text(original.replace("[", "[0.5, ", 1))
    refused_before_measuring("does not hold the cost its name says .*this machine's cache holds no cost of that")
    kept.unlink()  # a folder written before run folders kept their cost
    refused_before_measuring("the folder does not keep it .*this machine's cache holds no cost of that")
    assert list(folder.glob("cost-*.json")) == []  # a refused run keeps no cost of its own
    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "a"))  # where it ran: its cache holds the rows' cost
    for damage in (lambda: kept.write_text(original.replace("[", "[0.5, ", 1)), lambda: kept.unlink()):
        damage()
        again, out = run_goose(*base)
        assert "from this machine's cache" in out and "1 prompt(s) to go" in out and again["prompts"] == 2
        assert kept.read_text() == original and {r["cost_fingerprint"] for r in rows(csv)} == pruned  # written again
        lose_a_row()


@pytest.mark.parametrize("budget,prunes,says", [
    ("60", True, "slower than AR on this machine (0.463x): B=60 verifies more than this machine gains; budget=auto "
                 "prunes each draft to what pays here"),
    ("auto", True, "slower than AR on this machine (0.463x): even the drafts budget=auto keeps do not pay here; AR "
                   "is what pays on these prompts"),
    ("60", False, "slower than AR on this machine (0.463x): its drafts cost more than they gain here, and it cannot "
                  "prune them (no budget=auto)"),
    ("fixed", True, "slower than AR on this machine (0.463x): its drafts as built cost more than this machine gains; "
                    "budget=auto prunes each draft to what pays here"),
])
def test_a_run_slower_than_ar_says_so_and_what_pays(budget, prunes, says, tmp_path, capsys):
    """`python run.py method=goose budget=60` on a CPU printed `speedup vs AR 0.463x` and nothing more; a reader
    benchmarking against GOOSE took it for GOOSE's speed. The summary says in one line that it is slower and what
    pays (budget=auto); a run as fast as AR or faster, or untimed, says nothing of it."""
    from goose.storage.run_records import print_summary

    s = {"method": "goose", "benchmark": "humaneval", "model": "m", "budget": budget, "memory": "prompt",
         "prompts": 3, "new_tokens": 30, "tau": 1.5, "mean_tau": 1.5, "tokens_per_s": 2.0, "speedup": 0.463,
         "speedup_prompts": 3, "speedup_sources": "interleaved", "speedup_stale": 0, "lossless": 3, "numerics": 0,
         "diverged": 0, "concurrency": 1, "speedup_reference": "interleaved"}
    print_summary(s, tmp_path / "results.csv", prunes=prunes)
    lines = capsys.readouterr().out.splitlines()
    assert [line.strip() for line in lines if "slower than AR" in line] == [says]
    print_summary({**s, "drafted": 0}, tmp_path / "results.csv", prunes=prunes)
    assert "it drafted nothing on these prompts" in capsys.readouterr().out
    for other in ({"speedup": 1.2}, {"speedup_prompts": 0}):
        print_summary({**s, **other}, tmp_path / "results.csv", prunes=prunes)
        assert "slower than AR" not in capsys.readouterr().out.replace(str(tmp_path), "")


def test_ar_says_it_is_the_baseline_and_a_speedup_above_tau_says_the_clock_was_noisy(tmp_path, capsys):
    """The fresh-clone trial of 2026-12-06: `python run.py n_prompts=2` ran AR (the default method) and printed
    `speedup vs AR 1.000x` alone; a repeat-the-last-token drafter timed at 1.336x with tau 1.255 was ranked above
    GOOSE with no word that no lossless method beats its tau on one engine."""
    from goose.storage.run_records import print_summary

    s = {"method": "mine", "benchmark": "humaneval", "model": "m", "budget": "fixed", "memory": "none",
         "prompts": 2, "new_tokens": 64, "tau": 1.255, "mean_tau": 1.255, "tokens_per_s": 2.0, "speedup": 1.336,
         "speedup_prompts": 2, "speedup_sources": "interleaved", "speedup_stale": 0, "lossless": 2, "numerics": 0,
         "diverged": 0, "concurrency": 1, "speedup_reference": "interleaved"}
    print_summary(s, tmp_path / "results.csv")
    out = capsys.readouterr().out
    assert "faster than its tau allows (1.336x > tau 1.255): the clock was noisy" in out
    print_summary({**s, "speedup": 1.2}, tmp_path / "results.csv")
    assert "tau allows" not in capsys.readouterr().out
    print_summary({**s, "method": "ar", "tau": 1.0, "speedup": 1.0, "speedup_sources": "self"}, tmp_path / "r.csv")
    assert "AR is the default method and every method's baseline: name one to compare, e.g. method=goose" in \
        capsys.readouterr().out
