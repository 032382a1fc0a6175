"""The method registry: `conf/method/<name>.yaml` names a drafter class (`_target_`) and overrides
its `Config` dataclass. run.py, bench.py and gpu_check.py all build drafters here, so a new method
is one drafter file plus one YAML (in conf/method/ or any folder on Hydra's search path)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from goose.budget import Budget
from goose.drafter import Drafter, budget_field
from goose.errors import GooseError
from goose.metrics import FIXED

CONF = Path(__file__).resolve().parents[2] / "conf"


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


def resolve_method(method: DictConfig, budget: Budget):
    """(drafter class, its validated Config): the YAML's keys over the dataclass defaults, the budget
    from the top-level setting."""
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
    return cls, cls.Config(**values)


def make_drafter(method: DictConfig, budget: Budget) -> tuple[Drafter, dict]:
    """A drafter ready to run, and the record of its full configuration (for hashes, rows and
    config.yaml). budget=auto is checked here; the runner hands it the cost curve later."""
    cls, config = resolve_method(method, budget)
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


def load_method(spec: str, model: str = "smollm2-135m", search_path: list[str] | tuple[str, ...] = (),
                extra: list[str] | tuple[str, ...] = ()) -> tuple[DictConfig, Budget]:
    """`name` or `name@budget` (e.g. goose@16, pld@auto): the method's config as run.py composes it."""
    name, _, b = spec.partition("@")
    if name not in method_names(search_path):
        raise GooseError(f"unknown method '{name}'; choose from {', '.join(method_names(search_path))}")
    overrides = [f"method={name}", f"model={model}", *extra] + ([f"budget={b}"] if b else [])
    cfg = compose_config(overrides, search_path)
    return cfg.method, Budget.parse(cfg.budget)


def build_drafters(specs: list[str], model: str = "smollm2-135m", search_path: list[str] | tuple[str, ...] = (),
                   extra: list[str] | tuple[str, ...] = ()) -> dict[str, tuple[Drafter, Budget]]:
    """Drafters for `name[@budget]` specs, checked before any model loads (bench.py, gpu_check.py)."""
    out = {}
    for spec in specs:
        method, budget = load_method(spec, model, search_path, extra)
        out[spec] = (make_drafter(method, budget)[0], budget)
    return out


def arm(built: dict[str, tuple[Drafter, Budget]], cost, tokenizer_fingerprint: str) -> dict[str, Drafter]:
    """Once the model is loaded: the tokenizer check, and the cost curve (`cost()`) for budget=auto."""
    from goose.budget import AutoBudget

    out = {}
    for spec, (drafter, budget) in built.items():
        if drafter.capabilities.tokenizer_bound:
            drafter.check_tokenizer(tokenizer_fingerprint)
        if budget.auto:
            drafter.enable_auto_budget(AutoBudget(cost()))
        out[spec] = drafter
    return out
