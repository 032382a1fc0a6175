"""On disk: per-prompt result rows (append-only CSV, resumable), AR references and timings, the run lock."""

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


def append_text(path: Path, text: str, sync: bool = False) -> None:
    """One write with O_APPEND: concurrent appenders never interleave inside a line."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def sharded(root: Path, key: str, suffix: str) -> Path:
    """<root>/<first two characters of key>/<key><suffix>: keeps folders small."""
    return Path(root) / key[:2] / f"{key}{suffix}"


class OutputsFile:
    """<run folder>/outputs.jsonl: what each row generated, as token ids, the text of each token and
    where each came from (a draft source or "bonus"); the equality report and the demo read it.
    Written just before its row, so every row has one; a line repeated by an interrupted run is
    superseded by the later one."""

    def __init__(self, path: Path):
        self.path = Path(path)
        _repair_tail(self.path)

    def append(self, prompt_id: str, config_hash: str, tokens: list[int], pieces: list[str],
               origins: list[str]) -> None:
        record = {"prompt_id": prompt_id, "config_hash": config_hash, "tokens": tokens, "pieces": pieces,
                  "origins": origins}
        append_text(self.path, json.dumps(record, ensure_ascii=False) + "\n", sync=True)

    def read(self) -> dict[str, dict]:
        """prompt id -> its latest record."""
        if not self.path.exists():
            return {}
        with open(self.path, encoding="utf-8") as f:
            return {r["prompt_id"]: r for r in map(json.loads, filter(str.strip, f))}


def token_pieces(tokenizer, tokens: list[int]) -> list[str]:
    """The text each token settles: the pieces join to the decoded text exactly. A character split
    over several tokens (bytes of a UTF-8 character) belongs to the token that completes it."""
    final = tokenizer.decode(tokens, skip_special_tokens=True)
    pieces, settled = [], 0
    for i in range(len(tokens)):
        upto = tokenizer.decode(tokens[: i + 1], skip_special_tokens=True)
        if final.startswith(upto):
            k = len(upto)
        else:  # ends in a partial character (or the tokenizer rewrote earlier text): keep what agrees
            k = next((j for j, (x, y) in enumerate(zip(upto, final)) if x != y), min(len(upto), len(final)))
        k = max(k, settled)
        pieces.append(final[settled:k])
        settled = k
    if pieces:
        pieces[-1] += final[settled:]
    return pieces


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

    def _widen(self, header: list[str], extra: list[str]) -> list[str]:
        """Columns a newer version writes (e.g. the sampling settings) are added to the file, blank in
        the rows written before them; the file is replaced whole, so a reader sees the old or the new.
        Only the run's one writer (it holds the run lock) ever appends."""
        rows = self.rows()
        header = header + extra
        tmp = self.path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=header, restval="")
            w.writeheader()
            w.writerows(rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        print(f"[goose] {self.path}: added column(s) {', '.join(extra)} (blank in the {len(rows)} earlier row(s))",
              flush=True)
        return header

    def append(self, row: dict) -> None:
        header = self.header()
        buf = io.StringIO()
        if header is None:
            header = list(row)
            csv.writer(buf).writerow(header)
        extra = [k for k in row if k not in header]
        if extra:
            header = self._widen(header, extra)
        csv.DictWriter(buf, fieldnames=header).writerow(row)
        append_text(self.path, buf.getvalue(), sync=True)


class ReferenceStore:
    """AR tokens, one JSON file per reference key: a digest of everything that decides them
    (model content, prompt token ids, sampling settings and seed when sampling, dtype, device,
    threads, backend, max_new_tokens, stop ids, library versions). Two prompts share a reference
    only if their tokens are the same."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return sharded(self.root, key, ".json")

    def get(self, key: str) -> dict | None:
        p = self._path(key)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except json.JSONDecodeError:
            return None  # a torn write: recompute

    def put(self, key: str, entry: dict) -> None:
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(entry))
        tmp.replace(p)


class TimingStore:
    """Every AR timing ever taken for a reference key, with when, where and how (append-only JSONL)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return sharded(self.root, key, ".jsonl")

    def all(self, key: str) -> list[dict]:
        p = self._path(key)
        if not p.exists():
            return []
        out = []
        for line in p.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a torn line from a killed writer
        return out

    def add(self, key: str, timing: dict) -> None:
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        append_text(p, json.dumps(timing) + "\n")


class RunLock:
    """One writer per run folder: an exclusive OS lock (flock) on <folder>/.lock holding the PID.

    The kernel drops the lock when its process dies, however it dies, so a stale lock file
    never blocks a rerun. A second process fails at once, naming the holder."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.fd: int | None = None

    def __enter__(self) -> RunLock:
        import fcntl
        import socket

        from goose.errors import GooseError

        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise GooseError(
                f"another process (PID {holder}) is writing {self.folder}; wait for it to finish "
                "(rerunning then skips what it wrote), or use another results_dir."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
