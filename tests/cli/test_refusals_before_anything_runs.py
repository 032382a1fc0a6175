"""The rest of the lists (issue #46 item 7): each mistake is one line saying what is wrong and how to fix it, and
a non-zero exit, before anything runs; never a silent local run, a raw Hydra error or a truthy string taken as
True. The launcher, sweep values, empty prompts, SGLang's format, the concurrency summary (the API's arguments:
tests/api/test_api_refusals.py)."""

import json
import shutil

import pytest
from runs import run_here, run_py

from goose.errors import GooseError


@pytest.fixture
def sbatch_on_path(monkeypatch):
    """As on a SLURM login node: sbatch is found (nothing is submitted by these checks)."""
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: f"/usr/bin/{name}")


def jsonl_file(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# --- 1, 2: the launcher ----------------------------------------------------------------------------------
def test_the_slurm_launcher_without_multirun_is_refused_not_run_here(sbatch_on_path, tmp_path):
    from goose.cli import refused

    why = refused(["hydra/launcher=slurm", "method=ar", f"results_dir={tmp_path}"])
    assert why is not None and "without -m" in why and "Add -m" in why and "submit" in why
    assert refused(["-m", "hydra/launcher=slurm", "method=ar", f"results_dir={tmp_path}"]) is None
    assert refused(["hydra/launcher=basic", "method=ar"]) is None  # Hydra's default launcher: runs here anyway


def test_a_misspelt_launcher_names_the_launchers_and_the_close_one(tmp_path):
    from goose.cli import refused

    why = refused(["-m", "hydra/launcher=slrum", "method=ar,pld", f"results_dir={tmp_path}"])
    assert why is not None and "hydra/launcher=slrum: no such launcher (did you mean slurm?)" in why
    assert all(name in why for name in ("basic", "slurm", "submitit_slurm"))


def test_a_launcher_option_needs_that_launcher(sbatch_on_path):
    from goose.cli import launcher_options_refused

    why = launcher_options_refused(["-m", "method=ar,pld", "hydra.launcher.partition=gpu"])
    assert why is not None and "option of the SLURM launcher" in why and "hydra/launcher=slurm" in why
    why = launcher_options_refused(["-m", "hydra/launcher=slurm", "hydra.launcher.partiton=gpu"])
    assert why is not None and "hydra.launcher.partiton: not an option of hydra/launcher=slurm" in why
    assert "(did you mean partition?)" in why
    assert launcher_options_refused(["-m", "hydra/launcher=slurm", "hydra.launcher.partition=gpu",
                                     "hydra.launcher.gpus_per_node=null"]) is None
    assert launcher_options_refused(["-m", "method=ar,pld"]) is None


@pytest.mark.integration
@pytest.mark.parametrize("args, says", [
    (["hydra/launcher=submitit_local"], "hydra/launcher=submitit_local launches the jobs of a multirun only"),
    (["-m", "hydra/launcher=slrum"], "no such launcher (did you mean slurm?)"),
    (["hydra.launcher.partition=gpu"], "hydra.launcher.partition is an option of the SLURM launcher"),
])
def test_launcher_mistakes_are_one_line_on_the_command_line(args, says, tmp_path):
    # submitit_local needs no sbatch: without -m it would decode here (a model path that does not exist makes a
    # run that gets through fail at once instead)
    r = run_here(*args, "model=hf", f"model.path={tmp_path / 'none'}", f"results_dir={tmp_path / 'res'}")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], r.stderr


