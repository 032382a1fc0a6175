"""Content fingerprints: what a stored number was measured on, never just what it was called.

A weights file is fingerprinted by its size and hashes of its first and last MiB plus
evenly spaced 64 KiB samples (cheap for 60 GB of weights; any retrained or requantized
file differs in those bytes). Small files (configs, tokenizers) are hashed whole. Paths
and modification times are left out, so a copied folder keeps its fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

WHOLE_FILE_LIMIT = 16 << 20  # files up to 16 MiB (configs, tokenizers) are hashed whole
EDGE = 1 << 20
SAMPLE = 64 << 10
SAMPLES = 16


def digest(obj, length: int = 16) -> str:
    """A short stable hash of any JSON-able value (keys sorted)."""
    blob = json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def file_fingerprint(path: str | Path) -> str:
    path = Path(path)
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        if size <= WHOLE_FILE_LIMIT:
            h.update(f.read())
        else:
            offsets = [0, size - EDGE] + [size * i // (SAMPLES + 1) for i in range(1, SAMPLES + 1)]
            for off in offsets:
                f.seek(off)
                h.update(f.read(EDGE if off in (0, size - EDGE) else SAMPLE))
    return h.hexdigest()[:16]


def folder_fingerprint(folder: str | Path) -> str:
    """Every file below `folder` (hidden entries skipped), by relative path and content."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return digest([(p.relative_to(folder).as_posix(), file_fingerprint(p)) for p in files])


def prompts_fingerprint(prompts) -> str:
    """The benchmark's prompts as decoded (ids, texts, later turns), whatever file they came from."""
    return digest([(p.id, p.text, list(p.later_turns)) for p in prompts])
