"""Durable files: every append writes all its bytes or none and says why in one line, reading never writes,
and a folder that cannot be written is one clear error (a full disk, a read-only mount, no permission)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from goose.errors import GooseError

WRITE_HELP = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
}


def write_error(path: Path, e: OSError, what: str = "write") -> GooseError:
    """One line for a failed write: what failed, why, and what to do."""
    why = WRITE_HELP.get(e.errno, e.strerror or str(e))
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space and rerun the same command: it resumes from any rows already written"
    elif e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        fix = "choose a writable folder (results_dir=... or run_dir=...)"
    else:
        fix = "fix that and rerun the same command: it resumes from any rows already written"
    return GooseError(f"cannot {what} {path}: {why}; nothing partial was kept. {fix}.")


def writable_dir(path: Path, probe: bool = False) -> Path:
    """mkdir -p, with one clear line when the folder cannot be made (`probe`: or written into)."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        if probe:
            import tempfile

            tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        raise write_error(Path(path), e, "write into the folder") from None
    return Path(path)


def repair_tail(path: Path) -> None:
    """Writer side only: drop a half-written last line left by a killed writer, so appends stay aligned."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb") as f:
        data = f.read()
    if data.endswith(b"\n"):
        return
    try:
        with open(path, "rb+") as f:
            f.truncate(data.rfind(b"\n") + 1)
    except OSError as e:
        raise write_error(path, e, "repair") from None


def append_text(path: Path, text: str, sync: bool = False) -> None:
    """Append all of `text` or nothing. One write with O_APPEND, so concurrent appenders never interleave
    inside a line; a short or failed write (a full disk) is undone and reported as one GooseError, so no
    partial line is ever left for the next append to run into."""
    data = text.encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as e:
        raise write_error(Path(path), e) from None
    try:
        start = os.fstat(fd).st_size
        done = 0
        try:
            while done < len(data):
                n = os.write(fd, data[done:])
                if n <= 0:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
            if sync:
                os.fsync(fd)
        except OSError as e:
            if done and os.fstat(fd).st_size == start + done:  # nobody appended after us: take ours back
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass  # readers still see a damaged line, never a row
            raise write_error(Path(path), e) from None
    finally:
        os.close(fd)


def replace_text(path: Path, text: str, what: str = "write", sync: bool = False) -> None:
    """Replace `path` whole with `text`: a reader (another run beside this one) sees the old file or the new one,
    never half of either; a failed write (a full disk) leaves nothing partial and is one GooseError. The draft is
    hidden (a leading dot), so a fingerprint of the folder taken meanwhile skips it."""
    tmp = Path(path).with_name(f".{Path(path).name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:  # a full disk, or Ctrl-C mid-write: no draft is left behind either way
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise write_error(Path(path), e, what) from None
        raise


def read_lines(path: Path) -> list[str]:
    """A file's complete lines, each with its newline, split at newlines only (a JSON string may hold U+2028);
    undecodable bytes are replaced (the line then fails its check). A last line without its newline (a
    writer killed mid-line) is left out: it was never finished."""
    if not path.exists():
        return []
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise GooseError(f"cannot read {path}: {e.strerror}.") from None
    return [line + "\n" for line in text.split("\n")[:-1]]