# --- 3: every value of a sweep, before its first job -----------------------------------------------------
@pytest.mark.parametrize("sweep, says", [
    (["budget=60,3O", "method=goose"], "budget must be a whole number of nodes >= 1 or auto (got '3O')"),
    (["dtype=bfloat16,fp16"], "unknown dtype 'fp16'"),
    (["concurrency=4,0"], "concurrency must be an integer >= 1"),
    (["temperature=0.7,-1"], "temperature must be a number >= 0"),
    (["memory=run,prmopt", "method=goose"], "got 'prmopt'"),
    (["method=ar,goose", "+method.drafter.rhoo=1"], "unknown setting 'method.drafter.rhoo'"),
    (["method=goose,ar", "budget=auto"], "method 'ar' does not support budget=auto"),
])
def test_a_bad_value_anywhere_in_a_sweep_is_refused_before_the_first_job(sweep, says, tmp_path):
    from goose.cli import refused

    why = refused(["-m", *sweep, f"results_dir={tmp_path}"])
    assert why is not None and says in why and "No job was started" in why, why
    bad = sweep[0].split("=")[0]
    assert f"the sweep's job {bad}=" in why  # the job it would have been


def test_an_experiments_own_sweep_is_checked_with_the_command_lines_and_good_sweeps_go_through(tmp_path):
    from goose.cli import refused

    assert refused(["-m", "budget=16,auto", "method=goose,pld", "temperature=0,0.7", f"results_dir={tmp_path}"]) is None
    assert refused(["-m", "+experiment=budget_sweep-local", f"results_dir={tmp_path}"]) is None

    # the experiment sweeps benchmark and method; budget=16,3O on the command line replaces its budget sweep
    why = refused(["-m", "+experiment=budget_sweep-local", "budget=16,3O", f"results_dir={tmp_path}"])
    assert why is not None and "got '3O'" in why
    why = refused(["-m", "+experiment=budget_sweep-local", "max_new_tokens=0", f"results_dir={tmp_path}"])
    assert why is not None and "max_new_tokens must be an integer >= 1" in why


def test_slurm_jobs_are_not_asked_for_this_machines_gpu(sbatch_on_path, tmp_path):
    import torch

    from goose.cli import refused

    base = ["-m", "model=vicuna-7b", "method=ar,pld", f"results_dir={tmp_path}"]
    assert refused([*base, "hydra/launcher=slurm"]) is None  # the jobs run on the cluster's GPU nodes
    why = refused([*base, "hydra/launcher=slurm", "dtype=float16,fp16"])
    assert why is not None and "unknown dtype 'fp16'" in why  # what does not depend on the device still is
    if not torch.cuda.is_available():
        why = refused(base)  # here, every job would stop at its start
        assert why is not None and "no CUDA device" in why


@pytest.mark.integration
def test_a_sweep_with_a_bad_second_value_runs_nothing(tiny_folder, tmp_path):
    prompts = jsonl_file(tmp_path / "p.jsonl", [{"id": "q", "prompt": "a b c a b c"}])
    r = run_py("-m", "model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
               "method=pld", "max_new_tokens=4,O", f"results_dir={tmp_path / 'res'}")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "the sweep's job max_new_tokens=O" in lines[0], r.stderr
    assert not list((tmp_path / "res").rglob("results.csv"))  # the first job did not run either


# --- 5: empty prompts, refused when the file loads -------------------------------------------------------
def test_an_empty_jsonl_prompt_is_refused_at_load_with_file_line_and_id(tmp_path):
    from goose.benchmarks.builtin import prompts_file
    from goose.benchmarks.prompts import load_prompts

    f = jsonl_file(tmp_path / "p.jsonl", [{"id": "a", "prompt": "x = 1"}, {"id": "b", "prompt": ""}])
    for load in (lambda: prompts_file(str(f)), lambda: load_prompts("jsonl", path=str(f))):
        with pytest.raises(GooseError) as e:
            load()
        assert f"{f}:2: the prompt of id 'b' is empty" in str(e.value)
    unnamed = jsonl_file(tmp_path / "q.jsonl", [{"prompt": "x"}, {"prompt": "y"}, {"prompt": ""}])
    with pytest.raises(GooseError, match=r"q.jsonl:3: the prompt of id '2' is empty"):
        prompts_file(str(unnamed))


