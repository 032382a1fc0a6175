"""The method registry: `conf/method/<name>.yaml` names a drafter class (`_target_`) and overrides
its `Config` dataclass. run.py, bench.py and gpu_check.py all build drafters here, so a new method
is one drafter file plus one YAML (in conf/method/ or any folder on Hydra's search path)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from goose.core.sections import MethodSpec, check_keys, close_match, fields_named, refusal_reason
from goose.drafting.budget import AutoBudget, Budget
from goose.drafting.contract import (
    BUDGET,
    MEMORY,
    NO_MEMORY,
    Drafter,
    check_memory,
    check_roles,
    memory_label,
    no_auto_budget,
    role_fields,
    takes_budget,
)
from goose.errors import GooseError, MissingLibrary
from goose.paths import CONF, config_names, register_experiments
from goose.storage.metrics import FIXED


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

    register_experiments()
    try:
        with initialize_config_dir(str(CONF), version_base="1.3"):
            return compose("config", overrides=[*overrides, *search_path_override(search_path)])
    except HydraException as e:
        raise GooseError(str(e).splitlines()[0]) from None


def method_names(search_path: list[str] | tuple[str, ...] = ()) -> list[str]:
    """Every method config: conf/method/*.yaml, then those in the extra search-path folders."""
    return config_names("method", search_path)


def drafter_class(method: Mapping) -> type[Drafter]:
    from hydra.utils import get_class

    drafter = method.get("drafter") or {}
    target = drafter.get("_target_") if isinstance(drafter, Mapping) else None
    if not target:
        raise GooseError(f"method '{method.get('name')}': its YAML needs drafter._target_ (a Drafter class).")
    try:
        cls = get_class(target)
    except Exception as e:  # Hydra wraps the import error
        raise GooseError(f"method '{method.get('name')}': cannot import {target} ({e.__cause__ or e}). Is its folder "
                         "on PYTHONPATH?") from None
    if not (isinstance(cls, type) and issubclass(cls, Drafter)):
        raise GooseError(f"method '{method.get('name')}': {target} is not a goose Drafter.")
    return cls


PAPER_NODES = 60  # the paper's B: what a method that cannot prune its drafts takes when no budget is given


def method_budget(method, budget: Budget | None) -> Budget:
    """The budget a method runs at: the one given, else its default (budget=null): what pays on this hardware (auto)
    for a method that can prune its drafts, the paper's B for one that cannot (ar, lookahead). The paper's
    experiments state B = 60 themselves."""
    if budget is not None:
        return budget
    if isinstance(method, DictConfig):
        method = OmegaConf.to_container(method, resolve=True)
    prunes = isinstance(method, Mapping) and drafter_class(method).capabilities.auto_budget
    return Budget.parse("auto" if prunes else PAPER_NODES)


def resolve_method(method, budget: Budget, memory: str | None = None) -> MethodSpec:
    """A method section (plain or DictConfig) resolved: its drafter class and validated Config (the YAML's keys
    over the dataclass defaults, the top-level budget and, when given, the memory mode)."""
    if isinstance(method, DictConfig):
        method = OmegaConf.to_container(method, resolve=True)
    if not isinstance(method, Mapping):
        raise GooseError(f"method must be a section (got {method!r}); choose one: method=NAME.")
    check_keys("method", method, ["name", "drafter"], "a method config holds its name and drafter "
               "(drafter._target_ and the Config's fields).")
    cls = drafter_class(method)
    name = method.get("name") or cls.name
    check_roles(cls.Config, name)
    given = dict(method["drafter"])
    given.pop("_target_")
    fields = [f.name for f in dataclasses.fields(cls.Config)]
    for role in (BUDGET,):
        if any(k in role_fields(cls.Config, role) for k in given):
            raise GooseError(f"method '{name}': set the top-level budget=..., not drafter.budget.")
    check_keys("method.drafter", given, fields, f"method {name}'s settings are the fields of {cls.Config.__name__}: "
               f"{', '.join(fields) or '(none)'}.")
    values = dict(given)
    for f in role_fields(cls.Config, BUDGET):
        values[f] = budget.nodes
    for f in role_fields(cls.Config, MEMORY):
        if memory is not None:
            if f in given and given[f] != memory:
                raise GooseError(f"method '{name}': memory={memory} contradicts its drafter.{f}={given[f]}; set one "
                                 "of them.")
            values[f] = memory
    try:  # typed by the dataclass (a string where an int belongs is refused), then validated by it
        values = OmegaConf.to_container(OmegaConf.merge(OmegaConf.structured(cls.Config), values))
    except OmegaConfBaseException as e:  # OmegaConf's message names the value, not the field: say which
        key = getattr(e, "full_key", None) or getattr(e, "key", None)
        field = f"method.drafter.{key}={values.get(key)!r}: " if key in values else ""
        raise GooseError(f"method '{name}': {field}{str(e).splitlines()[0]}") from None
    try:
        config = cls.Config(**values)
    except GooseError:
        raise
    except Exception as e:  # a user's Config refusing a value (docs/adding.md: ValueError naming the field)
        raise config_refusal(name, cls.Config, values, e) from None
    return MethodSpec(name, cls, config)


def config_refusal(name: str, config: type, values: Mapping, error: Exception) -> GooseError:
    """One line for an exception a method's Config raised on its values: the method, the field(s) its message
    names or its failing check reads (goose.core.sections.fields_named) with their values, and where to set
    them; without a field, every value it was given."""
    named = fields_named(error, [f.name for f in dataclasses.fields(config)], lambda v: isinstance(v, config))
    if not named:
        given = ", ".join(f"{k}={v!r}" for k, v in values.items())
        return GooseError(f"method '{name}': {config.__name__} refused its settings ({given}): "
                          f"{refusal_reason(error)}.")
    roles = {f: role for role in (BUDGET, MEMORY) for f in role_fields(config, role)}
    where = " or ".join(f"{roles[f]}=..." if f in roles else f"method.drafter.{f}=..." for f in named)
    settings = ", ".join(f"{f}={values.get(f)!r}" for f in named)
    return GooseError(f"method '{name}': {config.__name__} refused {settings}: {refusal_reason(error)}; set "
                      f"{where} on the command line, or in the method's YAML.")


def make_drafter(method: MethodSpec, budget: Budget) -> Drafter:
    """A fresh drafter of `method`, budget=auto checked (the cost curve is handed to it later: prepare_drafter)."""
    drafter = method.build()
    if budget.auto and not drafter.capabilities.auto_budget:
        raise no_auto_budget(method.name)
    return drafter


def prepare_drafter(drafter: Drafter, budget: Budget, tokenizer, model_name: str, cost=None,
                    defer: bool = False) -> Drafter:
    """Arm a drafter for a loaded model: the tokenizer for drafters bound to one (REST's datastore: checked,
    or built on first use), and under budget=auto the pruner over the cost curve (`cost()`, measured or
    read once; `defer`: in a batch, which picks every request's width for the forward they share). The one
    place drafters are armed (runner, API, bench)."""
    if drafter.capabilities.tokenizer_bound:
        drafter.bind_tokenizer(tokenizer, model_name)
    if budget.auto:
        if not drafter.capabilities.auto_budget:
            raise no_auto_budget(drafter.name)
        if cost is not None:
            drafter.enable_auto_budget(AutoBudget(cost(), defer=defer))
    return drafter


def parse_spec(spec: str) -> tuple[str, str, str]:
    """`name[@budget][:memory]` -> (name, budget or "", memory or "")."""
    head, colon, memory = spec.partition(":")
    name, at, budget = head.partition("@")
    if (at and not budget) or (colon and not memory) or not name:
        raise GooseError(f"method spec {spec!r}: write NAME, NAME@BUDGET, NAME:MEMORY or NAME@BUDGET:MEMORY, "
                         "e.g. goose@60:run.")
    return name, budget, memory


def budget_label(budget: Budget, config) -> str | int:
    """The budget a row, a folder and a label record, derived here only: auto, the nodes where a number changes the
    drafter's drafts, else FIXED (ar, pld, tr: a budget sweep runs them once)."""
    if budget.auto:
        return "auto"
    return budget.nodes if takes_budget(config) else FIXED


def spec_label(name: str, drafter: Drafter, budget: Budget) -> str:
    """What a configuration is, whatever was typed: `suffix` and `suffix:run` are both
    `suffix@60:run`; `pld:run` is `pld` (no budget changes it, it keeps no state)."""
    label = budget_label(budget, drafter.config)
    b = "" if label == FIXED else str(label)
    m = memory_label(drafter.config)
    return name + (f"@{b}" if b else "") + (f":{m}" if m != NO_MEMORY else "")


def load_method(spec: str, model: str = "smollm2-135m", search_path: list[str] | tuple[str, ...] = (),
                extra: list[str] | tuple[str, ...] = ()) -> tuple[MethodSpec, Budget]:
    """`name[@budget][:memory]` (e.g. goose@16, pld@auto, tr:prompt, goose@60:run): the method resolved as
    run.py resolves it, and its budget."""
    name, b, memory = parse_spec(spec)
    if name not in method_names(search_path):
        known = method_names(search_path)
        raise GooseError(f"unknown method '{name}'{close_match(name, known)}; choose from {', '.join(known)}")
    if memory:
        check_memory(memory, f"method spec {spec!r}")
    overrides = [f"method={name}", f"model={model}", *extra] + ([f"budget={b}"] if b else [])
    cfg = compose_config(overrides, search_path)
    budget = method_budget(cfg.method, None if cfg.budget is None else Budget.parse(cfg.budget))
    return resolve_method(cfg.method, budget, memory or cfg.get("memory")), budget


def build_drafters(specs: list[str], model: str = "smollm2-135m", search_path: list[str] | tuple[str, ...] = (),
                   extra: list[str] | tuple[str, ...] = (), skip_missing: bool = False
                   ) -> dict[str, tuple[Drafter, Budget]]:
    """Drafters for `name[@budget][:memory]` specs, checked before any model loads (bench.py,
    gpu_check.py). `skip_missing`: a method whose own library is not installed is left out with a
    notice (a default list), rather than stopping the others (a list the user named)."""
    out = {}
    for spec in specs:
        method, budget = load_method(spec, model, search_path, extra)
        try:
            drafter = make_drafter(method, budget)
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
    """Once the model is loaded: every drafter of `build_drafters` prepared (prepare_drafter)."""
    return {spec: prepare_drafter(d, b, tokenizer, model_name, cost) for spec, (d, b) in built.items()}
