"""A new user's trial (issue: chat templates, swept paths, method.drafter.KEY=VALUE, Hydra's own errors): each
mistake is one `error: ...` line saying what is wrong and how to fix it, exit 2, before any work; in a sweep,
before its first job ("No job was started")."""

import json

import pytest
from runs import run_here, run_py


def jsonl_file(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def prompts(tmp_path):
    return jsonl_file(tmp_path / "p.jsonl", [{"id": "q", "prompt": "a b c a b c"}])


def one_line(r, says):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], r.stderr


# --- 1: chat_template=true on a tokenizer without a chat template ------------------------------------------
def test_a_tokenizer_without_a_chat_template_is_refused_in_one_line(tiny_folder):
    from transformers import AutoTokenizer

    from goose.errors import GooseError
    from goose.running.inputs import build_input

    tok = AutoTokenizer.from_pretrained(str(tiny_folder))
    assert not getattr(tok, "chat_template", None)
    with pytest.raises(GooseError, match="has no chat template.*chat_template=false"):
        build_input(tok, [], "a b c", chat=True)
    assert build_input(tok, [], "a b c", chat=False)


def test_a_sweep_over_chat_template_is_refused_before_its_first_job(tiny_folder, prompts, tmp_path):
    from goose.cli import refused

    why = refused(["-m", "model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
                   "chat_template=false,true", f"results_dir={tmp_path}"])
    assert why is not None and "has no chat template" in why and "No job was started" in why, why


@pytest.mark.integration
def test_chat_template_true_without_a_template_is_one_line_and_decodes_nothing(tiny_folder, prompts, tmp_path):
    r = run_here("model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompts}",
                 "method=goose", "n_prompts=1", "max_new_tokens=4", "chat_template=true",
                 f"results_dir={tmp_path / 'res'}")
    one_line(r, "chat_template=true: the tokenizer of model")
    assert not list((tmp_path / "res").rglob("results.csv"))


# --- 2: every swept path, before the first job -------------------------------------------------------------
@pytest.mark.parametrize("bad, says", [
    ("benchmark.path", "is empty"),
    ("benchmark.path=nope", "does not exist"),
    ("model.path=/nope", "model path '/nope' does not exist"),
    ("model.path=notamodel", "not a Hugging Face model folder"),
])
def test_every_swept_path_is_checked_before_the_first_job(bad, says, tiny_folder, prompts, tmp_path):
    from goose.cli import refused

    empty = jsonl_file(tmp_path / "empty.jsonl", [{"id": "e", "prompt": ""}])
    (tmp_path / "notamodel").mkdir()
    paths = {"benchmark.path": f"{prompts},{empty}", "benchmark.path=nope": f"{prompts},{tmp_path / 'nope.jsonl'}",
             "model.path=/nope": f"{tiny_folder},/nope", "model.path=notamodel": f"{tiny_folder},{tmp_path}/notamodel"}
    model_paths = paths[bad] if bad.startswith("model") else str(tiny_folder)
    bench_paths = paths[bad] if bad.startswith("benchmark") else str(prompts)
    why = refused(["-m", "model=hf", f"model.path={model_paths}", "benchmark=jsonl", f"benchmark.path={bench_paths}",
                   f"results_dir={tmp_path / 'res'}"])
    assert why is not None and says in why and "No job was started" in why, why
    assert f"the sweep's job {bad.split('=')[0]}=" in why


def test_a_sweep_of_good_paths_goes_through(tiny_folder, prompts, tmp_path):
    from goose.cli import refused

    other = jsonl_file(tmp_path / "q.jsonl", [{"id": "r", "prompt": "x y z"}])
    assert refused(["-m", "model=hf", f"model.path={tiny_folder}", "benchmark=jsonl",
                    f"benchmark.path={prompts},{other}", "method=ar,pld", f"results_dir={tmp_path / 'res'}"]) is None


# --- 3: method.drafter.KEY=VALUE as documented -------------------------------------------------------------
def test_method_drafter_key_value_works_without_a_plus_and_a_typo_gets_the_close_match(tmp_path):
    from goose.cli import drafter_overrides, refused

    assert drafter_overrides(["method=goose", "method.drafter.rho=0.5", "+method.drafter.k=2"]) == [
        "method=goose", "++method.drafter.rho=0.5", "+method.drafter.k=2"]
    base = ["-m", "method=goose", "budget=8,16", f"results_dir={tmp_path}"]
    assert refused(drafter_overrides([*base, "method.drafter.rho=0.5"])) is None
    why = refused(drafter_overrides([*base, "method.drafter.rhoo=1"]))
    assert why is not None and "unknown setting 'method.drafter.rhoo' (did you mean rho?)" in why, why


