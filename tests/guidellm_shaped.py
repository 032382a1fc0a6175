"""A small report in the shape GuideLLM 0.8 writes (`guidellm run --output kind=json`: schema version 2), written
by hand so that every number the reader and the analysis give can be computed by hand (tests/measurement/
test_guidellm_report.py, tests/analysis/test_serving.py). Only the fields the reader reads, as GuideLLM names them:
a benchmark's `config.strategy`, its `requests` by status, each request's `info.timings`, `info.error`,
`input_metrics` and `output_metrics`."""

from __future__ import annotations

import json
from pathlib import Path


def request(rid: str, targeted: float, start: float, first: float | None, last: float | None, end: float,
            out: int | None, chunks: int, prompt: int = 20, error: str | None = None) -> dict:
    usage = {} if out is None else {"text_tokens": out, "total_tokens": out}
    return {"type_": "generative_request_stats", "request_id": rid,
            "info": {"request_id": rid, "status": "errored" if error else "completed", "error": error,
                     "timings": {"targeted_start": targeted, "request_start": start, "first_token_iteration": first,
                                 "last_token_iteration": last, "token_iterations": chunks, "request_end": end,
                                 "resolve_end": end}},
            "input_metrics": {"text_tokens": prompt, "total_tokens": prompt}, "output_metrics": usage}


# Rate 1 (Poisson): a to d succeed, e failed. Hand-computed: TTFT a 0.5 b 0.2 c 1.0 d 0.4; TPOT a 1.0/10 = 0.1,
# b 2.0/10 = 0.2, c 0.5/5 = 0.1, d none (one token); ITL a 1.0/5 = 0.2, b 2.0/10 = 0.2, c 0.5/2 = 0.25;
# e2e a 1.6 b 2.2 c 1.6 d 1.0. Window 100.0 (a scheduled) to 104.0 (d's end): 4 s.
RATE_1 = {"successful": [request("a", 100.0, 100.0, 100.5, 101.5, 101.6, 11, 6),
                         request("b", 101.0, 101.0, 101.2, 103.2, 103.2, 11, 11),
                         request("c", 102.0, 102.1, 103.1, 103.6, 103.7, 6, 3),
                         request("d", 103.0, 103.0, 103.4, 103.4, 104.0, 1, 1)],
          "errored": [request("e", 104.0, 104.0, None, None, 104.1, None, 0, error="HTTP 500")],
          "incomplete": []}
# Rate 2: f to h succeed, i was cut by max_duration. TTFT f 0.3 g 1.0 h 0.2; TPOT f 0.6/3 = 0.2, g 0.3/3 = 0.1,
# h 0.2/2 = 0.1; window 200.0 to 201.8 (g's end): 1.8 s.
RATE_2 = {"successful": [request("f", 200.0, 200.0, 200.3, 200.9, 200.9, 4, 4),
                         request("g", 200.5, 200.5, 201.5, 201.8, 201.8, 4, 2),
                         request("h", 201.0, 201.0, 201.2, 201.4, 201.5, 3, 3)],
          "errored": [],
          "incomplete": [request("i", 201.5, 201.5, 201.9, 201.9, 202.0, 1, 1)]}


def report(rates=((1.0, RATE_1), (2.0, RATE_2)), kind: str = "poisson") -> dict:
    return {"metadata": {"version": 2, "guidellm_version": "0.8.1"},
            "config": {"spec": {"backend": {"kind": "openai_http", "target": "http://127.0.0.1:8000"}}},
            "benchmarks": [{"type_": "generative_benchmark",
                            "config": {"strategy": {"type_": kind, "rate": rate}}, "requests": requests}
                           for rate, requests in rates]}


def write_report(folder: Path, **kw) -> Path:
    path = folder / "guidellm.json"
    path.write_text(json.dumps(report(**kw)))
    return path
