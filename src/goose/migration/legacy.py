"""A results folder of row schema 4 (its config hash held the drafter's import path), read and verified: every
line intact, every row and outputs record of its configuration, its key the one its config.yaml gives when
rebuilt with this code (goose.storage.run_folder.legacy_config_hash); and what it becomes under schema 5 (a `Plan`).
goose.migration.rekey writes the plan; goose.migration.migrate is the command."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from goose.benchmarks.prompts import benchmark_config
from goose.core.fingerprints import digest
from goose.core.identity import ModelIdentity
from goose.errors import GooseError
from goose.migration.build_time import settled_data_fingerprint
from goose.paths import CONF
from goose.running.inputs import benchmark_prompts
from goose.storage.durable import read_lines
from goose.storage.result_files import CUT, OutputsFile, ResultsFile, row_check
from goose.storage.row_schema import ROW_SCHEMA, rekeyed, schema_of
from goose.storage.run_folder import LEGACY_ROW_SCHEMA, config_hash, legacy_config_hash

BUILDING = ".migrating"  # .<name>.migrating: the re-keyed copy of <name> being built
REPLACED = ".migrated"  # .<name>.migrated: the old <name> once its re-keyed copy is in place, until removed
REWRITTEN = ("results.csv", "outputs.jsonl", "config.yaml", "summary.json", "summary.csv")
NOT_CARRIED = (".lock",)  # a run makes its own lock


@dataclass
class Outcome:
    kind: str  # rekeyed | current | refused | skipped | cleaned
    folder: Path
    says: str = ""


@dataclass
class Plan:
    """A verified schema-4 folder and what it becomes."""

    folder: Path
    old: str
    new: str
    target: Path  # the folder's new path (the same path for a pinned run_dir)
    header: list[str]
    rows: list[dict]  # re-keyed, each with its new row_check
    outputs: list[dict]  # re-keyed
    config: dict  # config.yaml re-keyed
    torn: list[str]  # files whose unfinished last line is left out
    finish: bool = False  # the target already holds these rows: an interrupted migration, only the old is removed
    why: str = ""  # a re-key other than schema 4's, in words (goose.migration.build_time)


# --- rebuilding a stored configuration -------------------------------------------------------------------
def _located(target: str | None):
    """What the import path `target` names, if it still imports, else None (quietly: a moved class or function
    is expected here; Hydra's lookup would log an error for it)."""
    import importlib

    parts = str(target or "").split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name, None)
        return obj
    return None


def _importable(target: str | None):
    """The Drafter class `target` names, if it still imports."""
    from goose.drafting.contract import Drafter  # start-up time: torch only when migrating

    obj = _located(target)
    return obj if isinstance(obj, type) and issubclass(obj, Drafter) else None


def _loader_here(bench):
    """The benchmark section with a loader that imports here, for reading its prompts: the recorded one, else
    the loader of the benchmark config of the same name (folders of the claims sweep name loaders where they were,
    goose.benchmark_loaders.*; the recorded path stays in the spec, which the schema-4 key hashed). None where
    neither imports."""
    recorded = bench.loader.get("_target_") if isinstance(bench.loader, dict) else None
    if callable(_located(recorded)):
        return bench
    try:
        now = benchmark_config(bench.name)
    except GooseError:
        return None
    target = now.loader.get("_target_") if isinstance(now.loader, dict) else None
    return dataclasses.replace(bench, loader=now.loader) if callable(_located(target)) else None


def _registered(name: str, search_path: tuple[str, ...]):
    """The drafter class the method config `name` names now (conf/method/<name>.yaml or a search-path folder),
    composed as run.py composes it: a config that inherits its drafter through `defaults:` (the ablations) names
    it only there."""
    from omegaconf import OmegaConf

    from goose.running.registry import (  # start-up time: torch only when migrating
        compose_config,
        drafter_class,
        method_names,
    )

    if name not in method_names(search_path):
        return None
    method = OmegaConf.to_container(compose_config([f"method={name}"], search_path).method, resolve=False)
    return drafter_class(method)


def _defaults() -> dict:
    """conf/config.yaml's plain top-level values: a setting added after a folder was written reads as its
    default (a key it changes would not verify anyway)."""
    from omegaconf import OmegaConf

    from goose.running.spec import declared_keys  # start-up time: torch only when migrating

    raw = OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml"), resolve=False)
    tops = {k.split(".")[0] for k in declared_keys()}
    return {k: v for k, v in raw.items() if k in tops and not (isinstance(v, str) and "${" in v)}


