"""Runs keyed by a data folder whose meta.json held its build time: until 2026-12-07 REST's datastore wrote
`build_s` into meta.json, so the data fingerprint in a run's key changed with every rebuild (every fresh
machine). A datastore now keeps the time in a hidden file, settled on its first load, so those runs no longer
resume. `settled_data_fingerprint` finds such a key's data fingerprint today: the folders' content, as they read
once settled, with some build time written back into meta.json the way the old builds wrote it, equal to the
recorded one. goose.migration.legacy re-keys the folder under the settled fingerprint."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from goose.core.fingerprints import digest, digested_bytes, folder_listing, path_fingerprint

META, BUILD, FIELD = "meta.json", ".build.json", "build_s"
SEARCHED = 100_000  # build times 0.0 .. 9999.9 s, at the 0.1 s the old builds rounded to
HOLE = "@goose-build-time@"  # stands where a candidate's value goes in the bytes hashed


def _meta_text(fields: dict) -> str:
    return json.dumps(fields, indent=2)  # as the builds and the settle write it


def _around(blob: bytes) -> tuple[bytes, bytes]:
    """`blob`, which holds the JSON string HOLE once, split around it: a candidate's bytes are the two ends with its
    value between, so the search serializes nothing per candidate (100,000 candidates in about a second)."""
    before, after = blob.split(json.dumps(HOLE).encode())
    return before, after


def _sha(before: bytes, value: bytes, after: bytes, length: int = 64) -> str:
    return hashlib.sha256(before + value + after).hexdigest()[:length]


def _read_json(path: Path) -> dict:
    try:
        fields = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return fields if isinstance(fields, dict) else {}


def _with_time(settled: dict, seconds: float) -> dict:
    """meta.json as the old builds wrote it: the build time after the counts, before the Python version."""
    keys = list(settled)
    at = keys.index("python") if "python" in keys else len(keys)
    return {**{k: settled[k] for k in keys[:at]}, FIELD: seconds, **{k: settled[k] for k in keys[at:]}}


def _candidates(folder: Path):
    """The build times to try: the one meta.json or the hidden file records first, then every 0.1 s."""
    for fields in (_read_json(folder / META), _read_json(folder / BUILD)):
        if isinstance(fields.get(FIELD), (int, float)):
            yield fields[FIELD]
    for tenths in range(SEARCHED):
        yield round(tenths / 10, 1)


@lru_cache(maxsize=64)
def _explain(recorded: str, paths: tuple[tuple[str, str], ...]) -> tuple[str | None, str]:
    settled_fps, timed = {}, []
    for name, path in paths:
        folder = Path(path).expanduser()
        if not folder.exists():
            return None, (f"its {name} {path} is not on this machine: build it there first (REST: python -m "
                          "goose.baselines.rest_datastore build), then migrate again; left as it is")
        fields = _read_json(folder / META) if folder.is_dir() else {}
        if not fields:
            settled_fps[name] = path_fingerprint(folder)
            continue
        settled = {k: v for k, v in fields.items() if k != FIELD}
        listing = folder_listing(folder)
        row = next(i for i, (rel, _) in enumerate(listing) if rel == META)
        listing[row][1] = hashlib.sha256(_meta_text(settled).encode()).hexdigest()
        settled_fps[name] = digest(listing)
        timed.append((name, folder, settled, listing, row))
    today = digest(dict(sorted(settled_fps.items())))
    if today == recorded:
        return None, ""  # keyed by the settled content already
    for name, folder, settled, listing, row in timed:  # one folder's build time at a time, the others settled
        meta = _around(_meta_text(_with_time(settled, HOLE)).encode())  # meta.json with the time left open
        files = _around(digested_bytes([e if i != row else [e[0], HOLE] for i, e in enumerate(listing)]))
        key = _around(digested_bytes({**settled_fps, name: HOLE}))
        for seconds in _candidates(folder):
            sha = _sha(meta[0], json.dumps(seconds).encode(), meta[1])
            folder_fp = _sha(files[0], json.dumps(sha).encode(), files[1], 16)
            if _sha(key[0], json.dumps(folder_fp).encode(), key[1], 16) == recorded:
                return today, (f"its data fingerprint {recorded} is its {name} as on this machine with a build "
                               f"time of {seconds} s in meta.json; today's is {today}")
    return None, (f"keyed by other content of its {', '.join(f'{n} ({p})' for n, p in paths)} than this machine's "
                  f"(no build time up to {SEARCHED / 10:.0f} s explains its data fingerprint {recorded}): it resumes "
                  "only with that content; left as it is")


def settled_data_fingerprint(recorded: str, paths: dict[str, str]) -> tuple[str | None, str]:
    """(the data fingerprint a run keyed by `recorded` over the folders `paths` (config field -> path) has today,
    where `recorded` is their settled content with a build time in one meta.json, else None; why, in words: ""
    where the key is today's already). Unexplained keys cost a search of SEARCHED build times each (about a second)."""
    if not recorded or not paths:
        return None, ""
    return _explain(recorded, tuple(sorted((n, str(p)) for n, p in paths.items())))
