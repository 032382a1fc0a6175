"""The run specification: every setting of a run declared once, with what it is, and built once from the
Hydra config into typed values (nothing below the runner reads a DictConfig).

A top-level setting is a field of `RunSpec` made with `setting(...)`, which says how its value is parsed
and checked, whether it changes what a row contains (the config hash), whether it is a column of every
row, whether it decides AR's tokens (the reference key), what it adds to the run folder's name and, for
the analysis, whether rows that differ in it are another configuration of a method or of a benchmark.
Adding a setting is one such field plus its line (default and explanation) in conf/config.yaml.
Sections (model, method, benchmark, engine, logging) are typed the same way, and every key of the
composed config must be declared: `+bugdet=60` or `+benchmark.category=x` is refused, never ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from goose.benchmarks.prompts import check_turns
from goose.core.sections import (
    BenchmarkSpec,
    MethodSpec,
    ModelSpec,
    WandbSpec,
    check_keys,
    close_match,
    section,
    wandb_section,
)
from goose.core.values import is_flag, is_number, is_whole
from goose.drafting.budget import Budget
from goose.drafting.contract import check_memory, memory_label
from goose.engine.backends import check_backend, default_backend
from goose.engine.sampling import Sampling
from goose.errors import GooseError
from goose.models.loading import resolve_device, resolve_dtype

SETTING = "goose_setting"


class DeviceError(GooseError):
    """The device asked for is not on this machine (the runner then also checks the model, to say both)."""


@dataclass(frozen=True)
class Setting:
    """What one top-level setting is. `record(spec)` is the plain value rows, hashes and keys carry (default:
    the setting's own value); `hashed`/`reference` may depend on the spec (e.g. only when sampling)."""

    key: str
    parse: Callable[[Any], Any]
    hashed: bool | Callable[[RunSpec], bool] = True
    row: bool = True
    reference: bool | Callable[[RunSpec], bool] = False
    folder: Callable[[RunSpec], str] | None = None
    splits: str = ""  # "method" | "benchmark" | "sampling": what rows differing in it are, to the analysis
    kind: str = "text"  # its column's type in the row schema (text | int | float | bool)
    record: Callable[[RunSpec], Any] | None = None

    def value(self, spec: RunSpec) -> Any:
        return self.record(spec) if self.record else getattr(spec, self.key.replace(".", "_"))

    def applies(self, role: bool | Callable[[RunSpec], bool], spec: RunSpec) -> bool:
        return role(spec) if callable(role) else role


def setting(parse: Callable[[Any], Any], key: str = "", default: Any = dataclasses.MISSING, **roles):
    """A RunSpec field declaring a top-level setting (see `Setting`); `key` defaults to the field name. Its
    default is conf/config.yaml's; `default` here only lets a subclass add a setting after the others."""
    return field(default=default, metadata={SETTING: (key, parse, roles)})


# --- parsers: a raw config value -> a typed one, or one clear GooseError --------------------------------
def whole(name: str, low: int, what: str, null: str = "") -> Callable[[Any], int | None]:
    def parse(v):
        if v is None and null:
            return None
        if is_whole(v, low):
            return v
        raise GooseError(f"{name} must be an integer >= {low}{' or null (' + null + ')' if null else ''}: {what} "
                         f"(got {v!r}).")

    return parse


def one_of(name: str, choices: tuple[str, ...], null: bool = False) -> Callable[[Any], str | None]:
    def parse(v):
        if (v is None and null) or v in choices:
            return v
        raise GooseError(f"{name} must be one of {', '.join(choices)}{' or null' if null else ''} (got {v!r}).")

    return parse


def flag(name: str) -> Callable[[Any], bool]:
    def parse(v):
        if is_flag(v):
            return v
        raise GooseError(f"{name} must be true or false (got {v!r}).")

    return parse


def text(name: str, null: bool = True) -> Callable[[Any], str | None]:
    def parse(v):
        if v is None and null:
            return None
        if isinstance(v, str) or is_number(v):
            return str(v)
        raise GooseError(f"{name} must be a string{' or null' if null else ''} (got {v!r}).")

    return parse


def number(name: str) -> Callable[[Any], float]:
    def parse(v):
        if is_number(v):
            return v
        raise GooseError(f"{name} must be a number (got {v!r}).")

    return parse


def anything(v):
    return v


def budget_value(v) -> Budget | None:
    return None if v is None else Budget.parse(v)  # None: the method's default (registry.method_budget)


def memory_mode(v) -> str | None:
    check_memory(v, "memory setting", null_ok=True)
    return v


def sampling_only(spec: RunSpec) -> bool:
    """Sampling settings change tokens only when sampling: a greedy run hashes and keys without them."""
    return not spec.sampling.greedy


def sampling_folder(spec: RunSpec) -> str:
    return spec.sampling.label()


# --- the run specification ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    """One run, typed. Field order is the order of the run folder's name fragments."""

    model: ModelSpec
    method: MethodSpec
    benchmark: BenchmarkSpec
    logging: WandbSpec
    budget: Budget = setting(budget_value, record=lambda s: s.budget_label, folder=lambda s: f"B{s.budget_label}")
    memory: str | None = setting(memory_mode, record=lambda s: s.memory_label,
                                 folder=lambda s: f"M{s.memory_label}")
    max_new_tokens: int = setting(whole("max_new_tokens", 1, "tokens to generate"), reference=True, kind="int",
                                  folder=lambda s: f"N{s.max_new_tokens}", splits="benchmark")
    temperature: float = setting(number("temperature"), hashed=sampling_only, reference=sampling_only, kind="float",
                                 folder=sampling_folder, splits="sampling", record=lambda s: float(s.temperature))
    top_k: int = setting(anything, hashed=sampling_only, reference=sampling_only, splits="sampling", kind="int")
    top_p: float = setting(number("top_p"), hashed=sampling_only, reference=sampling_only, splits="sampling",
                           kind="float", record=lambda s: float(s.top_p))
    seed: int = setting(anything, hashed=sampling_only, reference=sampling_only, splits="sampling", kind="int")
    trial: int = setting(whole("trial", 1, "which full pass over the prompts this run is"), reference=True,
                         folder=lambda s: f"trial{s.trial}" if s.trial != 1 else "", kind="int")
    concurrency: int = setting(whole("concurrency", 1, "requests in flight, verified in one forward"),
                               hashed=lambda s: s.concurrency != 1, kind="int",
                               folder=lambda s: f"c{s.concurrency}" if s.concurrency != 1 else "")
    repeats: int = setting(whole("repeats", 1, "timed generations per prompt"), splits="method", kind="int")
    warmup: int = setting(whole("warmup", 0, "untimed generations first"), hashed=False, kind="int")
    speedup_reference: str = setting(one_of("speedup_reference", ("interleaved", "cached", "none")),
                                     splits="method")
    chat_template: bool = setting(flag("chat_template"), reference=True, splits="benchmark", kind="bool")
    # Off, it changes no hash, key or folder (the paper's protocol runs keep theirs); on, the answers are others.
    stop_at_loop: bool = setting(flag("stop_at_loop"), hashed=lambda s: s.stop_at_loop,
                                 reference=lambda s: s.stop_at_loop, splits="benchmark", kind="bool",
                                 folder=lambda s: "loopstop" if s.stop_at_loop else "")
    profile: bool = setting(flag("profile"), splits="method", kind="bool")
    device: str = setting(text("device", null=False), row=False, reference=True, record=lambda s: s.torch_device.type)
    dtype: str = setting(text("dtype", null=False), row=False, reference=True,
                         record=lambda s: str(s.torch_dtype).replace("torch.", ""))
    engine_backend: str = setting(text("engine.backend", null=False), key="engine.backend",
                                  row=False, reference=True, record=lambda s: s.backend)
    n_prompts: int | None = setting(whole("n_prompts", 1, "the first N prompts", null="all"), hashed=False,
                                    row=False)
    spread_prompts: bool = setting(flag("spread_prompts"), hashed=False, row=False, kind="bool")
    prompt: str | None = setting(text("prompt"), hashed=False, row=False)
    prompt_file: str | None = setting(text("prompt_file"), hashed=False, row=False)
    trace: bool = setting(flag("trace"), hashed=False, row=False)
    results_dir: str = setting(text("results_dir", null=False), hashed=False, row=False)
    run_dir: str | None = setting(text("run_dir"), hashed=False, row=False)
    accept_other_code: bool = setting(flag("accept_other_code"), hashed=False, row=False, kind="bool")
    data_dir: str | None = setting(text("data_dir"), hashed=False, row=False)
    rest_datastore: str | None = setting(text("rest_datastore"), hashed=False, row=False)  # read by rest.yaml
    # Resolved once, from the settings above (not settings themselves).
    torch_device: torch.device = field(default=torch.device("cpu"), repr=False)
    torch_dtype: torch.dtype = field(default=torch.float32, repr=False)
    backend: str = "eager"
    plain: dict = field(default_factory=dict, repr=False)  # the resolved config as given (config.yaml, W&B)

    # --- derived ---------------------------------------------------------------------------------------
    @property
    def sampling(self) -> Sampling:
        return Sampling(self.temperature, self.top_k, self.top_p, self.seed)

    @property
    def budget_label(self) -> str | int:
        """As given, or `fixed` for a method no numeric budget changes (a budget sweep runs it once)."""
        from goose.running.registry import budget_label  # start-up time: omegaconf only when a spec is labelled

        return budget_label(self.budget, self.method.config)

    @property
    def memory_label(self) -> str:
        return memory_label(self.method.config)

    @property
    def single_prompt(self) -> bool:
        return self.prompt is not None or self.prompt_file is not None

    def settings(self, role: str) -> dict[str, Any]:
        """key -> recorded value of every setting with `role` (hashed, row, reference) for this spec."""
        return {s.key: s.value(self) for s in SETTINGS if s.applies(getattr(s, role), self)}

    def plain_section(self, name: str) -> dict:
        """A section as rows, config.yaml and W&B record it: as given, the method's drafter as resolved
        (every Config field, defaults included)."""
        if name == "method":
            return {"name": self.method.name, "drafter": self.method.record()}
        return dict(self.plain.get(name) or {})

    def folder_name(self, chash: str) -> str:
        parts = [s.folder(self) for s in SETTINGS if s.folder is not None]
        return "-".join(p for p in parts if p) + f"-{chash}"

    # --- building ----------------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, cfg) -> RunSpec:
        """Check and type a composed config (a DictConfig or plain dict). Every fault is one GooseError;
        nothing is loaded or created."""
        from omegaconf import DictConfig, OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        if isinstance(cfg, DictConfig):
            try:
                plain = OmegaConf.to_container(cfg, resolve=True)
            except OmegaConfBaseException as e:
                raise GooseError(f"the config does not resolve: {str(e).splitlines()[0]}") from None
        else:
            plain = dict(cfg)
        plain.pop("hydra", None)
        top = {s.key.split(".")[0] for s in SETTINGS} | {"model", "method", "benchmark", "logging"}
        check_keys("", plain, top, "not a setting of this harness (python run.py --help lists them). A method's "
                   "own hyperparameters go under method.drafter.KEY=...")
        engine = plain.get("engine", {})
        if not isinstance(engine, Mapping):
            raise GooseError(f"engine must be a section (got engine={engine!r}); set engine.backend=eager|prepacked|"
                             "auto.")
        check_keys("engine", engine, ["backend"], "the engine takes engine.backend=eager|prepacked|auto.")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if SETTING not in f.metadata:
                continue
            key, parse, _ = f.metadata[SETTING]
            key = key or f.name
            raw = engine.get("backend", "auto") if key == "engine.backend" else plain.get(key)
            values[f.name] = parse(raw)
        Sampling(values["temperature"], values["top_k"], values["top_p"], values["seed"])  # refuses bad values
        model = section(ModelSpec, "model", plain.get("model"))
        benchmark = section(BenchmarkSpec, "benchmark", plain.get("benchmark"))
        check_turns(benchmark.turns)
        if values["prompt"] is not None and values["prompt_file"] is not None:
            raise GooseError("give prompt=... or prompt_file=..., not both.")
        if values["concurrency"] > 1 and values["speedup_reference"] == "cached":
            raise GooseError("speedup_reference=cached reuses AR timings of one request at a time; at concurrency > 1 "
                             "batched AR is timed beside the method's batch (interleaved) or not at all (none).")
        from goose.running.registry import method_budget, resolve_method  # start-up time: omegaconf only when built

        values["budget"] = method_budget(plain.get("method"), values["budget"])
        if plain.get("budget") is None:  # the folder's config.yaml and W&B record the budget the method runs at
            plain["budget"] = "auto" if values["budget"].auto else values["budget"].nodes
        method = resolve_method(plain.get("method"), values["budget"], values["memory"])
        device, dtype = resolved_device_dtype(values["device"], values["dtype"], model)
        backend = resolved_backend(values["engine_backend"], device, dtype)
        return cls(model=model, method=method, benchmark=benchmark, logging=wandb_section(plain.get("logging", {})),
                   torch_device=device, torch_dtype=dtype, backend=backend, plain=plain, **values)


def resolved_device_dtype(device: str, dtype: str, model: ModelSpec) -> tuple[torch.device, torch.dtype]:
    try:
        dev = resolve_device(device if device != "auto" else model.device)
    except GooseError as e:
        raise DeviceError(str(e)) from None
    return dev, resolve_dtype(dtype if dtype != "auto" else model.dtype, dev)


def resolved_backend(name: str, device: torch.device, dtype: torch.dtype) -> str:
    """engine.backend, checked against the device and dtype (auto: prepacked for fp32 on CPU, else eager)."""
    name = default_backend(device, dtype) if name == "auto" else name
    check_backend(name, device, dtype)
    return name


def _settings(spec_class: type | None = None) -> tuple[Setting, ...]:
    out = []
    for f in dataclasses.fields(spec_class or RunSpec):
        if SETTING in f.metadata:
            key, parse, roles = f.metadata[SETTING]
            out.append(Setting(key or f.name, parse, **roles))
    return tuple(out)


SETTINGS: tuple[Setting, ...] = _settings()


def setting_kinds() -> dict[str, str]:
    """The kind of each setting that is a row column: what goose.storage.row_schema.kind_of reads them as."""
    return {s.key: s.kind for s in SETTINGS if s.row}


GROUPS = ("model", "method", "benchmark", "logging", "experiment", "hydra")


def unknown_override(argv: list[str], command: str = "python run.py") -> str | None:
    """The first command-line `key=value` whose key is no setting and no config group, with a suggestion:
    said before Hydra says "use +key=value" (which would then be refused anyway); `command` is the entry point
    typed, whose --help the line points at."""
    top_keys = {s.key.split(".")[0] for s in SETTINGS}
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].lstrip("+~")
        top = key.replace("/", ".").split(".")[0].split("@")[0]
        if top and top not in top_keys and top not in GROUPS:
            near = close_match(top, [*top_keys, *GROUPS])
            drafter = f" (a method's own setting: method.drafter.{key}=...)" if not near and "." not in key else ""
            return f"unknown setting '{key}'{near}{drafter}: {command} --help lists them."
    return None


