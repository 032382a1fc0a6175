"""What analysis/figures.ipynb runs: the results folder a user means, and each artifact drawn from it or one line
saying why not (the same artifacts, rows and choices as `python -m goose.analysis.reproduce`)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pandas as pd

from goose.analysis.artifacts import artifacts_of, make, short_reason
from goose.analysis.load import load_rows
from goose.paths import REPO_ROOT

DEFAULT_RESULTS = "results/claims-local"  # the committed rows: a fresh clone has them


class NotebookError(Exception):
    """A problem the user fixes by setting GOOSE_RESULTS / GOOSE_ARTIFACTS: shown in a notebook as its one line,
    without a traceback (IPython renders an exception's _render_traceback_)."""

    def _render_traceback_(self) -> list[str]:
        return [f"error: {self}"]


def repo_root(start: Path | None = None) -> Path | None:
    """The checkout: the first folder holding pyproject.toml beside src/goose, above `start` (the kernel's working
    directory, analysis/ where Jupyter opened it), else the one this package was imported from; None outside one."""
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents, REPO_ROOT):
        if (d / "pyproject.toml").is_file() and (d / "src" / "goose").is_dir():
            return d
    return None


def _bases() -> list[Path]:
    """Where a relative path may be meant from: the user's working directory (the shell's $PWD, where `jupyter
    execute` or `jupyter lab` was started; the kernel itself runs in the notebook's folder), the kernel's, the
    repository root."""
    out = [Path(p) for p in (os.environ.get("PWD"), os.getcwd()) if p]
    root = repo_root()
    return list(dict.fromkeys([*out, *([root] if root else [])]))


def results_folder(value: str | None = None) -> Path:
    """GOOSE_RESULTS as the user meant it: an absolute path as it is; a relative one from the user's working
    directory, then the kernel's, then the repository root; unset, the committed claims rows."""
    given = value or DEFAULT_RESULTS
    path = Path(given).expanduser()
    tried = [path] if path.is_absolute() else [b / path for b in _bases()]
    for p in tried:
        if p.is_dir():
            return p.resolve()
    raise NotebookError(f"GOOSE_RESULTS={given}: no such folder (looked in {', '.join(str(p) for p in tried)}); set "
                        "GOOSE_RESULTS to the results_dir a sweep wrote, e.g. GOOSE_RESULTS=results/claims-local")


def artifacts_folder(results: Path, value: str | None = None) -> Path:
    """Where the notebook writes its tables and figures: GOOSE_ARTIFACTS (relative: from the user's working
    directory), else <results>/artifacts, where `reproduce` writes them too (goose.analysis.artifacts.artifacts_of;
    for the committed results/claims-local a folder git ignores: the rows stay as they are)."""
    if value:
        path = Path(value).expanduser()
        return path if path.is_absolute() else _bases()[0] / path
    return artifacts_of(results)


def load(results: Path) -> pd.DataFrame:
    """The folder's rows (analysis.load), a refusal as one line; then what they hold, in one line."""
    try:
        with contextlib.redirect_stdout(io.StringIO()) as notes:
            df = load_rows(results)
    except SystemExit as e:
        raise NotebookError(str(e.code)) from None
    _say(notes.getvalue(), "load", all_notes=False)
    df.attrs["results"] = str(results)  # what a refusal's `make reproduce-...` hint runs into (RESULTS=)
    budgets = ", ".join(sorted(set(df.budget), key=lambda b: (not b.isdigit(), b.zfill(6))))
    print(f"{len(df)} rows: {df.model.nunique()} model(s), {df.benchmark.nunique()} benchmark label(s), "
          f"methods {', '.join(sorted(df.method.unique()))}; budgets {budgets}")
    return df


def draw(name: str, df: pd.DataFrame, out: Path, all_notes: bool = False, **choice) -> list[Path]:
    """Write artifact `name` (make, with `budget=` / `concurrency=` where given) and say in one line what it read
    (the budget and concurrency the rows decided, which configuration of several in a cell), or why it was not
    written; `all_notes` also prints every row it left out and why."""
    taken: list[str] = []
    try:
        with contextlib.redirect_stdout(io.StringIO()) as notes:
            paths = make(name, df, out, taken=taken, **choice)
    except SystemExit as e:
        _say(notes.getvalue(), name, all_notes)
        hint = str(e.code).split("; ")[-1]
        if "make reproduce-" in hint and df.attrs.get("results"):  # the target's rows into the folder read here
            hint = re.sub(r"`make (reproduce-[\w-]+)`", rf"`make \1 RESULTS={df.attrs['results']}`", hint)
        print(f"{name}: not written: {short_reason(str(e.code))} ({hint})")
        return []
    _say(notes.getvalue(), name, all_notes)
    what = f" ({', '.join(taken)})" if taken else ""
    print(f"{name}{what}: wrote {', '.join(p.name for p in paths)} in {out}")
    return paths


def table(name: str, df: pd.DataFrame, out: Path, **kw) -> pd.DataFrame | None:
    """A table artifact as a frame to display (its csv), or None where it was not written (the line says why)."""
    paths = draw(name, df, out, **kw)
    csv = next((p for p in paths if p.suffix == ".csv"), None)
    return pd.read_csv(csv) if csv else None


def _say(notes: str, name: str, all_notes: bool) -> None:
    """The notes an artifact printed: which configuration it read of several (always), the rest (rows left out,
    prompts compared on) where `all_notes`, else counted."""
    lines = [n.removeprefix("[analysis] ") for n in notes.splitlines() if n.strip()]
    keep = [n for n in lines if all_notes or "ran several configurations" in n]
    for n in keep:
        print(n)
    if len(lines) > len(keep):
        print(f"{name}: {len(lines) - len(keep)} more note(s) on rows left out (draw(..., all_notes=True) "
              "shows them)")
