"""Writing a verified `goose.migration.legacy.Plan`: the re-keyed copy is built beside the folder, read back, and put in
place by one rename (a pinned run_dir: one swap), so a reader only ever sees whole folders."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
from pathlib import Path

from goose.errors import GooseError
from goose.migration.legacy import BUILDING, NOT_CARRIED, REPLACED, REWRITTEN, Plan, read_outputs
from goose.storage.result_files import OutputsFile, ResultsFile


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


def holds(target: Path, plan: Plan) -> bool:
    """`target` already holds every re-keyed row and outputs record of `plan` (an interrupted migration put it
    there; a run may have added rows since)."""
    if not (target / "results.csv").is_file():
        return False
    try:
        there = {r["row_check"] for r in ResultsFile(target / "results.csv").rows()}
        outputs = {json.dumps(o, sort_keys=True) for o in read_outputs(target / "outputs.jsonl")}
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
