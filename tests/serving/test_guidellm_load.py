"""GuideLLM drives goose-serve over real HTTP and its report becomes the harness's rows
(goose.measurement.serving_load): the tiny model served by uvicorn in this process, GuideLLM (a subprocess, one
worker) sending a handful of fixed-length completions at two Poisson rates, counted with the tiny model's byte
tokenizer saved to a folder (no network); every request a successful row with the harness's latencies, its output
the length asked for, and the analysis summing it."""

import json

import pytest
from live import Live, tiny_served
from tiny import byte_tokenizer

from goose.analysis.serving import Slo, read_rows, summarize
from goose.measurement import serving_load

pytestmark = pytest.mark.integration
pytest.importorskip("guidellm", reason="GuideLLM is an optional extra: make guidellm")


def test_guidellm_load_on_goose_serve_becomes_rows(tiny, tmp_path):
    tokenizer = tmp_path / "tokenizer"
    byte_tokenizer().save_pretrained(tokenizer)
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"def f{k}(x):\n    return x + {k}\n", "output_tokens_count": 8})
                            + "\n" for k in range(4)))
    with Live(tiny_served(tiny, "goose", rows=2), queue_size=16) as live:
        args = serving_load.parse(["--target", f"http://127.0.0.1:{live.port}/v1", "--label", "goose",
                                   "--tokenizer", str(tokenizer), "--data", str(data), "--profile", "poisson",
                                   "--rate", "2", "8", "--max-requests", "4", "--max-seconds", "60",
                                   "--max-tokens", "8", "--out", str(tmp_path / "out")])
        path = serving_load.load(args)
        assert live.idle()
    rows = read_rows(path)
    assert len(rows) == 8 and rows.success.all(), rows
    assert set(rows.rate) == {2.0, 8.0} and set(rows.profile) == {"poisson"} and set(rows.method) == {"goose"}
    assert (rows.output_tokens == 8).all() and (rows.prompt_tokens > 10).all()
    assert (rows.ttft_s > 0).all() and (rows.tpot_s > 0).all() and (rows.e2e_s >= rows.ttft_s).all()
    assert (rows.itl_s >= rows.tpot_s - 1e-9).all()  # a chunk carries one token or more
    summary = summarize(rows, Slo(ttft_s=60, tpot_s=60))
    assert list(summary.successful) == [4, 4] and (summary.good == 1.0).all()
