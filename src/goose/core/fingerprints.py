"""Content fingerprints: what a stored number was measured on, never just what it was called.

Every byte of every file is hashed (SHA-256; what that costs a model's files: docs/trust.md). The digest of a
file is computed once per file version and cached under `<cache>/hashes/`, keyed by its resolved
path and checked against its size, modification time, inode and change time (ctime moves on every
write, also one that restores size and mtime), so later runs pay a `stat` per file. Paths and
modification times never enter a fingerprint, so a copied folder keeps its fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from goose.errors import GooseError
from goose.paths import cache_root

CHUNK = 8 << 20


def digested_bytes(obj) -> bytes:
    """What `digest` hashes: `obj` as JSON, keys sorted."""
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False).encode()


def digest(obj, length: int = 16) -> str:
    """A short stable hash of any JSON-able value (keys sorted)."""
    return hashlib.sha256(digested_bytes(obj)).hexdigest()[:length]


def _stamp(st: os.stat_result) -> list[int]:
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of every byte of `path`, from the cache when the file is unchanged since it was hashed."""
    path = Path(path).resolve()
    try:
        before = path.stat()
    except OSError as e:
        raise GooseError(f"cannot read {path}: {e.strerror}.") from None
    entry = cache_root() / "hashes" / f"{digest(str(path), 32)}.json"
    try:
        cached = json.loads(entry.read_text())
        if cached.get("stat") == _stamp(before) and cached.get("path") == str(path):
            return cached["sha256"]
    except (OSError, ValueError, AttributeError):
        pass  # not hashed yet, or a torn cache entry: hash again
    try:
        value = _sha256(path)
    except OSError as e:
        raise GooseError(f"cannot read {path}: {e.strerror}.") from None
    if _stamp(path.stat()) != _stamp(before):  # written while being read: never cache a torn digest
        raise GooseError(f"{path} changed while it was being hashed; run again once it is written.")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f"{entry.name}.tmp{os.getpid()}")
        tmp.write_text(json.dumps({"path": str(path), "stat": _stamp(before), "sha256": value}))
        tmp.replace(entry)
    except OSError:
        pass  # a read-only cache only costs the next run the hash again
    return value


def file_fingerprint(path: str | Path) -> str:
    """A file's content (every byte), short."""
    return file_sha256(path)[:16]


def folder_listing(folder: str | Path) -> list[list[str]]:
    """[relative path, sha256] of every file below `folder` (hidden entries skipped), sorted by path."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return [[p.relative_to(folder).as_posix(), file_sha256(p)] for p in files]


def folder_fingerprint(folder: str | Path) -> str:
    """Every file below `folder`, by relative path and content (`folder_listing`)."""
    return digest(folder_listing(folder))


def path_fingerprint(path: str | Path) -> str:
    """A file's or a folder's content; refuses what is not there."""
    path = Path(os.path.expanduser(str(path)))
    if path.is_file():
        return file_fingerprint(path)
    if path.is_dir():
        return folder_fingerprint(path)
    raise GooseError(f"{path} does not exist (a file or folder a method reads).")


def prompts_fingerprint(prompts) -> str:
    """The benchmark's prompts as decoded (ids, texts, later turns), whatever file they came from."""
    return digest([(p.id, p.text, list(p.later_turns)) for p in prompts])


def prompt_fingerprint(text: str, earlier_turns: list[str] | tuple[str, ...] = ()) -> str:
    """One question as asked: its text and the user turns before it (not the model's answers)."""
    return digest([list(earlier_turns), text])