@pytest.mark.parametrize("bench, relative, content, says", [
    ("spec_bench", "spec_bench/question.jsonl",
     json.dumps({"question_id": 81, "turns": ["Say x.", ""]}) + "\n", "turn 2 of question id '81' is empty"),
    ("mt_bench", "spec_bench/question.jsonl",
     json.dumps({"question_id": 7, "turns": ["", "y"]}) + "\n", "turn 1 of question id '7' is empty"),
    ("classeval", "classeval/ClassEval_data.json",
     json.dumps([{"task_id": "ClassEval_0", "skeleton": "class A:\n"}, {"task_id": "ClassEval_1", "skeleton": ""}]),
     "question id 'ClassEval_1' is empty"),
    ("classeval", "classeval/ClassEval_data.json",
     json.dumps([{"task_id": "ClassEval_0", "skeleton": None}]), "question id 'ClassEval_0' is not text"),
])
def test_an_empty_prompt_from_any_loader_is_refused_at_load_naming_its_id(bench, relative, content, says, tmp_path):
    from goose.benchmarks.prompts import load_prompts

    (tmp_path / relative).parent.mkdir(parents=True)
    (tmp_path / relative).write_text(content)
    with pytest.raises(GooseError) as e:
        load_prompts(bench, data_root=str(tmp_path))
    assert f"benchmark '{bench}': the prompt of {says}" in str(e.value)


def test_an_empty_single_prompt_is_refused_before_the_model_loads(tmp_path):
    from goose.running.inputs import single_prompt_text

    with pytest.raises(GooseError, match="prompt= is empty"):
        single_prompt_text("", None)
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(GooseError, match="prompt_file .*empty.txt' is empty"):
        single_prompt_text(None, str(tmp_path / "empty.txt"))
    assert single_prompt_text("def f():", None) == "def f():"


def test_an_empty_prompt_at_concurrency_4_stops_the_run_before_any_work(tiny_folder, tmp_path, run_goose):
    f = jsonl_file(tmp_path / "p.jsonl", [{"id": f"q{i}", "prompt": "" if i == 2 else f"x{i} = {i}\n"}
                                          for i in range(4)])
    with pytest.raises(GooseError, match=r"p.jsonl:3: the prompt of id 'q2' is empty"):
        run_goose("model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={f}", "method=pld",
                  "n_prompts=null", "max_new_tokens=8", "concurrency=4", f"results_dir={tmp_path / 'res'}")
    assert not (tmp_path / "res").exists() or not list((tmp_path / "res").rglob("results.csv"))


# --- 6: SGLang's format ----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [-1, 0, True, 2.5])
def test_an_sglang_size_below_one_is_refused(size):
    from goose.engine.draft import Draft
    from goose.exports.sglang import batch_to_sglang, to_sglang

    draft = Draft([5, 6, 7], [-1, 0, 1])
    with pytest.raises(GooseError, match="SGLang draft size must be an integer >= 1"):
        to_sglang(draft, size)
    with pytest.raises(GooseError, match="SGLang draft size must be an integer >= 1"):
        batch_to_sglang([draft], size)


@pytest.mark.parametrize("tokens, mask, says", [
    ([1, 2, 3], [[1, 0, 0], [1, 1, 0], [0, 1, 1]], "not one path from the root"),  # row 2 skips the root
    ([1, 2, 3, 4], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 1, 1]], "not one path from the root"),
    ([1, 2, 3], [[1, 0, 0], [1, 1, 1], [1, 0, 1]], "a node after it"),
    ([1, 2], [[1, 1], [1, 1]], "row 0 must mark the root alone"),
    ([1, 2], [[1, 0], [1, 2]], "entries must be 0 or 1"),
    ([1, 2], [[1, 0], [1]], "must be 2 x 2 for 2 tokens (row 1 has 1 entry)"),
    ([1, 2, 3], [[1, 0, 0], [1, 1, 0]], "must be 3 x 3 for 3 tokens (2 rows)"),
    ([1, 2], [1, 0, 1, 1], "split a flat array of 4 into rows of 2 yourself"),
    ([], [], "has no tokens"),
])
def test_an_sglang_mask_that_is_not_a_tree_is_refused(tokens, mask, says):
    from goose.exports.sglang import from_sglang

    with pytest.raises(GooseError) as e:
        from_sglang(tokens, mask)
    assert says in str(e.value)


