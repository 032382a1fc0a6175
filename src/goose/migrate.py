"""Re-key results folders written before row schema 5: `python -m goose.migrate RESULTS_DIR...` (goose-migrate,
make migrate).

Up to row schema 4 a configuration's hash held its drafter class's import path (`method.drafter._target_`), so
moving a class to another module orphaned every results folder of its methods. From schema 5 a method enters the
hash as its registered name and its Config's values (goose.run_folder.config_hash); the import path stays in
config.yaml as provenance. This command re-keys the folders below each path it is given, so that a rerun of the
same configuration with this code resumes them:

- a run folder (config.yaml, results.csv, outputs.jsonl, summary.json/.csv) is verified first: every line intact,
  every row and outputs record of the folder's configuration, and its key the one its config.yaml gives when
  rebuilt with this code (goose.run_folder.legacy_config_hash). It is then written anew beside itself under the
  schema-5 key (the name's hash suffix, each row's `config_hash`, `row_schema` and `row_check`, each outputs
  record's `config_hash` and `check`, config.yaml's identity, the summaries' `config_hash` and `run_dir`) and put
  in place by one rename; the old folder is removed after. Anything else in it (trace.jsonl, wandb/,
  results.csv.damaged) comes along as it is: W&B's offline files keep the old key in their summary (history).
- AR references and timings (<results_dir>/references/) are keyed by AR's inputs (the model's content, the
  prompt's tokens, the settings that decide AR's tokens), never by the method or the config hash: left as they are.

Rerunning it is safe: a folder already keyed by schema 5 is left alone, and what an interrupted migration left
(a half-built copy, an old folder already replaced) is removed by the next run; a reader only ever sees whole
folders. A folder is refused with one line, and nothing of it changed, when a run holds its lock, when a line of
it is damaged, when its rows or its key cannot be verified, or when its new name is taken by rows of the same
schema-5 key that it does not hold (two old folders of one configuration, or a run of the new code): rows of two
folders are never merged.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from goose.errors import GooseError

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


# --- rebuilding a stored configuration -------------------------------------------------------------------
def _importable(target: str | None):
    """The Drafter class `target` names, if it still imports (quietly: a moved class is expected here)."""
    import importlib

    from goose.drafter import Drafter

    parts = str(target or "").split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name, None)
        return obj if isinstance(obj, type) and issubclass(obj, Drafter) else None
    return None


def _registered(name: str, search_path: tuple[str, ...]):
    """The drafter class the method config `name` names now (conf/method/<name>.yaml or a search-path folder)."""
    from omegaconf import OmegaConf

    from goose.methods import drafter_class
    from goose.paths import CONF

    for d in (*map(Path, search_path), CONF):
        f = Path(d) / "method" / f"{name}.yaml"
        if f.is_file():
            given = OmegaConf.to_container(OmegaConf.load(f), resolve=False)
            return drafter_class({"name": name, "drafter": (given or {}).get("drafter") or {}})
    return None


def _defaults() -> dict:
    """conf/config.yaml's plain top-level values: a setting added after a folder was written reads as its
    default (a key it changes would not verify anyway)."""
    from omegaconf import OmegaConf

    from goose.paths import CONF
    from goose.spec import declared_keys

    raw = OmegaConf.to_container(OmegaConf.load(CONF / "config.yaml"), resolve=False)
    tops = {k.split(".")[0] for k in declared_keys()}
    return {k: v for k, v in raw.items() if k in tops and not (isinstance(v, str) and "${" in v)}


def stored_spec(config: dict, search_path: tuple[str, ...] = ()):
    """The RunSpec a folder's config.yaml records, rebuilt with this code on this machine: device, dtype and
    backend as the identity recorded them (whatever this machine has), the drafter class from its recorded
    import path if that still imports, else from the method config of the same name. Returns (spec, the
    recorded import path)."""
    import torch

    from goose.drafter import BUDGET, role_fields
    from goose.spec import RunSpec

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


def _batches(spec, rows: list[dict]) -> list[list[str] | None]:
    """Candidate prompt lists a concurrency > 1 key was computed over (the benchmark's first n_prompts, else the
    rows' prompts in order); None at concurrency 1 (not hashed)."""
    if spec.concurrency <= 1:
        return [None]
    out = []
    try:
        from goose.inputs import benchmark_prompts

        out.append([p.id for p in benchmark_prompts(spec)[1]])
    except (GooseError, OSError):
        pass  # its data is not on this machine: the rows' prompts may still be the list
    out.append(list(dict.fromkeys(str(r["prompt_id"]).split("#")[0] for r in rows)))
    return out


# --- reading a folder ------------------------------------------------------------------------------------
def _load_config(path: Path) -> dict:
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


def _outputs(path: Path) -> list[dict]:
    """Every outputs record in order (superseded ones too); a damaged line refuses the folder."""
    from goose.durable import read_lines
    from goose.results import OutputsFile

    reader = OutputsFile(path)
    reader.read()
    if reader.damaged:
        raise GooseError(f"a damaged outputs line ({reader.damaged[0]}): a rerun with the code that wrote it "
                         "decodes that prompt again; or delete the line")
    return [json.loads(line) for line in read_lines(path) if line.strip()]


def _rekey_output(record: dict, new: str) -> dict:
    from goose.fingerprints import digest

    out = {k: v for k, v in record.items() if k != "check"}
    out["config_hash"] = new
    if "check" in record:
        out["check"] = digest(out, 12)
    return out


def inspect(folder: Path, search_path: tuple[str, ...] = ()) -> Plan | Outcome:
    """What migrating `folder` means: a Plan, or the Outcome that leaves it as it is. Reads only (the model's
    fingerprint is config.yaml's: no model is needed)."""
    from goose.models import ModelIdentity
    from goose.results import ResultsFile, row_check
    from goose.rows import ROW_SCHEMA, rekeyed, schema_of
    from goose.run_folder import LEGACY_ROW_SCHEMA, config_hash, legacy_config_hash

    if not (folder / "config.yaml").is_file():
        return Outcome("skipped", folder, "no config.yaml: its configuration cannot be verified; left as it is")
    results = ResultsFile(folder / "results.csv")
    header, rows = results.read()
    if results.damaged:
        return Outcome("refused", folder, f"a damaged row ({results.damaged[0]}): a rerun with the code that wrote "
                                          "it moves it aside and decodes its prompt again; or delete the line")
    if (header is not None and "row_check" not in header) or any(schema_of(r) < LEGACY_ROW_SCHEMA for r in rows):
        return Outcome("skipped", folder, "rows written before row schema 4 (their keys did not cover content): the "
                                          "analysis reads them as they are; not re-keyed")
    schemas = {schema_of(r) for r in rows}
    try:
        config = _load_config(folder / "config.yaml")
        stored = str(config["identity"].get("config_hash") or "")
        keys = sorted({str(r.get("config_hash")) for r in rows} - {stored})
        if keys:
            raise GooseError(f"rows of another configuration than its config.yaml's ({', '.join(keys)}; config.yaml: "
                             f"{stored})")
        outputs = _outputs(folder / "outputs.jsonl")
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
        for batch in _batches(spec, rows):
            new = config_hash(spec, ModelIdentity("", fps[0], "", "", ""), fps[1], fps[2], batch)
            if stored == new:
                if schemas - {ROW_SCHEMA}:
                    raise GooseError(f"its key {stored} is schema 5's but rows say schema {min(schemas)}")
                return Outcome("current", folder)
            if stored == legacy_config_hash(spec, *fps, batch, target=recorded):
                break
        else:
            raise GooseError(f"its key {stored} is neither schema 4's nor schema 5's for its config.yaml (this code "
                             f"computes {new} for schema 5): written by another version, or config.yaml was edited")
        if schemas - {LEGACY_ROW_SCHEMA}:
            raise GooseError(f"rows of schema {', '.join(map(str, sorted(schemas)))} under a schema-4 key")
    except GooseError as e:
        return Outcome("refused", folder, str(e))
    new_rows = []
    for r in rows:
        r = rekeyed(r, new)
        r["row_check"] = row_check(r)
        new_rows.append(r)
    config = {**config, "identity": {**config["identity"], "config_hash": new, "row_schema": ROW_SCHEMA,
                                     "migrated_from": stored}}
    pinned = folder.name != spec.folder_name(stored)  # run_dir=...: its name is the user's
    target = folder if pinned else folder.with_name(spec.folder_name(new))
    torn = [n for n in ("results.csv", "outputs.jsonl") if _torn(folder / n)]
    return Plan(folder, stored, new, target, header or [], new_rows, [_rekey_output(o, new) for o in outputs],
                config, torn)


# --- writing -----------------------------------------------------------------------------------------------
def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _link(src, dst) -> None:
    """Hard link where the file system allows (nothing copied, the old folder removed after), else copy."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


def _summaries(plan: Plan, tmp: Path) -> None:
    folder = plan.folder
    summary = None
    if (folder / "summary.json").is_file():
        try:
            summary = json.loads((folder / "summary.json").read_text())
        except (OSError, ValueError):
            summary = None  # unreadable: the next run of the configuration writes it again
    if not isinstance(summary, dict) and (folder / "summary.csv").is_file():
        found = list(csv.DictReader(io.StringIO((folder / "summary.csv").read_text())))
        summary = found[0] if found else None
    if not isinstance(summary, dict):
        return
    if "config_hash" in summary:
        summary["config_hash"] = plan.new
    if summary.get("run_dir") and Path(str(summary["run_dir"])).name == folder.name:
        summary["run_dir"] = str(Path(str(summary["run_dir"])).with_name(plan.target.name))
    if (folder / "summary.json").is_file():
        _write(tmp / "summary.json", json.dumps(summary, indent=2))
    if (folder / "summary.csv").is_file():
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=list(summary))
        w.writeheader()
        w.writerow(summary)
        _write(tmp / "summary.csv", buf.getvalue())


def build(plan: Plan, tmp: Path) -> None:
    """The re-keyed folder, complete, at `tmp`: the rewritten files, every other entry hard-linked."""
    from omegaconf import OmegaConf

    from goose.results import OutputsFile, ResultsFile

    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    for entry in plan.folder.iterdir():
        if entry.name in REWRITTEN or entry.name in NOT_CARRIED:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, tmp / entry.name, symlinks=True, copy_function=_link)
        else:
            _link(entry, tmp / entry.name)
    if (plan.folder / "results.csv").exists():
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=plan.header, restval="")
        w.writeheader()
        w.writerows(plan.rows)
        _write(tmp / "results.csv", buf.getvalue())
    if (plan.folder / "outputs.jsonl").exists():
        _write(tmp / "outputs.jsonl", "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in plan.outputs))
    _write(tmp / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(plan.config)))
    _summaries(plan, tmp)
    _fsync_dir(tmp)
    results, outputs = ResultsFile(tmp / "results.csv"), OutputsFile(tmp / "outputs.jsonl")
    rows = results.rows()
    outputs.read()
    if results.damaged or outputs.damaged or len(rows) != len(plan.rows) or \
            any(r["config_hash"] != plan.new for r in rows):
        raise GooseError(f"the re-keyed copy {tmp} does not read back whole")


def exchange(a: Path, b: Path) -> None:
    """Swap two folders in one step (Linux renameat2 RENAME_EXCHANGE): a pinned run_dir keeps its name."""
    import ctypes

    fn = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if fn is None:
        raise OSError(38, "renameat2 is not available")
    at_fdcwd, rename_exchange = -100, 2
    if fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), rename_exchange) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _holds(target: Path, plan: Plan) -> bool:
    """`target` already holds every re-keyed row and outputs record of `plan` (an interrupted migration put it
    there; a run may have added rows since)."""
    from goose.results import ResultsFile

    if not (target / "results.csv").is_file():
        return False
    try:
        there = {r["row_check"] for r in ResultsFile(target / "results.csv").rows()}
        outputs = {json.dumps(o, sort_keys=True) for o in _outputs(target / "outputs.jsonl")}
    except GooseError:
        return False
    others = [e.name for e in plan.folder.iterdir() if e.name not in REWRITTEN and e.name not in NOT_CARRIED]
    return all(r["row_check"] in there for r in plan.rows) and \
        all(json.dumps(o, sort_keys=True) in outputs for o in plan.outputs) and \
        all((target / name).exists() for name in others)


def execute(plan: Plan) -> str:
    """Put the re-keyed folder in place (the caller holds the folder's run lock); what was done, in words."""
    folder, target = plan.folder, plan.target
    tmp = folder.with_name(f".{folder.name}{BUILDING}")
    trash = folder.with_name(f".{folder.name}{REPLACED}")
    shutil.rmtree(trash, ignore_errors=True)
    if not plan.finish:
        try:
            build(plan, tmp)
            if target == folder:
                exchange(tmp, folder)  # one step: the folder's name holds the re-keyed copy, tmp the old folder
            else:
                if target.exists() and any(target.iterdir()):
                    raise GooseError(f"{target} appeared meanwhile: not merged")
                os.rename(tmp, target)  # one step: the re-keyed folder appears whole (refused if filled meanwhile)
        except (OSError, GooseError) as e:
            shutil.rmtree(tmp, ignore_errors=True)  # a half-built copy; the old folder is untouched
            raise GooseError(f"nothing changed: {e}") from None
    try:  # the re-keyed folder is in place: the old one goes (a rerun finishes this if it is interrupted)
        _fsync_dir(folder.parent)
        os.rename(tmp if target == folder else folder, trash)
        shutil.rmtree(trash, ignore_errors=True)
    except OSError as e:
        raise GooseError(f"re-keyed into {target.name}, but the old folder is not removed ({e}); run the command "
                         "again to remove it") from None
    if plan.finish:
        return f"{target.name} already held its re-keyed rows (an interrupted migration): removed the old folder"
    parts = [f"{len(plan.rows)} row(s)", f"{len(plan.outputs)} outputs record(s)", "config.yaml"]
    parts += [n for n in ("summary.json", "summary.csv") if (target / n).exists()]
    moved = f"renamed to {target.name}" if target != folder else "name kept (a pinned run_dir)"
    torn = f"; left out the unfinished last line of {', '.join(plan.torn)}" if plan.torn else ""
    return f"key {plan.old} -> {plan.new}, {moved}; {', '.join(parts)} rewritten{torn}"


def _written_by_schema_5(folder: Path) -> bool:
    from goose.rows import ROW_SCHEMA

    try:
        return str(_load_config(folder / "config.yaml")["identity"].get("row_schema")) == str(ROW_SCHEMA)
    except GooseError:
        return False


# --- the command ---------------------------------------------------------------------------------------------
def run_folders(root: Path) -> list[Path]:
    """The run folders below `root` (or `root` itself): every folder holding results.csv, outside references/
    and hidden folders (Hydra's, this command's own copies)."""
    if (root / "results.csv").is_file():
        return [root]
    out = []
    for f in sorted(root.rglob("results.csv")):
        parts = f.relative_to(root).parts[:-1]
        if "references" in parts or any(p.startswith(".") for p in parts):
            continue
        out.append(f.parent)
    return out


def leftovers(root: Path) -> list[Path]:
    """What an interrupted migration left below `root`: half-built copies and replaced old folders."""
    found = [d for d in root.rglob(".*") if d.is_dir() and d.name.endswith((BUILDING, REPLACED))]
    return sorted(d for d in found if not any(p.startswith(".") for p in d.relative_to(root).parts[:-1]))


def clean(left: Path, dry_run: bool) -> Outcome | None:
    """Remove one leftover. A half-built copy is removed only while no migration of its folder holds the lock."""
    from goose.results import RunLock

    verb = "would remove" if dry_run else "removed"
    if left.name.endswith(REPLACED):
        if not dry_run:
            shutil.rmtree(left, ignore_errors=True)
        return Outcome("cleaned", left, f"{verb} an old folder already replaced by its re-keyed copy "
                                        "(an interrupted migration)")
    folder = left.with_name(left.name[1 : -len(BUILDING)])
    if dry_run:
        return Outcome("cleaned", left, f"{verb} a half-built re-keyed copy (an interrupted migration)")
    try:
        if folder.is_dir():
            with RunLock(folder):
                shutil.rmtree(left, ignore_errors=True)
        else:
            shutil.rmtree(left, ignore_errors=True)
    except GooseError:
        return None  # a migration is building it now
    return Outcome("cleaned", left, f"{verb} a half-built re-keyed copy (an interrupted migration)")


def migrate(paths: list[Path], dry_run: bool = False, search_path: tuple[str, ...] = ()) -> list[Outcome]:
    """Re-key every schema-4 run folder below `paths` (see the module docstring). One Outcome per folder."""
    from goose.results import RunLock

    outcomes: list[Outcome] = []
    folders: list[Path] = []
    for root in paths:
        if not root.is_dir():
            raise GooseError(f"{root} is not a folder (give a results_dir or a run folder).")
        for left in leftovers(root):
            done = clean(left, dry_run)
            if done:
                outcomes.append(done)
        folders += [f for f in run_folders(root) if f.resolve() not in {g.resolve() for g in folders}]

    def locked(folder: Path, step):
        lock = RunLock(folder)
        try:
            lock.__enter__()
        except GooseError as e:
            if _written_by_schema_5(folder):  # a run of this code is writing it: nothing to migrate
                return Outcome("current", folder)
            return Outcome("refused", folder, f"{str(e).split(';')[0]}: migrate it once that run has ended")
        try:
            return step()
        finally:
            lock.__exit__(None, None, None)

    plans: list[Plan] = []
    for folder in folders:
        got = locked(folder, lambda f=folder: inspect(f, search_path))
        (plans if isinstance(got, Plan) else outcomes).append(got)
    by_target: dict[Path, list[Plan]] = {}
    for p in plans:
        by_target.setdefault(p.target.resolve(), []).append(p)
    for group in by_target.values():
        if len(group) > 1:
            names = ", ".join(str(p.folder) for p in group)
            for p in group:
                outcomes.append(Outcome("refused", p.folder, f"{len(group)} folders ({names}) are one configuration "
                                        f"under schema 5 ({p.new}); not merged: keep one of them (move the others "
                                        "out of the results_dir) and migrate again"))
            continue
        plan = group[0]
        if plan.target != plan.folder and plan.target.exists() and any(plan.target.iterdir()):
            if not _holds(plan.target, plan):
                outcomes.append(Outcome("refused", plan.folder, f"{plan.target.name} already holds rows of its "
                                        f"schema-5 key {plan.new} that are not this folder's (a run of the new code, "
                                        "or another old folder): not merged; keep one of them and migrate again"))
                continue
            plan.finish = True
        if dry_run:
            moved = f", renamed to {plan.target.name}" if plan.target != plan.folder else ""
            outcomes.append(Outcome("rekeyed", plan.folder, f"key {plan.old} -> {plan.new}{moved}; "
                                                            f"{len(plan.rows)} row(s)"))
            continue

        def step(plan=plan):
            again = inspect(plan.folder, search_path)  # under the lock: what is written is what was verified
            if not isinstance(again, Plan) or (again.new, again.target, len(again.rows)) != \
                    (plan.new, plan.target, len(plan.rows)):
                return again if isinstance(again, Outcome) else Outcome(
                    "refused", plan.folder, "changed while being migrated; run the command again")
            again.finish = plan.finish
            try:
                return Outcome("rekeyed", plan.folder, execute(again))
            except GooseError as e:
                return Outcome("refused", plan.folder, str(e))

        outcomes.append(locked(plan.folder, step))
    return outcomes


REFERENCES = ("references/ (AR tokens) and references/timings/ (AR timings) left as they are: keyed by AR's inputs "
              "(the model's content, the prompt's tokens, the settings that decide AR's tokens), never by the method "
              "or the config hash")


def report(outcomes: list[Outcome], roots: list[Path], dry_run: bool) -> str:
    def where(p: Path) -> str:
        for r in roots:
            try:
                return str(p.relative_to(r)) if p != r else str(p)
            except ValueError:
                continue
        return str(p)

    label = {"rekeyed": "would re-key" if dry_run else "re-keyed", "cleaned": "cleaned", "refused": "refused",
             "skipped": "skipped"}
    lines = [f"{label[o.kind]:9} {where(o.folder)}: {o.says}" for o in outcomes if o.kind != "current"]
    count = {k: sum(o.kind == k for o in outcomes) for k in ("rekeyed", "current", "refused", "skipped", "cleaned")}
    if any(r.joinpath("references").is_dir() for r in roots):
        lines.append(REFERENCES)
    changed = count["rekeyed"] + count["cleaned"]
    verb = "would re-key" if dry_run else "re-keyed"
    if changed:
        lines.append(f"{verb} {count['rekeyed']} folder(s); {count['current']} already keyed by row schema 5; "
                     f"{count['refused']} refused; {count['skipped']} skipped"
                     + (f"; {count['cleaned']} leftover(s) of an interrupted migration" if count["cleaned"] else ""))
    else:
        lines.append(f"nothing to change: {count['current']} folder(s) already keyed by row schema 5; "
                     f"{count['refused']} refused; {count['skipped']} skipped")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m goose.migrate", description=(
        "Re-key results folders written before row schema 5 (whose config hash held the drafter class's import "
        "path), so that the same configuration resumes them. Safe to rerun; refuses, one line each, what it "
        "cannot verify or would merge."))
    p.add_argument("paths", nargs="+", type=Path, help="results_dir(s) or run folder(s)")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.add_argument("--search-path", action="append", default=[], metavar="DIR",
                   help="a folder holding method/<name>.yaml (as hydra.searchpath for run.py), for user methods")
    args = p.parse_args(argv)
    try:
        outcomes = migrate(args.paths, args.dry_run, tuple(args.search_path))
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(outcomes, args.paths, args.dry_run), flush=True)
    return 1 if any(o.kind == "refused" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
