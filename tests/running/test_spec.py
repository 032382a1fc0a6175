"""The run specification: every setting declared once (goose.running.spec), typed below the runner."""

import shutil
import sys
import types
from pathlib import Path

import pytest
from conftest import hash_of, spec_of
from omegaconf import OmegaConf

from goose.errors import GooseError
from goose.paths import CONF
from goose.running.spec import SETTINGS


def test_config_yaml_and_the_spec_declare_the_same_settings():
    yaml = OmegaConf.load(CONF / "config.yaml")
    keys = {k for k in yaml if k not in ("defaults", "hydra")}
    declared = {s.key.split(".")[0] for s in SETTINGS}
    assert keys == declared, keys ^ declared


def test_adding_a_setting_is_one_declaration_and_its_yaml_line(tmp_path, monkeypatch):
    """A new setting, declared once as a RunSpec field (+ its YAML line), is checked, hashed, a row column, in
    the reference key and in the folder name, with nothing else edited: goose.running.spec is loaded again from
    its own source with that one field added, and conf/ with that one line."""
    import goose.running.spec as shipped

    source = Path(shipped.__file__).read_text()
    anchor = "    temperature: float = setting("  # the field after max_new_tokens: the folder reads B-M-N-W
    assert source.count(anchor) == 1, "RunSpec changed: put the new field after max_new_tokens"
    field = ('    warp: int = setting(whole("warp", 1, "how far"), reference=True, kind="int",\n'
             '                        folder=lambda s: f"W{s.warp}" if s.warp != 1 else "")\n')
    hash_of("method=goose")  # everything the checks below import is imported now, bound to the shipped spec
    warped = types.ModuleType(shipped.__name__)
    warped.__file__ = shipped.__file__
    monkeypatch.setitem(sys.modules, shipped.__name__, warped)  # what `from goose.running.spec import` finds
    exec(compile(source.replace(anchor, field + anchor), shipped.__file__, "exec"), warped.__dict__)
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "config.yaml").write_text((conf / "config.yaml").read_text().replace(
        "budget: null", "warp: 1               # how far\nbudget: null", 1))
    monkeypatch.setattr("goose.running.registry.CONF", conf)
    base, warped_spec = spec_of("method=goose", "budget=60"), spec_of("method=goose", "budget=60", "warp=3")
    assert warped_spec.warp == 3 and base.warp == 1
    assert warped_spec.settings("row")["warp"] == 3 and warped_spec.settings("reference")["warp"] == 3
    assert hash_of("method=goose", "warp=3") != hash_of("method=goose")
    assert warped_spec.folder_name("h") == "B60-Mprompt-N64-W3-h" and base.folder_name("h") == "B60-Mprompt-N64-h"
    assert "warp" in warped.declared_keys() and "warp" not in shipped.declared_keys()  # the shipped spec is untouched
    with pytest.raises(GooseError, match="warp must be an integer >= 1"):
        spec_of("warp=0")


def test_below_the_runner_values_are_typed():
    from goose.drafting.budget import AUTO_BUILD_NODES

    s = spec_of("method=goose", "budget=auto", "temperature=0.7", "n_prompts=null")
    assert s.budget.auto and s.budget_label == "auto" and s.n_prompts is None
    assert s.sampling.temperature == 0.7 and s.method.config.budget == AUTO_BUILD_NODES and s.memory_label == "prompt"
    assert spec_of("method=tr", "budget=60").budget_label == "fixed" and spec_of("method=pld").memory_label == "none"


@pytest.mark.parametrize("method,budget,label", [("goose", "auto", "auto"), ("pld", "auto", "auto"),
                                                 ("tr", "auto", "auto"), ("ar", 60, "fixed"),
                                                 ("lookahead", 60, 60)])
def test_a_methods_default_budget_is_what_pays_here(method, budget, label):
    """No budget given (conf/config.yaml's budget: null): auto where the method prunes its drafts, the paper's 60
    where it cannot (ar, lookahead: they refuse auto); the paper's experiments state their B themselves."""
    from goose.drafting.budget import Budget
    from goose.running.registry import compose_config, load_method
    from goose.running.spec import RunSpec

    spec = RunSpec.from_config(compose_config([f"method={method}"]))
    assert spec.budget == Budget.parse(budget) and spec.budget_label == label
    assert load_method(method)[1] == Budget.parse(budget)  # the Python API's and the measurement tools' default
    assert RunSpec.from_config(compose_config([f"method={method}", "budget=60"])).budget == Budget.parse(60)
