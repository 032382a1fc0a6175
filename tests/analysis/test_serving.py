"""Serving rows into percentiles, throughput and goodput (goose.analysis.serving), on the hand-written GuideLLM-shaped
report of tests/guidellm_shaped.py, every expected number computed by hand there and here: numpy's linear percentiles
over the successful requests, throughput over the window from the first scheduled arrival to the last successful
end, goodput as the requests within both SLO bounds per second of it; a bootstrap interval only from MIN_REQUESTS on;
where a method stops paying against a reference label."""

import numpy as np
import pandas as pd
import pytest
from guidellm_shaped import RATE_1, report, request, write_report

from goose.analysis.serving import MIN_REQUESTS, Slo, printable, read_rows, stops_paying, summarize
from goose.measurement.guidellm_report import read_report, write_rows

SLO = Slo(ttft_s=0.6, tpot_s=0.15)


def summary_of(tmp_path, slo=SLO, **kw) -> pd.DataFrame:
    rows = read_report(write_report(tmp_path, **kw), "m")
    return summarize(read_rows(write_rows(rows, tmp_path / "rows.csv")), slo)


def test_percentiles_throughput_and_goodput_by_hand(tmp_path):
    s = summary_of(tmp_path)
    one, two = s.iloc[0], s.iloc[1]
    assert list(s.rate) == [1.0, 2.0] and list(s.requests) == [5, 4] and list(s.successful) == [4, 3]
    # rate 1: TTFT sorted 0.2 0.4 0.5 1.0 -> p50 at index 1.5, p90 at 2.7, p99 at 2.97
    assert one.ttft_p50_s == pytest.approx(0.45) and one.ttft_p90_s == pytest.approx(0.85)
    assert one.ttft_p99_s == pytest.approx(0.985)
    # TPOT 0.1 0.1 0.2 (d has one token, no TPOT): p50 0.1, p90 at index 1.8, p99 at 1.98
    assert one.tpot_p50_s == pytest.approx(0.1) and one.tpot_p90_s == pytest.approx(0.18)
    assert one.tpot_p99_s == pytest.approx(0.198)
    assert one.itl_p50_s == pytest.approx(0.2) and one.e2e_p50_s == pytest.approx(1.6)
    assert one.e2e_p90_s == pytest.approx(2.02)
    # window 100.0 .. 104.0: 4 requests, 29 tokens
    assert one.window_s == pytest.approx(4.0) and one.request_throughput == pytest.approx(1.0)
    assert one.output_throughput == pytest.approx(29 / 4)
    # SLO: a (0.5, 0.1) and d (0.4, no TPOT) meet it; b's TPOT, c's TTFT, e's failure do not: 2 of 5
    assert one.good == pytest.approx(0.4) and one.goodput == pytest.approx(0.5)
    # rate 2: window 200.0 .. 201.8; only h (0.2, 0.1) meets the SLO; i (incomplete) counts as sent
    assert two.window_s == pytest.approx(1.8) and two.request_throughput == pytest.approx(3 / 1.8)
    assert two.output_throughput == pytest.approx(11 / 1.8)
    assert two.good == pytest.approx(0.25) and two.goodput == pytest.approx(1 / 1.8)
    assert two.ttft_p50_s == pytest.approx(0.3) and two.tpot_p50_s == pytest.approx(0.1)
    assert one.tpot_p50_low_s is None and one.good_low is None  # 5 requests: no interval


def test_a_looser_slo_counts_more_requests_good(tmp_path):
    s = summary_of(tmp_path, slo=Slo(ttft_s=1.0, tpot_s=0.2))
    assert s.iloc[0].good == pytest.approx(0.8) and s.iloc[0].goodput == pytest.approx(1.0)  # all but e


def test_an_interval_from_min_requests_on_holds_the_estimate(tmp_path):
    many = [request(f"r{k}", 10.0 * k, 10.0 * k, 10.0 * k + 0.1 * (1 + k % 4), 10.0 * k + 1 + 0.5 * (k % 3),
                    10.0 * k + 2, 11, 11) for k in range(MIN_REQUESTS + 2)]
    s = summary_of(tmp_path, rates=((0.1, {"successful": many, "errored": [], "incomplete": []}),))
    row = s.iloc[0]
    tpots = np.array([(1 + 0.5 * (k % 3) - 0.1 * (1 + k % 4)) / 10 for k in range(MIN_REQUESTS + 2)])
    assert row.tpot_p50_s == pytest.approx(np.percentile(tpots, 50))
    assert row.tpot_p50_low_s <= row.tpot_p50_s <= row.tpot_p50_high_s
    assert row.good_low <= row.good <= row.good_high
    table = printable(s, SLO)
    assert "[" in table["tpot p50 ms"].iloc[0]


def test_where_a_method_stops_paying_against_the_reference():
    def rows(method, rate, tput, tpot, goodput):
        return {"method": method, "rate": rate, "request_throughput": tput, "tpot_p50_s": tpot, "goodput": goodput}

    s = pd.DataFrame([rows("ref", 1, 1.0, 0.10, 1.0), rows("ref", 2, 1.5, 0.20, 0.5),
                      rows("fast", 1, 1.0, 0.05, 1.0), rows("fast", 2, 1.9, 0.25, 1.2)])
    ref, fast = stops_paying(s, "ref")
    assert ref == "ref: keeps up with 1 req/s at most"
    assert fast == "fast: keeps up with 2 req/s at most; stops paying against ref at 2 req/s (TPOT p50 no lower or " \
                   "goodput lower); pays at 1"
    sync = pd.DataFrame([rows("pld-auto", float("nan"), 0.8, 0.10, 0.8)])  # a synchronous profile: no rate offered
    assert stops_paying(sync, "pld-auto") == ["pld-auto: no offered rate in these rows (a synchronous or throughput "
                                              "profile), so no rate it keeps up with"]


def test_report_helper_is_the_shape_the_reader_reads():
    assert report()["benchmarks"][0]["requests"] is RATE_1


def test_the_table_of_several_servers_is_one_command(tmp_path, capsys):
    """`python -m goose.analysis.serving ROWS` (docs/serving.md): every label of a file `--append` grew, side by
    side in one table, where each stops paying against --reference, and the figure; --help prints its help."""
    from goose.analysis.serving import main

    rows = read_report(write_report(tmp_path), "goose-auto") + read_report(write_report(tmp_path), "vllm-ngram")
    path = write_rows(rows, tmp_path / "rows.csv")
    main([str(path), "--reference", "goose-auto", "--figure", str(tmp_path / "art")])
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in table[1:]] == ["goose-auto"] * 2 + ["vllm-ngram"] * 2
    assert "vllm-ngram: keeps up with" in out and "against goose-auto" in out
    assert (tmp_path / "art" / "serving.png").stat().st_size > 0
    with pytest.raises(SystemExit, match=r"--reference 'ar' is no label of .*goose-auto, vllm-ngram"):
        main([str(path), "--reference", "ar"])
    with pytest.raises(SystemExit, match=r"no rows file .*--append adds another server's"):
        main([str(tmp_path / "none.csv")])
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "usage: python -m goose.analysis.serving" in capsys.readouterr().out


def test_the_help_states_the_request_count_its_intervals_need():
    import goose.analysis.serving as serving

    assert f"{serving.MIN_REQUESTS} requests or more (MIN_REQUESTS)" in serving.__doc__
