"""GuideLLM's JSON report (schema version 2, GuideLLM 0.8) read into the harness's serving rows: one row per request.

The report is read as plain JSON, without importing GuideLLM, so rows can be made from a report written anywhere
(against goose-serve, vLLM, SGLang or llama.cpp's server). A row holds the request's own timestamps and token counts
and the latencies computed from them with the harness's definitions (docs/serving.md, "GuideLLM's numbers and ours"):

- ttft_s: first token's arrival - the request's start (GuideLLM's `time_to_first_token_ms`, in seconds);
- tpot_s: (last token's arrival - first token's arrival) / (output tokens - 1), the prefill left out, as
  goose.measurement.bench_report defines TPOT (GuideLLM calls this `inter_token_latency_ms`; its own
  `time_per_output_token_ms` divides the whole request, TTFT included, by all output tokens);
- itl_s: (last chunk - first chunk) / (chunks - 1): the mean gap between streamed chunks that carried text. A
  speculative server sends what one verification settled as one chunk, so itl_s / tpot_s is tokens per chunk;
  GuideLLM keeps no per-chunk timestamps, so this mean is all a report can give;
- e2e_s: the request's end - its start (GuideLLM's `request_latency`).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from goose.errors import GooseError

COLUMNS = ("method", "target", "profile", "rate", "benchmark", "request_id", "status", "success", "scheduled_at",
           "started_at", "first_token_at", "ended_at", "ttft_s", "tpot_s", "itl_s", "e2e_s", "prompt_tokens",
           "output_tokens", "chunks", "error")
STATUSES = ("successful", "incomplete", "errored")  # GuideLLM's groups of a benchmark's requests


def strategy_of(benchmark: dict) -> tuple[str, float | None]:
    """(profile, rate) of one benchmark of a report: constant and poisson give requests per second, concurrent its
    streams, synchronous and throughput no number."""
    strategy = benchmark.get("config", {}).get("strategy", {})
    kind = strategy.get("type_", "unknown")
    value = strategy.get("rate", strategy.get("streams"))
    return kind, None if value is None else float(value)


def _tokens(metrics: dict | None) -> int | None:
    """A usage block's token count: the total GuideLLM computes, else its text tokens."""
    if not metrics:
        return None
    value = metrics.get("total_tokens", metrics.get("text_tokens"))
    return None if value is None else int(value)


def _gap(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def request_row(request: dict, status: str) -> dict:
    """One GuideLLM request's stats (its `info.timings`, usage and error) as the harness's latencies."""
    info = request.get("info", {})
    t = info.get("timings", {})
    start, first, last = t.get("request_start"), t.get("first_token_iteration"), t.get("last_token_iteration")
    end = t.get("request_end", t.get("resolve_end"))
    out = _tokens(request.get("output_metrics"))
    if out is None:  # no usage from the server: GuideLLM then counts one token per chunk, and so do we
        out = request.get("output_tokens")
    chunks = int(t.get("token_iterations") or 0)
    span = _gap(first, last)
    return {
        "request_id": request.get("request_id", info.get("request_id", "")),
        "status": status,
        "success": status == "successful",
        "scheduled_at": t.get("targeted_start"),
        "started_at": start,
        "first_token_at": first,
        "ended_at": end,
        "ttft_s": _gap(start, first),
        "tpot_s": span / (out - 1) if span is not None and out is not None and out > 1 else None,
        "itl_s": span / (chunks - 1) if span is not None and chunks > 1 else None,
        "e2e_s": _gap(start, end),
        "prompt_tokens": _tokens(request.get("input_metrics")),
        "output_tokens": out,
        "chunks": chunks,
        "error": info.get("error") or "",
    }


def read_report(path: str | Path, method: str, target: str | None = None) -> list[dict]:
    """Every request of every benchmark (one per rate) of a GuideLLM JSON report, as rows labelled `method`; the
    target is the report's backend's unless given."""
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise GooseError(f"cannot read GuideLLM report {path}: {e}") from None
    if not isinstance(report, dict) or "benchmarks" not in report:
        raise GooseError(f"{path} is no GuideLLM report (no 'benchmarks'); give the file `--output kind=json` wrote")
    version = report.get("metadata", {}).get("version")
    if version not in (None, 2):
        raise GooseError(f"{path}: GuideLLM report schema {version}; this reader knows schema 2 (GuideLLM 0.8)")
    backend = report.get("config", {}).get("spec", {}).get("backend", {})
    target = target or backend.get("target", "")
    rows = []
    for index, bench in enumerate(report["benchmarks"]):
        profile, rate = strategy_of(bench)
        requests = bench.get("requests") or {}
        for status in STATUSES:
            for request in requests.get(status) or []:
                rows.append({"method": method, "target": target, "profile": profile, "rate": rate,
                             "benchmark": index, **request_row(request, status)})
    return rows


def write_rows(rows: list[dict], path: str | Path, append: bool = False) -> Path:
    """Rows as one CSV (COLUMNS, header once); `append` adds to a file that has them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not (append and path.is_file() and path.stat().st_size)
    with path.open("w" if new else "a", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        if new:
            w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in COLUMNS})
    return path