def stored_spec(config: dict, search_path: tuple[str, ...] = ()):
    """The RunSpec a folder's config.yaml records, rebuilt with this code on this machine: device, dtype and
    backend as the identity recorded them (whatever this machine has), the drafter class from its recorded
    import path if that still imports, else from the method config of the same name. Returns (spec, the
    recorded import path)."""
    import torch

    from goose.drafting.contract import BUDGET, role_fields  # start-up time: torch only when migrating
    from goose.running.spec import RunSpec  # start-up time: torch only when migrating

    ident = config.get("identity") or {}
    plain = {k: v for k, v in config.items() if k != "identity"}
    method = plain.get("method")
    if not isinstance(method, dict) or not isinstance(method.get("drafter"), dict):
        raise GooseError("config.yaml has no method.drafter section")
    recorded = method["drafter"].get("_target_")
    cls = _importable(recorded) or _registered(str(method.get("name")), search_path)
    if cls is None:
        raise GooseError(f"its drafter {recorded} does not import and no method config is named "
                         f"{method.get('name')!r} (a user's method: put its folder on PYTHONPATH, or give "
                         "--search-path DIR)")
    given = {k: v for k, v in method["drafter"].items()
             if k != "_target_" and k not in role_fields(cls.Config, BUDGET)}  # the top-level budget sets it
    plain["method"] = {"name": method.get("name"), "drafter": {"_target_": f"{cls.__module__}.{cls.__qualname__}",
                                                               **given}}
    for k, v in _defaults().items():
        plain.setdefault(k, v)
    missing = [k for k in ("device", "dtype", "backend") if not ident.get(k)]
    if missing:
        raise GooseError(f"config.yaml's identity does not record {', '.join(missing)}")
    here = {**plain, "device": "cpu", "dtype": "float32", "engine": {"backend": "eager"}}  # valid on any machine
    spec = RunSpec.from_config(here)
    dtype = getattr(torch, str(ident["dtype"]), None)
    if not isinstance(dtype, torch.dtype):
        raise GooseError(f"config.yaml's identity records an unknown dtype {ident['dtype']!r}")
    engine = plain.get("engine") if isinstance(plain.get("engine"), dict) else {}
    spec = dataclasses.replace(spec, device=plain.get("device"), dtype=plain.get("dtype"),
                               engine_backend=engine.get("backend", "auto"), plain=plain,
                               torch_device=torch.device(str(ident["device"])), torch_dtype=dtype,
                               backend=str(ident["backend"]))
    return spec, recorded


def _batches(spec, rows: list[dict]) -> tuple[list[list[str] | None], str]:
    """(candidate prompt lists a concurrency > 1 key was computed over: the benchmark's first n_prompts, else the
    rows' prompts in order; [None] at concurrency 1, not hashed), and why the benchmark's could not be read ("" if
    they were)."""
    if spec.concurrency <= 1:
        return [None], ""
    out, why = [], ""
    bench = _loader_here(spec.benchmark)
    recorded = spec.benchmark.loader.get("_target_") if isinstance(spec.benchmark.loader, dict) else None
    if bench is None:
        why = (f"its benchmark loader {recorded} does not import and no benchmark config is named "
               f"{spec.benchmark.name!r}")
    else:
        try:
            out.append([p.id for p in benchmark_prompts(dataclasses.replace(spec, benchmark=bench), say=False)[1]])
        except (GooseError, OSError) as e:  # its data is not on this machine: the rows' prompts may be the list
            why = f"its benchmark's prompts do not read here ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    out.append(list(dict.fromkeys(str(r["prompt_id"]).split("#")[0] for r in rows)))
    return out, why


# --- reading a folder ------------------------------------------------------------------------------------
def load_config(path: Path) -> dict:
    from omegaconf import OmegaConf

    try:
        config = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception as e:  # a YAML or OmegaConf error: one line
        raise GooseError(f"config.yaml does not read: {str(e).splitlines()[0]}") from None
    if not isinstance(config, dict) or not isinstance(config.get("identity"), dict):
        raise GooseError("config.yaml holds no identity")
    return config


def _torn(path: Path) -> bool:
    """The file ends in an unfinished line (a killed writer's), which every reader leaves out."""
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def read_outputs(path: Path) -> list[dict]:
    """Every outputs record in order (superseded ones too); a damaged line refuses the folder."""
    reader = OutputsFile(path)
    reader.read()
    if reader.damaged:
        raise GooseError(f"a damaged outputs line ({reader.damaged[0]}): a rerun with the code that wrote it "
                         "decodes that prompt again; or delete the line")
    return [json.loads(line) for line in read_lines(path) if line.strip()]


def _rekey_output(record: dict, new: str) -> dict:
    out = {k: v for k, v in record.items() if k != "check"}
    out["config_hash"] = new
    if "check" in record:
        out["check"] = digest(out, 12)
    return out


