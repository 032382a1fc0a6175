"""GuideLLM's JSON report into the harness's serving rows (goose.measurement.guidellm_report), on a hand-written
report of GuideLLM's shape (guidellm_shaped.py): every request of every rate one row, the latencies by the harness's
definitions (TPOT without the prefill, ITL per streamed chunk), failures kept as rows that did not succeed."""

import csv
import json

import pytest
from guidellm_shaped import write_report

from goose.errors import GooseError
from goose.measurement.guidellm_report import COLUMNS, read_report, strategy_of, write_rows


def test_every_request_of_every_rate_is_a_row_with_the_harness_latencies(tmp_path):
    rows = read_report(write_report(tmp_path), "m")
    assert [r["request_id"] for r in rows] == list("abcdefghi")[:4] + ["e"] + list("fgh") + ["i"]
    assert {r["rate"] for r in rows} == {1.0, 2.0} and {r["profile"] for r in rows} == {"poisson"}
    by = {r["request_id"]: r for r in rows}
    a, b, c, d = by["a"], by["b"], by["c"], by["d"]
    assert a["ttft_s"] == pytest.approx(0.5) and a["tpot_s"] == pytest.approx(0.1) and a["itl_s"] == pytest.approx(0.2)
    assert a["e2e_s"] == pytest.approx(1.6) and a["output_tokens"] == 11 and a["prompt_tokens"] == 20
    assert b["tpot_s"] == pytest.approx(0.2) and c["tpot_s"] == pytest.approx(0.1) and c["itl_s"] == pytest.approx(0.25)
    assert d["tpot_s"] is None and d["itl_s"] is None and d["ttft_s"] == pytest.approx(0.4)  # one token: no TPOT
    e = by["e"]
    assert not e["success"] and e["status"] == "errored" and e["error"] == "HTTP 500" and e["ttft_s"] is None
    assert by["i"]["status"] == "incomplete" and not by["i"]["success"]
    assert all(r["method"] == "m" and r["target"] == "http://127.0.0.1:8000" for r in rows)


def test_strategies_name_their_rate_or_streams():
    assert strategy_of({"config": {"strategy": {"type_": "constant", "rate": 2}}}) == ("constant", 2.0)
    assert strategy_of({"config": {"strategy": {"type_": "concurrent", "streams": 4}}}) == ("concurrent", 4.0)
    assert strategy_of({"config": {"strategy": {"type_": "synchronous"}}}) == ("synchronous", None)


def test_rows_csv_has_the_columns_once_and_appends(tmp_path):
    rows = read_report(write_report(tmp_path), "m")
    path = write_rows(rows, tmp_path / "rows.csv")
    write_rows(rows[:2], path, append=True)
    with path.open() as f:
        read = list(csv.DictReader(f))
    assert tuple(read[0]) == COLUMNS and len(read) == len(rows) + 2
    assert read[3]["tpot_s"] == "" and read[0]["success"] == "True"


def test_what_is_no_report_is_said_in_one_line(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(GooseError, match="no GuideLLM report"):
        read_report(tmp_path / "x.json", "m")
    (tmp_path / "v.json").write_text(json.dumps({"metadata": {"version": 3}, "benchmarks": []}))
    with pytest.raises(GooseError, match="schema 3"):
        read_report(tmp_path / "v.json", "m")
