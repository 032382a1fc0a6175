"""Re-key results folders written before row schema 5: `python -m goose.migration.migrate RESULTS_DIR...`
(goose-migrate, make migrate).

Up to row schema 4 a configuration's hash held its drafter class's import path (`method.drafter._target_`), so
moving a class to another module orphaned every results folder of its methods. From schema 5 a method enters the
hash as its registered name and its Config's values (goose.storage.run_folder.config_hash); the import path stays in
config.yaml as provenance. This command re-keys the folders below each path it is given, so that a rerun of the
same configuration with this code resumes them:

- a run folder (config.yaml, results.csv, outputs.jsonl, summary.json/.csv) is verified first: every line intact,
  every row and outputs record of the folder's configuration, and its key the one its config.yaml gives when
  rebuilt with this code (goose.storage.run_folder.legacy_config_hash). It is then written anew beside itself under the
  schema-5 key (the name's hash suffix, each row's `config_hash`, `row_schema` and `row_check`, each outputs
  record's `config_hash` and `check`, config.yaml's identity, the summaries' `config_hash` and `run_dir`) and put
  in place by one rename; the old folder is removed after. Anything else in it (trace.jsonl, wandb/,
  results.csv.damaged) comes along as it is: W&B's offline files keep the old key in their summary (history).
- a run folder keyed by a datastore whose meta.json held its build time (REST before 2026-12-07) is re-keyed the
  same way under the datastore's content today, where a build time explains its recorded key
  (goose.migration.build_time).
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
import shutil
import sys
from pathlib import Path

from goose.errors import GooseError
from goose.migration.legacy import BUILDING, REPLACED, Outcome, Plan, inspect, load_config
from goose.migration.rekey import execute, holds
from goose.storage.result_files import RunLock, lock_held
from goose.storage.row_schema import ROW_SCHEMA


def _written_by_schema_5(folder: Path) -> bool:
    try:
        return str(load_config(folder / "config.yaml")["identity"].get("row_schema")) == str(ROW_SCHEMA)
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


def _because(plan: Plan) -> str:
    return f" ({plan.why})" if plan.why else ""


def migrate(paths: list[Path], dry_run: bool = False, search_path: tuple[str, ...] = ()) -> list[Outcome]:
    """Re-key every schema-4 run folder below `paths` (see the module docstring). One Outcome per folder;
    `dry_run`: what would change, writing nothing (no lock file either)."""
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
        """`step` under the folder's run lock; a dry run writes nothing, no lock either: it asks whether a run
        holds the lock (RunLock.holder) and, where none does, reads."""
        lock = None if dry_run else RunLock(folder)
        try:
            if lock is not None:
                lock.__enter__()
            elif (holder := RunLock.holder(folder)) is not None:
                raise lock_held(folder, holder)
        except GooseError as e:
            if _written_by_schema_5(folder):  # a run of this code is writing it: nothing to migrate
                return Outcome("current", folder)
            return Outcome("refused", folder, f"{str(e).split(';')[0]}: migrate it once that run has ended")
        try:
            return step()
        finally:
            if lock is not None:
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
            if not holds(plan.target, plan):
                outcomes.append(Outcome("refused", plan.folder, f"{plan.target.name} already holds rows of its "
                                        f"schema-5 key {plan.new} that are not this folder's (a run of the new code, "
                                        "or another old folder): not merged; keep one of them and migrate again"))
                continue
            plan.finish = True
        if dry_run:
            moved = f", renamed to {plan.target.name}" if plan.target != plan.folder else ""
            outcomes.append(Outcome("rekeyed", plan.folder, f"key {plan.old} -> {plan.new}{moved}; "
                                                            f"{len(plan.rows)} row(s)" + _because(plan)))
            continue

        def step(plan=plan):
            again = inspect(plan.folder, search_path)  # under the lock: what is written is what was verified
            if not isinstance(again, Plan) or (again.new, again.target, len(again.rows)) != \
                    (plan.new, plan.target, len(plan.rows)):
                return again if isinstance(again, Outcome) else Outcome(
                    "refused", plan.folder, "changed while being migrated; run the command again")
            again.finish = plan.finish
            try:
                return Outcome("rekeyed", plan.folder, execute(again) + _because(again))
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
             "skipped": "skipped", "current": "left"}
    lines = [f"{label[o.kind]:9} {where(o.folder)}: {o.says}" for o in outcomes if o.kind != "current" or o.says]
    count = {k: sum(o.kind == k for o in outcomes) for k in ("rekeyed", "current", "refused", "skipped", "cleaned")}
    if any(r.joinpath("references").is_dir() for r in roots):
        lines.append(REFERENCES)
    changed = count["rekeyed"] + count["cleaned"]
    verb = "would re-key" if dry_run else "re-keyed"
    if not outcomes:
        lines.append(f"no run folders (a folder holding results.csv) under {', '.join(map(str, roots))}: nothing to "
                     "migrate; give a results_dir or a run folder")
    elif changed:
        lines.append(f"{verb} {count['rekeyed']} folder(s); {count['current']} already keyed by row schema 5; "
                     f"{count['refused']} refused; {count['skipped']} skipped"
                     + (f"; {count['cleaned']} leftover(s) of an interrupted migration" if count["cleaned"] else ""))
    else:
        lines.append(f"nothing to change: {count['current']} folder(s) already keyed by row schema 5; "
                     f"{count['refused']} refused; {count['skipped']} skipped")
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m goose.migration.migrate", description=(
        "Re-key results folders written before row schema 5 (whose config hash held the drafter class's import "
        "path), so that the same configuration resumes them. Safe to rerun; refuses, one line each, what it "
        "cannot verify or would merge."))
    p.add_argument("paths", nargs="+", type=Path, help="results_dir(s) or run folder(s)")
    p.add_argument("--dry-run", action="store_true", help="say what would change, change nothing")
    p.add_argument("--search-path", action="append", default=[], metavar="DIR",
                   help="a folder holding method/<name>.yaml (as hydra.searchpath for run.py), for user methods")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        outcomes = migrate(args.paths, args.dry_run, tuple(args.search_path))
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(outcomes, args.paths, args.dry_run), flush=True)
    return 1 if any(o.kind == "refused" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