def test_every_mask_to_sglang_writes_reads_back_and_one_cut_off_the_root_does_not():
    import random

    from goose.engine.draft import Draft
    from goose.exports.sglang import bfs_order, from_sglang, to_sglang

    rng = random.Random(0)
    cut = 0
    for _ in range(50):
        n = rng.randint(1, 12)
        parents = [-1] + [rng.randrange(i) for i in range(1, n)]
        draft = Draft([rng.randrange(100) for _ in range(n)], parents)
        for size in (1, n, n + 3):
            tokens, mask = to_sglang(draft, size)
            back = from_sglang(tokens, mask)  # accepted, and the same tree: its own mask is the one written
            assert back.tokens == tokens
            rows = []
            for i, p in enumerate(back.parents):
                rows.append([*(rows[p][: p + 1] if p >= 0 else []), *[0] * (size - max(p, -1) - 1)])
                rows[i][i] = 1
            assert rows == mask
            deep = [i for i, p in enumerate(back.parents) if p > 0]  # a node below the root's children
            if deep:  # its row without the root still marks its parent: once read as a tree
                broken = [list(r) for r in mask]
                broken[deep[0]][0] = 0
                with pytest.raises(GooseError, match="not a tree mask"):
                    from_sglang(tokens, broken)
                cut += 1
        order = bfs_order(parents)
        assert from_sglang(*to_sglang(draft, n)).tokens == [draft.tokens[i] for i in order]
    assert cut > 20


# --- 7: the concurrency summary --------------------------------------------------------------------------
def summary(**over):
    s = {"method": "goose", "benchmark": "jsonl", "model": "tiny", "budget": 60, "memory": "prompt", "prompts": 2,
         "new_tokens": 16, "tau": 2.0, "mean_tau": 2.0, "tokens_per_s": 10.0, "speedup": 1.5, "speedup_prompts": 2,
         "speedup_sources": "interleaved", "speedup_reference": "interleaved", "speedup_stale": 0, "lossless": 2,
         "numerics": 0, "diverged": 0, "config_hash": "h"}
    return {**s, **over}


def test_the_summary_at_concurrency_says_batched_ar(tmp_path, capsys):
    from goose.storage.result_files import ResultsFile
    from goose.storage.run_records import print_summary

    path = tmp_path / "results.csv"
    for i in range(2):
        ResultsFile(path).append({"prompt_id": f"p{i}", "config_hash": "h", "concurrency": 4})
    print_summary(summary(), path)  # as the runner gives it: the concurrency is the rows'
    out = capsys.readouterr().out
    assert "speedup vs AR 1.500x (batched AR timing at concurrency 4, 2/2 prompts)" in out
    assert "interleaved AR timing" not in out
    print_summary(summary(concurrency=1), path)
    assert "(interleaved AR timing, 2/2 prompts)" in capsys.readouterr().out
    print_summary(summary(speedup_sources="self"), path)
    assert "(AR is the method, 2/2 prompts)" in capsys.readouterr().out


@pytest.mark.integration
def test_a_run_at_concurrency_2_prints_batched_ar(tiny_folder, tmp_path, run_goose):
    f = jsonl_file(tmp_path / "p.jsonl", [{"id": f"q{i}", "prompt": f"def f{i}(x):\n    return x + {i}\n"}
                                          for i in range(2)])
    s, out = run_goose("model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={f}",
                       "method=pld", "budget=60", "n_prompts=null", "max_new_tokens=8", "concurrency=2", "warmup=0",
                       f"results_dir={tmp_path / 'res'}")
    assert s["speedup_prompts"] == 2
    assert "(batched AR timing at concurrency 2, 2/2 prompts)" in out and "interleaved AR timing" not in out