@pytest.mark.integration
def test_method_drafter_key_value_on_the_command_line(tmp_path):
    r = run_here("method=goose", "method.drafter.rho=0.5", "--cfg", "job")
    assert r.returncode == 0 and "rho: 0.5" in r.stdout, r.stderr
    r = run_here("method=goose", "method.drafter.rhoo=1", "model=hf", f"model.path={tmp_path}",
                 f"results_dir={tmp_path / 'res'}")
    one_line(r, "(did you mean rho?)")


# --- 4: Hydra's own multi-line errors ----------------------------------------------------------------------
def test_a_misspelt_experiment_is_one_line_with_the_close_match():
    from goose.cli import refused

    why = refused(["-m", "+experiment=tabel1-local"])
    assert why is not None and "+experiment=tabel1-local: no such experiment (did you mean table1-local?)" in why
    assert refused(["+experiment=table1-local", "--cfg", "job"]) is None


def test_a_launcher_with_a_dot_and_a_launcher_option_of_the_wrong_type():
    from goose.cli import launcher_options_refused

    why = launcher_options_refused(["-m", "method=ar,pld", "hydra.launcher=slurm"])
    assert why is not None and "write hydra/launcher=slurm" in why, why
    why = launcher_options_refused(["-m", "hydra/launcher=slurm", "hydra.launcher.gpus_per_node=two"])
    assert why is not None and "hydra.launcher.gpus_per_node=two" in why and "type Integer" in why, why
    assert launcher_options_refused(["-m", "hydra/launcher=slurm", "hydra.launcher.gpus_per_node=2",
                                     "hydra.launcher.partition=gpu"]) is None


@pytest.mark.integration
@pytest.mark.parametrize("args, says", [
    (["-m", "+experiment=tabel1-local"], "did you mean table1-local?"),
    (["-m", "hydra.launcher=slurm"], "write hydra/launcher=slurm"),
    (["-m", "hydra/launcher=slurm", "hydra.launcher.gpus_per_node=two"], "gpus_per_node takes a value of type"),
])
def test_hydras_own_errors_are_one_line(args, says, tmp_path):
    r = run_here(*args, f"results_dir={tmp_path / 'res'}")
    one_line(r, says)


# --- 5: a flag of Hydra's after the overrides ----------------------------------------------------------------
def test_multirun_after_an_override_says_it_goes_first():
    """`run.py benchmark=humaneval -m model=...` gave argparse's "unrecognized arguments: model=..." with no hint."""
    from goose.cli import refused

    for flag in ("-m", "--multirun"):
        why = refused(["benchmark=humaneval", flag, "model=smollm2-135m", "n_prompts=1"])
        assert why is not None and "\n" not in why, why
        assert f"{flag} must come before the overrides" in why, why
        assert f"python run.py {flag} benchmark=humaneval model=smollm2-135m n_prompts=1" in why, why
    assert "must come before" not in (refused(["-m", "benchmark=humaneval", "model=smollm2-135m"]) or "")


@pytest.mark.integration
def test_multirun_after_an_override_is_one_line_exit_2(tmp_path):
    r = run_py("benchmark=humaneval", "-m", "method=ar,pld", f"results_dir={tmp_path / 'res'}")
    one_line(r, "-m must come before the overrides")


# --- 6: a user's Config or loader refusing a value (#61) -----------------------------------------------------
USER_DRAFTER = '''
from dataclasses import dataclass

from goose.drafting.contract import budget_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes


def check(ok, message):
    if not ok:
        raise ValueError(message)


@dataclass(frozen=True)
class PickyConfig:
    length: int = 4
    budget: int = budget_setting(60)

    def __post_init__(self):
        if self.length == 0:
            raise ValueError("must be at least 1")  # the message does not name the field: the check does
        check(self.length < 100, "far too long")  # so does a helper's call
        if self.length == 7:
            raise ValueError("length 7 is unlucky")  # the message names it
        lucky = self.length != 13
        if not lucky:
            raise RuntimeError("no reason given")  # neither names a field: every value is said


class PickyDrafter(TreeDrafter):
    name = "picky"
    Config = PickyConfig
    sources = (Source("picky"),)

    def propose(self, context):
        return self.finish(TreeNodes(context[-1]))
'''