def setting_as_flag(argv: list[str], command: str = "python run.py", names=None, what: str = "a setting") -> str | None:
    """The first `--key` or `--key=value` whose key (dashes read as underscores) is one of `names` (default: run.py's
    settings and config groups): Hydra or argparse would print "unrecognized arguments"; said in one line with the
    form that works, pointing at `command`'s --help (none where the caller adds its own)."""
    names = set(names) if names is not None else {s.key.split(".")[0] for s in SETTINGS} | set(GROUPS) - {"hydra"}
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        key, _, value = arg[2:].partition("=")
        if not value and i + 1 < len(argv) and not argv[i + 1].startswith("-") and "=" not in argv[i + 1]:
            value = argv[i + 1]  # --method goose
        if key.replace("-", "_") in names:
            key = key.replace("-", "_")
            fix = f" ({command} --help lists them)" if command else ""
            return f"{arg.split('=')[0]} is {what}, not a flag: write {key}={value or 'VALUE'}{fix}"
    return None


def declared_keys() -> list[str]:
    """Every top-level key of conf/config.yaml must be one of these (and the other way round)."""
    return [s.key for s in SETTINGS]


def splitting(kind: str) -> list[str]:
    """The settings whose differing values make rows another configuration of a method, a benchmark (or
    the sampling columns), for the analysis."""
    return [s.key for s in SETTINGS if s.splits == kind]

