"""On disk: per-prompt result rows (append-only CSV, resumable), AR references and timings, the run lock."""

from __future__ import annotations

import csv
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from goose.core.fingerprints import digest
from goose.errors import GooseError
from goose.storage.durable import append_text, read_lines, repair_tail, replace_text, writable_dir, write_error


def row_check(row: dict) -> str:
    """A digest of a row's non-blank values as text: a row merged with another, cut short or edited
    reads back with another digest. Blank values are left out, so a column added later (blank in older
    rows) keeps their digests."""
    cells = sorted((str(k), _cell(v)) for k, v in row.items() if k != ROW_CHECK and _cell(v) != "")
    return digest(cells, 12)


def _cell(v) -> str:
    return "" if v is None else str(v)


ROW_CHECK = "row_check"


def sharded(root: Path, key: str, suffix: str) -> Path:
    """<root>/<first two characters of key>/<key><suffix>: keeps folders small."""
    return Path(root) / key[:2] / f"{key}{suffix}"


@dataclass
class Damaged:
    """A line of a results or outputs file that cannot be read back as a whole row."""

    path: Path
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line} ({self.why})"


class OutputsFile:
    """<run folder>/outputs.jsonl: what each row generated, as token ids, the text of each token and
    where each came from (a draft source or "bonus"), with the fingerprint of the question it answers;
    the equality report and the demo read it. Written just before its row, so every row has one; a line
    repeated by an interrupted run is superseded by the later one. Reading never writes."""

    FIELDS = ("prompt_id", "config_hash", "prompt_fingerprint", "tokens", "pieces", "origins")

    def __init__(self, path: Path):
        self.path = Path(path)
        self.damaged: list[Damaged] = []
        self._repaired = False

    def append(self, prompt_id: str, config_hash: str, prompt_fingerprint: str, tokens: list[int],
               pieces: list[str], origins: list[str], margins: list[float] | None = None,
               runners_up: list[list[int]] | None = None, gaps: list[list[float]] | None = None) -> None:
        if not self._repaired:
            writable_dir(self.path.parent)
            repair_tail(self.path)
            self._repaired = True
        record = {"prompt_id": prompt_id, "config_hash": config_hash, "prompt_fingerprint": prompt_fingerprint,
                  "tokens": tokens, "pieces": pieces, "origins": origins,
                  "margins": [round(m, 7) for m in margins or []], "runners_up": list(runners_up or []),
                  "gaps": [[round(g, 7) for g in row] for row in gaps or []]}
        record["check"] = digest(record, 12)
        append_text(self.path, json.dumps(record, ensure_ascii=False) + "\n", sync=True)

    def read(self) -> dict[str, dict]:
        """prompt id -> its latest intact record; damaged lines are listed in `self.damaged`."""
        out: dict[str, dict] = {}
        self.damaged = []
        for n, line in enumerate(read_lines(self.path), 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                self.damaged.append(Damaged(self.path, n, "not valid JSON"))
                continue
            if not isinstance(r, dict) or not isinstance(r.get("prompt_id"), str) or \
                    not isinstance(r.get("tokens"), list):
                self.damaged.append(Damaged(self.path, n, "not an outputs record"))
                continue
            if "check" in r and digest({k: v for k, v in r.items() if k != "check"}, 12) != r["check"]:
                self.damaged.append(Damaged(self.path, n, "its check digest does not match: edited or garbled"))
                continue
            out[r["prompt_id"]] = r
        return out


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


CUT = "cut short: the file's last line has no end (its writer stopped mid-line)"


def _unfinished(path: Path) -> str:
    """The unfinished last line of `path` (what follows its last newline, which read_lines leaves out), or ""."""
    try:
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return ""
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return ""
            f.seek(0)
            data = f.read()
    except OSError:
        return ""
    return data[data.rfind(b"\n") + 1 :].decode("utf-8", errors="replace")


class ResultsFile:
    """One CSV, one row per prompt, each written with a single append + fsync and carrying a digest of
    its values (`row_check`). Reading never writes: a line that is not a whole row (a short write, two
    rows run together, an edit, a last line cut mid-line by a killed writer) is listed in `damaged`, never
    returned as a row. The run's writer, which holds the run lock, moves damaged lines aside (`repair`) so
    their prompts are decoded again."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.damaged: list[Damaged] = []

    def read(self) -> tuple[list[str] | None, list[dict]]:
        """(header, intact rows); damaged lines go to `self.damaged`."""
        self.damaged = []
        self._raw: dict[int, str] = {}  # damaged record's first line -> its text, for repair()
        lines = read_lines(self.path)
        cut = _unfinished(self.path)
        header, rows = self._records(lines)
        if cut:
            self.damaged.append(Damaged(self.path, len(lines) + 1, CUT))
            self._raw[len(lines) + 1] = cut + "\n"
        return header, rows

    def _records(self, lines: list[str]) -> tuple[list[str] | None, list[dict]]:
        if not lines:
            return None, []
        reader = csv.reader(lines)
        try:
            header = next(reader)
        except (csv.Error, StopIteration):
            self.damaged.append(Damaged(self.path, 1, "the header line is unreadable"))
            return None, []
        checked = ROW_CHECK in header
        rows = []
        while True:
            start = reader.line_num + 1
            try:
                fields = next(reader)
                why = None
            except StopIteration:
                break
            except csv.Error as e:
                fields, why = None, f"not CSV: {e}"
            if fields == []:
                continue
            if why is None and len(fields) != len(header):
                why = f"{len(fields)} fields where the header has {len(header)}"
            row = dict(zip(header, fields)) if why is None else None
            if why is None and checked and row[ROW_CHECK] != row_check(row):
                why = "its row_check does not match its values: cut short, run into another row or edited"
            if why is not None:
                self.damaged.append(Damaged(self.path, start, why))
                self._raw[start] = "".join(lines[start - 1 : max(reader.line_num, start)])
                continue
            rows.append(row)
        return header, rows

    def rows(self) -> list[dict]:
        return self.read()[1]

    def header(self) -> list[str] | None:
        return self.read()[0]

    def repair(self) -> list[Damaged]:
        """Writer only: move damaged lines (an unfinished last line too) to <file>.damaged (kept for
        inspection), so the file holds whole rows only and the prompts of the damaged ones are decoded
        again. Returns the damaged lines (an unreadable header line is left where it is)."""
        header, rows = self.read()
        damaged = list(self.damaged)
        moved = [d for d in damaged if header is not None or d.why == CUT]
        if moved:
            aside = "".join(f"# {d}\n{self._raw.get(d.line, '')}" for d in moved)
            append_text(self.path.with_name(self.path.name + ".damaged"), aside, sync=True)
            if header is not None:
                self._rewrite(header, rows)
            else:  # cut inside its first row (written with the header): nothing whole to keep
                repair_tail(self.path)
        return damaged

    def _rewrite(self, header: list[str], rows: list[dict]) -> None:
        """Replace the file whole (a reader sees the old or the new one)."""
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=header, restval="")
        w.writeheader()
        w.writerows(rows)
        replace_text(self.path, buf.getvalue(), "rewrite", sync=True)

    def _widen(self, header: list[str], extra: list[str]) -> list[str]:
        """Columns a newer version writes are added to the file, blank in the rows written before them
        (their row_check stays valid: blanks are not in it). Only the run's one writer appends."""
        rows = self.rows()
        header = header + extra
        self._rewrite(header, rows)
        print(f"[goose] {self.path}: added column(s) {', '.join(extra)} (blank in the {len(rows)} earlier row(s))",
              flush=True)
        return header

    def append(self, row: dict) -> None:
        writable_dir(self.path.parent)
        row = {k: v for k, v in row.items() if k != ROW_CHECK}
        row[ROW_CHECK] = row_check(row)
        header = self.header()
        buf = io.StringIO()
        if header is None:
            header = list(row)
            csv.writer(buf).writerow(header)
        extra = [k for k in row if k not in header]
        if extra:
            header = self._widen(header, extra)
        csv.DictWriter(buf, fieldnames=header, restval="").writerow(row)
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
            entry = json.loads(p.read_text(encoding="utf-8", errors="replace"))
        except (json.JSONDecodeError, OSError):
            return None  # a torn or unreadable entry: recompute
        return entry if isinstance(entry, dict) and isinstance(entry.get("tokens"), list) else None

    def put(self, key: str, entry: dict) -> None:
        p = self._path(key)
        writable_dir(p.parent)
        replace_text(p, json.dumps(entry))


class TimingStore:
    """Every AR timing ever taken for a reference key, with when, where and how (append-only JSONL)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return sharded(self.root, key, ".jsonl")

    def all(self, key: str) -> list[dict]:
        out = []
        for line in read_lines(self._path(key)):
            try:
                t = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn line from a killed writer
            if isinstance(t, dict):
                out.append(t)
        return out

    def add(self, key: str, timing: dict) -> None:
        p = self._path(key)
        writable_dir(p.parent)
        append_text(p, json.dumps(timing) + "\n")


def lock_held(folder: Path, holder: str) -> GooseError:
    return GooseError(f"another process (PID {holder}) is writing {folder}; wait for it to finish (rerunning then "
                      "skips what it wrote), or use another results_dir.")


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

        writable_dir(self.folder)
        path = self.folder / ".lock"
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise write_error(path, e, "create the run lock") from None
        import time

        for attempt in range(5):  # a dry run's probe (`holder`) holds its shared lock for microseconds
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt < 4:
                    time.sleep(0.02)
                    continue
                holder = ""
                for _ in range(20):  # the holder writes its PID just after taking the lock
                    holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                    if holder:
                        break
                    time.sleep(0.05)
                os.close(fd)
                raise lock_held(self.folder, holder or "unknown") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        except OSError as e:  # a full disk: the lock is dropped with its descriptor; the empty file blocks nobody
            os.close(fd)
            raise write_error(path, e, "write the run lock") from None
        self.fd = fd
        return self

    @staticmethod
    def holder(folder: Path) -> str | None:
        """Who holds `folder`'s lock now (its PID and host), or None where no process does; asked without creating
        the lock file or writing to it (a dry run writes nothing): a shared lock is tried and dropped at once."""
        import fcntl

        try:
            fd = os.open(Path(folder) / ".lock", os.O_RDONLY)
        except OSError:
            return None  # no lock file: no run ever held it (a run creates it before it locks)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        except BlockingIOError:
            return os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)

    def __exit__(self, *exc) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