@pytest.fixture
def picky(tmp_path, monkeypatch):
    """A user's drafter whose Config validates in __post_init__, on Hydra's search path (tmp_path/user)."""
    user = tmp_path / "user"
    (user / "method").mkdir(parents=True)
    (user / "picky_drafter.py").write_text(USER_DRAFTER)
    (user / "method" / "picky.yaml").write_text("name: picky\ndrafter:\n  _target_: picky_drafter.PickyDrafter\n"
                                                 "  length: 4\n")
    monkeypatch.syspath_prepend(str(user))
    return user


@pytest.mark.parametrize("length, says", [
    (0, "method 'picky': PickyConfig refused length=0: must be at least 1 (ValueError); set method.drafter.length="),
    (100, "method 'picky': PickyConfig refused length=100: far too long (ValueError); set method.drafter.length="),
    (7, "method 'picky': PickyConfig refused length=7: length 7 is unlucky (ValueError)"),
    (13, "method 'picky': PickyConfig refused its settings (length=13, budget=60): no reason given (RuntimeError)."),
])
def test_a_users_config_refusing_a_value_is_one_line_naming_the_method_and_the_field(picky, length, says, tmp_path,
                                                                                     capsys):
    """Built-in Configs raise GooseError; a user's raised ValueError (or anything) and got Hydra's traceback."""
    from hydra import compose, initialize_config_dir

    from goose.paths import CONF
    from goose.running.runner import exit_status, run

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("config", overrides=[f"hydra.searchpath=[file://{picky}]", "method=picky", "budget=60",
                                           f"method.drafter.length={length}", f"results_dir={tmp_path / 'res'}"])
    assert exit_status(lambda: run(cfg)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {says}"), err
    assert not (tmp_path / "res").exists()


def test_a_sweep_with_a_users_refused_value_stops_before_its_first_job(picky, tmp_path):
    from goose.cli import refused

    why = refused(["-m", f"hydra.searchpath=[file://{picky}]", "method=picky", "method.drafter.length=4,0",
                   f"results_dir={tmp_path}"])
    assert why is not None and "\n" not in why, why
    assert "PickyConfig refused length=0: must be at least 1 (ValueError)" in why and "No job was started" in why


def test_a_users_loader_refusing_a_setting_is_one_line_naming_the_benchmark_and_the_setting():
    from goose.benchmarks.prompts import load_benchmark
    from goose.core.sections import BenchmarkSpec
    from goose.errors import GooseError

    def load(spec, data):
        if spec.turns not in (None, 1):
            raise ValueError("one turn only")
        raise ValueError("no prompts today")

    import sys

    sys.modules[__name__].picky_loader = load
    spec = BenchmarkSpec("mine", loader={"_target_": f"{__name__}.picky_loader"}, turns=2)
    said = r"^benchmark 'mine': its loader refused turns=2: one turn only \(ValueError\); set benchmark.turns=\.\.\.\.$"
    with pytest.raises(GooseError, match=said):
        load_benchmark(spec)
    with pytest.raises(GooseError, match=r"^benchmark 'mine': its loader refused: no prompts today \(ValueError\)\.$"):
        load_benchmark(BenchmarkSpec("mine", loader={"_target_": f"{__name__}.picky_loader"}))


@pytest.mark.integration
def test_a_users_config_refusing_a_value_is_one_line_from_run_py(picky, tmp_path):
    r = run_py(f"hydra.searchpath=[file://{picky}]", "method=picky", "method.drafter.length=0",
               f"results_dir={tmp_path / 'res'}")
    one_line(r, "method 'picky': PickyConfig refused length=0: must be at least 1 (ValueError)")


# --- a setting written as a flag (the fresh-clone trial of 2026-12-06: Hydra printed its usage) ----------------
@pytest.mark.parametrize("argv, says", [
    (["--method", "goose"], "--method is a setting, not a flag: write method=goose (python run.py --help"),
    (["--n-prompts=3"], "write n_prompts=3"),
    (["method=pld", "--budget"], "write budget=VALUE"),
    (["-m", "--model", "smollm2-135m", "method=ar,pld"], "write model=smollm2-135m"),
])
def test_a_setting_written_as_a_flag_says_the_form_that_works(argv, says):
    one_line(run_here(*argv), says)
