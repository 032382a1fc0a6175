"""Per-prompt result rows on disk: append-only CSV, resumable, and the AR reference store."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path


def _repair_tail(path: Path) -> None:
    """Drop a half-written last line left by a killed run, so appends stay aligned."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


class ResultsFile:
    """One CSV, one row per prompt. Each row is written with a single append + fsync."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _repair_tail(self.path)

    def rows(self) -> list[dict]:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        with open(self.path, newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f))

    def done(self, config_hash: str) -> set[str]:
        return {r["prompt_id"] for r in self.rows() if r.get("config_hash") == config_hash}

    def header(self) -> list[str] | None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return None
        with open(self.path, newline="", encoding="utf-8") as f:
            return next(csv.reader(f), None)

    def append(self, row: dict) -> None:
        header = self.header()
        buf = io.StringIO()
        if header is None:
            header = list(row)
            csv.writer(buf).writerow(header)
        extra = [k for k in row if k not in header]
        if extra:
            raise ValueError(f"row has columns the CSV lacks: {extra}; use a fresh run folder")
        csv.DictWriter(buf, fieldnames=header).writerow(row)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, buf.getvalue().encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)


class ReferenceStore:
    """AR greedy outputs and timings, one JSON file per (model, benchmark, settings, prompt).

    Computed once and reused by every method of every sweep, for the lossless check and
    the speedup denominator.
    """

    def __init__(self, root: Path, key: str):
        self.dir = Path(root) / key
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, prompt_id: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in prompt_id)
        return self.dir / f"{safe}.json"

    def get(self, prompt_id: str) -> dict | None:
        p = self._path(prompt_id)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except json.JSONDecodeError:
            return None  # a torn write: recompute

    def put(self, prompt_id: str, entry: dict) -> None:
        p = self._path(prompt_id)
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entry))
        tmp.replace(p)