def inspect(folder: Path, search_path: tuple[str, ...] = ()) -> Plan | Outcome:
    """What migrating `folder` means: a Plan, or the Outcome that leaves it as it is. Reads only (the model's
    fingerprint is config.yaml's: no model is needed)."""
    if not (folder / "config.yaml").is_file():
        return Outcome("skipped", folder, "no config.yaml: its configuration cannot be verified; left as it is")
    results = ResultsFile(folder / "results.csv")
    header, rows = results.read()
    damaged = [d for d in results.damaged if d.why != CUT]  # an unfinished last line is left out (Plan.torn)
    if damaged:
        return Outcome("refused", folder, f"a damaged row ({damaged[0]}): a rerun with the code that wrote "
                                          "it moves it aside and decodes its prompt again; or delete the line")
    if (header is not None and "row_check" not in header) or any(schema_of(r) < LEGACY_ROW_SCHEMA for r in rows):
        return Outcome("skipped", folder, "rows written before row schema 4 (their keys did not cover content): the "
                                          "analysis reads them as they are; not re-keyed")
    schemas = {schema_of(r) for r in rows}
    try:
        config = load_config(folder / "config.yaml")
        stored = str(config["identity"].get("config_hash") or "")
        keys = sorted({str(r.get("config_hash")) for r in rows} - {stored})
        if keys:
            raise GooseError(f"rows of another configuration than its config.yaml's ({', '.join(keys)}; config.yaml: "
                             f"{stored})")
        outputs = read_outputs(folder / "outputs.jsonl")
        keys = sorted({str(r.get("config_hash")) for r in outputs} - {stored})
        if keys:
            raise GooseError(f"outputs records of another configuration ({', '.join(keys)}; config.yaml: {stored})")
        try:
            spec, recorded = stored_spec(config, search_path)
        except GooseError:
            raise
        except Exception as e:  # noqa: BLE001 - one folder's config never stops the others
            raise GooseError(f"its config.yaml does not rebuild: {type(e).__name__}: {e}") from None
        ident = config["identity"]
        fps = (str(ident.get("model_fingerprint") or ""), str(ident.get("prompts_fingerprint") or ""),
               str(ident.get("data_fingerprint") or ""))
        batches, unread = _batches(spec, rows)
        from goose.drafting.contract import data_paths  # start-up time: torch only when migrating

        data, why = None, ""  # the data fingerprint today, where a build time in meta.json keyed the folder
        for batch in batches:
            new = config_hash(spec, ModelIdentity("", fps[0], "", "", ""), fps[1], fps[2], batch)
            if stored == new:
                if schemas - {ROW_SCHEMA}:
                    raise GooseError(f"its key {stored} is schema 5's but rows say schema {min(schemas)}")
                data, why = settled_data_fingerprint(fps[2], data_paths(spec.method.config))
                if data is None:
                    return Outcome("current", folder, why)
                new = config_hash(spec, ModelIdentity("", fps[0], "", "", ""), fps[1], data, batch)
                break
            if stored == legacy_config_hash(spec, *fps, batch, target=recorded):
                break
        else:
            unread = f"; at concurrency {spec.concurrency} the key covers the prompts asked for, and {unread}" \
                if unread else ""
            raise GooseError(f"its key {stored} is neither schema 4's nor schema 5's for its config.yaml (this code "
                             f"computes {new} for schema 5): written by another version, or config.yaml was edited"
                             f"{unread}")
        if data is None and schemas - {LEGACY_ROW_SCHEMA}:
            raise GooseError(f"rows of schema {', '.join(map(str, sorted(schemas)))} under a schema-4 key")
    except GooseError as e:
        return Outcome("refused", folder, str(e))
    new_rows = []
    for r in rows:
        if data is None:
            r = rekeyed(r, new)
        else:  # schema 5 already: the key and the data fingerprint change
            r = {**{k: v for k, v in r.items() if k != "row_check"}, "config_hash": new, "data_fingerprint": data}
        r["row_check"] = row_check(r)
        new_rows.append(r)
    config = {**config, "identity": {**config["identity"], "config_hash": new, "row_schema": ROW_SCHEMA,
                                     "migrated_from": stored, **({} if data is None else {"data_fingerprint": data})}}
    pinned = folder.name != spec.folder_name(stored)  # run_dir=...: its name is the user's
    target = folder if pinned else folder.with_name(spec.folder_name(new))
    torn = [n for n in ("results.csv", "outputs.jsonl") if _torn(folder / n)]
    return Plan(folder, stored, new, target, header or [], new_rows, [_rekey_output(o, new) for o in outputs],
                config, torn, why=why)
