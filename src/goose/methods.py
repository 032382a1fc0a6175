"""The method registry: `conf/method/<name>.yaml` names a drafter class (`_target_`) and overrides
its `Config` dataclass. run.py, bench.py and gpu_check.py all build drafters here, so a new method
is one drafter file plus one YAML (in conf/method/ or any folder on Hydra's search path)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from goose.budget import Budget
from goose.drafter import NO_MEMORY, Drafter, budget_field, check_memory, has_field, memory_label
from goose.errors import GooseError, MissingLibrary
from goose.metrics import FIXED
from goose.paths import CONF


def search_path_override(search_path: list[str] | tuple[str, ...]) -> list[str]:
    """Hydra's own way to add config folders: hydra.searchpath=[file:///abs/dir, ...]."""
    if not search_path:
        return []
    dirs = ",".join(f"file://{Path(d).expanduser().resolve()}" for d in search_path)
    return [f"hydra.searchpath=[{dirs}]"]


def compose_config(overrides: list[str], search_path: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The config run.py would get for these command-line overrides, composed in this process."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    try:
        with initialize_config_dir(str(CONF), version_base="1.3"):
            return compose("config", overrides=[*overrides, *search_path_override(search_path)])
    except HydraException as e:
        raise GooseError(str(e).splitlines()[0]) from None


def method_names(search_path: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Every method config: conf/method/*.yaml, then those in the extra search-path folders."""
    names = {p.stem for d in (CONF, *map(Path, search_path)) for p in (Path(d) / "method").glob("*.yaml")}
    return sorted(names)


def drafter_class(method: DictConfig) -> type[Drafter]:
    from hydra.utils import get_class

    target = method.get("drafter", {}).get("_target_")
    if not target:
        raise GooseError(f"method '{method.get('name')}': its YAML needs drafter._target_ (a Drafter class).")
    try:
        cls = get_class(target)
    except Exception as e:  # Hydra wraps the import error
        raise GooseError(f"method '{method.name}': cannot import {target} ({e.__cause__ or e}). Is its folder "
                         "on PYTHONPATH?") from None
    if not (isinstance(cls, type) and issubclass(cls, Drafter)):
        raise GooseError(f"method '{method.name}': {target} is not a goose Drafter.")
    return cls


def resolve_method(method: DictConfig, budget: Budget, memory: str | None = None):
    """(drafter class, its validated Config): the YAML's keys over the dataclass defaults, the budget
    and (when given) the memory mode from the top-level settings."""
    cls = drafter_class(method)
    given = OmegaConf.to_container(method.drafter, resolve=True)
    given.pop("_target_")
    if "budget" in given:
        raise GooseError(f"method '{method.name}': set the top-level budget=..., not drafter.budget.")
    try:
        values = OmegaConf.to_container(OmegaConf.merge(OmegaConf.structured(cls.Config), given))
    except OmegaConfBaseException as e:
        raise GooseError(f"method '{method.name}': {str(e).splitlines()[0]}") from None
    if budget_field(cls.Config):
        values["budget"] = budget.nodes
    if memory is not None and has_field(cls.Config, "memory"):
        if "memory" in given and given["memory"] != memory:
            raise GooseError(f"method '{method.name}': memory={memory} contradicts its drafter.memory="
                             f"{given['memory']}; set one of them.")
        values["memory"] = memory
    return cls, cls.Config(**values)


def make_drafter(method: DictConfig, budget: Budget, memory: str | None = None) -> tuple[Drafter, dict]:
    """A drafter ready to run, and the record of its full configuration (for hashes, rows and
    config.yaml). budget=auto is checked here; the runner hands it the cost curve later. `memory`
    (prompt | run) overrides the method's default where the method keeps state at all."""
    check_memory(memory, "memory setting", null_ok=True)
    cls, config = resolve_method(method, budget, memory)
    drafter = cls(config)
    if budget.auto and not drafter.capabilities.auto_budget:
        raise GooseError(f"method '{method.name}' does not support budget=auto (it cannot prune its drafts); "
                         "give a number of nodes, e.g. budget=60.")
    plain = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}
    return drafter, {"_target_": method.drafter._target_, **plain}


def budget_label(drafter: Drafter, budget) -> str | int:
    """The budget a row records: as given, or `fixed` for a method no numeric budget changes (so
    a budget sweep runs it once, not once per budget)."""
    return budget if budget == "auto" or budget_field(drafter.config) else FIXED


def parse_spec(spec: str) -> tuple[str, str, str]:
    """`name[@budget][:memory]` -> (name, budget or "", memory or "")."""
    head, colon, memory = spec.partition(":")
    name, at, budget = head.partition("@")
    if (at and not budget) or (colon and not memory) or not name:
        raise GooseError(f"method spec {spec!r}: write NAME, NAME@BUDGET, NAME:MEMORY or NAME@BUDGET:MEMORY, "
                         "e.g. goose@60:run.")
    return name, budget, memory


def spec_label(name: str, drafter: Drafter, budget: Budget) -> str:
    """What a configuration is, whatever was typed: `suffix` and `suffix:run` are both
    `suffix@60:run`; `pld:run` is `pld` (no budget changes it, it keeps no state)."""
    b = "auto" if budget.auto else str(budget.nodes) if budget_field(drafter.config) else ""
    m = memory_label(drafter.config)
    return name + (f"@{b}" if b else "") + (f":{m}" if m != NO_MEMORY else "")


def load_method(spec: str, model: str = "smollm2-135m", search_path: list[str] | tuple[str, ...] = (),
                extra: list[str] | tuple[str, ...] = ()) -> tuple[DictConfig, Budget, str | None]:
    """`name[@budget][:memory]` (e.g. goose@16, pld@auto, tr:prompt, goose@60:run): the method's config
    as run.py composes it, its budget and the memory mode asked for (None: the method's default)."""
    name, b, memory = parse_spec(spec)
    if name not in method_names(search_path):
        raise GooseError(f"unknown method '{name}'; choose from {', '.join(method_names(search_path))}")
    if memory:
        check_memory(memory, f"method spec {spec!r}")
    overrides = [f"method={name}", f"model={model}", *extra] + ([f"budget={b}"] if b else [])
    cfg = compose_config(overrides, search_path)
    return cfg.method, Budget.parse(cfg.budget), memory or cfg.get("memory")


def build_drafters(specs: list[str], model: str = "smollm2-135m", search_path: list[str] | tuple[str, ...] = (),
                   extra: list[str] | tuple[str, ...] = (), skip_missing: bool = False
                   ) -> dict[str, tuple[Drafter, Budget]]:
    """Drafters for `name[@budget][:memory]` specs, checked before any model loads (bench.py,
    gpu_check.py). `skip_missing`: a method whose own library is not installed is left out with a
    notice (a default list), rather than stopping the others (a list the user named)."""
    out = {}
    for spec in specs:
        method, budget, memory = load_method(spec, model, search_path, extra)
        try:
            drafter = make_drafter(method, budget, memory)[0]
        except MissingLibrary as e:
            if not skip_missing:
                raise
            print(f"[goose] skipping {spec}: {e}", flush=True)
            continue
        label = spec_label(parse_spec(spec)[0], drafter, budget)
        if label in out:
            print(f"[goose] {spec} is {label}, already listed: run once", flush=True)
            continue
        out[label] = (drafter, budget)
    return out


def arm(built: dict[str, tuple[Drafter, Budget]], cost, tokenizer, model_name: str) -> dict[str, Drafter]:
    """Once the model is loaded: the tokenizer for drafters bound to one (REST's datastore: checked, or
    built on first use), and the cost curve (`cost()`) for budget=auto."""
    from goose.budget import AutoBudget

    out = {}
    for spec, (drafter, budget) in built.items():
        if drafter.capabilities.tokenizer_bound:
            drafter.bind_tokenizer(tokenizer, model_name)
        if budget.auto:
            drafter.enable_auto_budget(AutoBudget(cost()))
        out[spec] = drafter
    return out
