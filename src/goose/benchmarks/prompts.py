"""Benchmarks: where their files are found, how a benchmark config names its loader, and the prompts.

A benchmark is a YAML in conf/benchmark/ (or any folder on Hydra's search path) whose `loader._target_`
names a function `(spec: BenchmarkSpec, data: DataDirs) -> list[Prompt]` (the built-in ones are in
goose.benchmarks.builtin), so a new benchmark is one function plus one YAML, as a new method is.
Prompts are built exactly as the paper does (raw prompts, no chat template).

Data files are looked up, first found wins, in: data_dir=... (the command line), $GOOSE_DATA_DIR,
../shared/data beside the repository, and <cache>/data (where `make data` downloads them).
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from goose.core.sections import BenchmarkSpec, fields_named, refusal_reason, section
from goose.errors import GooseError
from goose.paths import CONF, REPO_ROOT, cache_root, config_names


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    later_turns: tuple[str, ...] = ()  # multi-turn: each later prompt carries the earlier answers
    category: str = ""  # Spec-Bench's category, MT-Bench's own (writing, ...); rows carry it


@dataclass(frozen=True)
class DataDirs:
    """The folders benchmark files are looked up in, in order."""

    roots: tuple[Path, ...]

    @classmethod
    def of(cls, configured: str | None = None) -> DataDirs:
        raw = [configured, os.environ.get("GOOSE_DATA_DIR"), str(REPO_ROOT.parent / "shared" / "data"),
               str(cache_root() / "data")]
        roots = []
        for r in raw:
            if r:
                p = Path(os.path.expanduser(r))
                roots.append(p if p.is_absolute() else REPO_ROOT / p)
        if configured and not roots[0].is_dir():  # never fall back silently past the folder the user named
            raise GooseError(f"data_dir={configured}: no such folder ({roots[0]}). Give the folder that holds the "
                             "benchmark files (docs/benchmarks.md), or leave data_dir out to use $GOOSE_DATA_DIR, "
                             "../shared/data or the cache.")
        return cls(tuple(dict.fromkeys(roots)))

    def find(self, relative: str) -> Path | None:
        """The first <root>/<relative> that is a file."""
        return next((r / relative for r in self.roots if (r / relative).is_file()), None)

    def describe(self) -> str:
        return ", ".join(map(str, self.roots))


def read_text_file(path: str | Path, what: str) -> str:
    """A text file's content, UTF-8 (a BOM is dropped), gzip-compressed or not; every fault one GooseError."""
    p = expand(path)
    if p.is_dir():
        raise GooseError(f"{what} '{p}' is a folder, not a file.")
    if not p.is_file():
        raise GooseError(f"{what} '{p}' does not exist.")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise GooseError(f"cannot read {what} '{p}': {e.strerror}.") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise GooseError(f"{what} '{p}' starts like a gzip file but does not decompress ({e}).") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise GooseError(f"{what} '{p}' is not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} (line "
                         f"{line}). Save it as UTF-8.") from None


def jsonl_records(path: str | Path, what: str = "prompt file") -> list[tuple[int, object]]:
    """(line number, parsed JSON) per non-blank line. Lines end at newlines only: a JSON string may hold
    U+2028 or other characters str.splitlines would split at."""
    p = expand(path)
    out = []
    for n, line in enumerate(read_text_file(p, what).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            raise GooseError(f"{p}:{n}: not valid JSON ({e.msg}).") from None
    return out


def expand(path: str | Path) -> Path:
    return Path(os.path.expanduser(str(path)))


def jsonl_dicts(path: Path, what: str = "benchmark file") -> list[dict]:
    rows = [r for _, r in jsonl_records(path, what)]
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
    if bad is not None:
        raise GooseError(f"{path}: record {bad + 1} is not a JSON object.")
    return rows


def check_turns(turns) -> None:
    if turns not in (None, 1, 2):
        raise GooseError(f"benchmark.turns must be 1 (first turns only) or 2 (both turns) (got {turns!r}).")


def benchmark_names() -> list[str]:
    return config_names("benchmark")


def benchmark_config(name: str):
    """A conf/benchmark config by name, typed (goose.core.sections.BenchmarkSpec), for scripts outside Hydra."""
    from omegaconf import OmegaConf

    if name not in benchmark_names():
        raise GooseError(f"unknown benchmark '{name}'; available: {', '.join(benchmark_names())}.")
    return section(BenchmarkSpec, f"benchmark {name}",
                   OmegaConf.to_container(OmegaConf.load(CONF / "benchmark" / f"{name}.yaml"), resolve=True))


def loader_of(spec):
    from hydra.utils import get_method

    target = (spec.loader or {}).get("_target_") if isinstance(spec.loader, dict) else None
    if not target:
        raise GooseError(f"benchmark '{spec.name}': its YAML needs loader._target_ (a function returning prompts).")
    try:
        return get_method(target)
    except Exception as e:  # Hydra wraps the import error
        raise GooseError(f"benchmark '{spec.name}': cannot import {target} ({e.__cause__ or e}).") from None


def load_benchmark(spec, data_root: str | None = None) -> list[Prompt]:
    """A benchmark's prompts through its loader. Ids must be unique: rows, resume and the analysis are keyed
    by them. Every turn must be text, none empty: refused here, before anything runs, not when it is reached."""
    check_turns(spec.turns)
    data = DataDirs.of(data_root)
    try:
        prompts = loader_of(spec)(spec, data)
    except ValueError as e:  # a loader refusing its settings (docs/adding.md); any other exception is a bug: traced
        raise loader_refusal(spec, e) from None
    seen: set[str] = set()
    for p in prompts:
        if p.id in seen:
            raise GooseError(f"benchmark '{spec.name}': question id '{p.id}' appears twice; each question needs its "
                             "own id (rows and resume are keyed by it).")
        seen.add(p.id)
        for i, text in enumerate((p.text, *p.later_turns)):
            if not isinstance(text, str) or text == "":
                turn = f"turn {i + 1} of question id '{p.id}'" if p.later_turns else f"question id '{p.id}'"
                what = "empty" if text == "" else f"not text (got {type(text).__name__})"
                raise GooseError(f"benchmark '{spec.name}': the prompt of {turn} is {what}; every prompt needs text "
                                 "(fix or remove it in the benchmark's file).")
    return prompts


def loader_refusal(spec, error: ValueError) -> GooseError:
    """One line for a ValueError of a benchmark's loader: the benchmark, the setting its message names or its
    failing check reads (`spec.path`, ...) and where to set it."""
    import dataclasses

    settable = [f.name for f in dataclasses.fields(spec) if f.name not in ("name", "loader")]
    named = fields_named(error, settable, lambda v: v is spec)
    settings = "".join(f" {f}={getattr(spec, f)!r}" for f in named)
    where = " or ".join(f"benchmark.{f}=..." for f in named)
    return GooseError(f"benchmark '{spec.name}': its loader refused{settings}: {refusal_reason(error)}"
                      + (f"; set {where}." if named else "."))


def load_prompts(name: str, data_root: str | None = None, path: str | None = None,
                 turns: int | None = None) -> list[Prompt]:
    """A benchmark's prompts by config name (scripts); `path` for jsonl, `turns` (mt_bench, spec_bench): 1 =
    first turns only, 2 = both (the config's default)."""
    spec = benchmark_config(name)
    changes = {k: v for k, v in (("path", path), ("turns", turns)) if v is not None}
    return load_benchmark(replace(spec, **changes), data_root)