# --- a new user's trial: SGLang's format refuses in words, and takes numpy's integers ------------------------
@pytest.mark.parametrize("parents, says", [
    ([-1, 2, 1], "nodes [1, 2] cannot be reached from the root (their parents form a cycle)"),
    ([-1, 0, 7], "node 2's parent 7 is not another node of the draft (0..2)"),
    ([-1, 0, -1], "node 2 has parent -1 too, a second root"),
    ([-1, 0], "one parent per token (got 3 tokens and 2 parents)"),
    ([0, 0, 1], "node 0 of a draft is the root, with parent -1"),
])
def test_an_sglang_draft_that_is_not_a_tree_is_refused_not_cut(parents, says):
    from goose.engine.draft import Draft
    from goose.exports.sglang import batch_to_sglang, to_sglang

    draft = Draft([5, 6, 7], parents)
    for call in (lambda: to_sglang(draft, 4), lambda: batch_to_sglang([draft], 4)):
        with pytest.raises(GooseError) as e:
            call()
        assert says in str(e.value) and "not a tree" in str(e.value)


@pytest.mark.parametrize("call, says", [
    (lambda f: f.from_sglang(None, [[1]]), "SGLang tokens must be a list of token ids (got None)"),
    (lambda f: f.from_sglang(5, [[1]]), "SGLang tokens must be a list of token ids (got an int)"),
    (lambda f: f.from_sglang(["a", "b"], [[1, 0], [1, 1]]), "token ids, integers >= 0 (got 'a')"),
    (lambda f: f.from_sglang([None, 1], [[1, 0], [1, 1]]), "token ids, integers >= 0 (got None)"),
    (lambda f: f.from_sglang([3, -1], [[1, 0], [1, 1]]), "token ids, integers >= 0 (got -1)"),
    (lambda f: f.from_sglang([3, 4], None), "SGLang mask must be 2 rows of 2 entries for 2 tokens (got None)"),
    (lambda f: f.batch_to_sglang(None, 4), "batch_to_sglang takes a list of goose.engine.draft.Draft (got None)"),
    (lambda f: f.batch_to_sglang([[5, 6]], 4), "drafts[0] must be a goose.engine.draft.Draft (got a list)"),
    (lambda f: f.to_sglang([5, 6], 4), "a draft must be a goose.engine.draft.Draft (got a list)"),
])
def test_sglang_arguments_of_the_wrong_kind_are_refused_in_words(call, says):
    from goose.exports import sglang as sglang_format

    with pytest.raises(GooseError) as e:
        call(sglang_format)
    assert says in str(e.value)


def test_an_sglang_size_of_any_integer_type_is_taken():
    import numpy as np

    from goose.engine.draft import Draft
    from goose.exports.sglang import batch_to_sglang, from_sglang, to_sglang

    draft = Draft([5, 6, 7], [-1, 0, 1])
    assert to_sglang(draft, np.int64(4)) == to_sglang(draft, 4)
    assert batch_to_sglang([draft], np.int32(4)) == batch_to_sglang([draft], 4)
    tokens, mask = to_sglang(draft, 4)
    assert from_sglang(np.array(tokens), np.array(mask)).parents == from_sglang(tokens, mask).parents


@pytest.mark.parametrize("argv, says", [(["--size", "0"], "SGLang draft size must be an integer >= 1"),
                                        (["--after", "-1"], "--after is a number of verified steps"),
                                        (["--method", "goose@auto"], "give a fixed budget")])
def test_the_sglang_export_command_refuses_in_one_line_before_any_model_loads(argv, says, capsys, monkeypatch):
    from goose.exports import sglang

    monkeypatch.setattr("goose.models.loading.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit) as e:
        sglang.main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and says in err[0], err
