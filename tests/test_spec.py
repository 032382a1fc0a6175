"""The run specification: every setting declared once (goose.running.spec), typed below the runner."""

import dataclasses
import shutil

import pytest
from conftest import hash_of, spec_of
from omegaconf import OmegaConf

from goose.errors import GooseError
from goose.paths import CONF
from goose.running.spec import SETTINGS, RunSpec, setting, whole


def test_config_yaml_and_the_spec_declare_the_same_settings():
    yaml = OmegaConf.load(CONF / "config.yaml")
    keys = {k for k in yaml if k not in ("defaults", "hydra")}
    declared = {s.key.split(".")[0] for s in SETTINGS}
    assert keys == declared, keys ^ declared


def test_adding_a_setting_is_one_declaration_and_its_yaml_line(tmp_path, monkeypatch):
    """A new setting, declared once as a RunSpec field (+ its YAML line), is checked, hashed, a row column, in
    the reference key and in the folder name, with nothing else edited."""
    import goose.running.spec as spec_module

    @dataclasses.dataclass(frozen=True)
    class Warped(RunSpec):
        warp: int = setting(whole("warp", 1, "how far"), reference=True, kind="int", default=1,
                            folder=lambda s: f"W{s.warp}" if s.warp != 1 else "")

    cls = Warped
    monkeypatch.setattr(spec_module, "RunSpec", cls)
    monkeypatch.setattr(spec_module, "SETTINGS", spec_module._settings(cls))
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "config.yaml").write_text((conf / "config.yaml").read_text().replace(
        "budget: 60", "warp: 1               # how far\nbudget: 60", 1))
    monkeypatch.setattr("goose.running.registry.CONF", conf)
    base, warped = spec_of("method=goose"), spec_of("method=goose", "warp=3")
    assert warped.warp == 3 and base.warp == 1
    assert warped.settings("row")["warp"] == 3 and warped.settings("reference")["warp"] == 3
    assert hash_of("method=goose", "warp=3") != hash_of("method=goose")
    assert warped.folder_name("h") == "B60-Mprompt-N64-W3-h" and base.folder_name("h") == "B60-Mprompt-N64-h"
    assert "warp" not in {x.key for x in spec_module._settings(RunSpec)}  # the shipped spec is untouched
    with pytest.raises(GooseError, match="warp must be an integer >= 1"):
        spec_of("warp=0")


def test_below_the_runner_values_are_typed():
    from goose.drafting.budget import AUTO_BUILD_NODES

    s = spec_of("method=goose", "budget=auto", "temperature=0.7", "n_prompts=null")
    assert s.budget.auto and s.budget_label == "auto" and s.n_prompts is None
    assert s.sampling.temperature == 0.7 and s.method.config.budget == AUTO_BUILD_NODES and s.memory_label == "prompt"
    assert spec_of("method=tr").budget_label == "fixed" and spec_of("method=pld").memory_label == "none"
