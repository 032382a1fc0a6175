"""One time per output token everywhere: after the first token, the prefill excluded, at every concurrency,
with the time to first token beside it (goose.storage.row_schema' ttft_s / tpot_s, the concurrency table)."""

import pandas as pd
import pytest

from goose.analysis.concurrency import concurrency_table
from goose.drafting.contract import Drafter
from goose.engine.single import Engine
from goose.running.batch_loop import Served
from goose.running.loop import Generation, generate


def test_one_definition_for_a_request_alone_and_in_a_batch():
    alone = Generation(tokens=[1, 2, 3, 4, 5], steps=3, wall_s=1.0, first_token_s=0.6)
    assert alone.ttft_s == 0.6 and alone.tpot_s == pytest.approx(0.1)  # (1.0 - 0.6) / 4, the prefill left out
    batched = Served(tokens=[1, 2, 3, 4, 5], steps=3, wall_s=0.05, admitted_s=2.0, first_token_s=2.5, done_s=3.3)
    assert batched.ttft_s == pytest.approx(0.5) and batched.tpot_s == pytest.approx(0.2)  # its share of the pass
    assert Generation(tokens=[7], steps=1, wall_s=0.3, first_token_s=0.3).tpot_s is None


def test_a_decoded_generation_knows_when_its_first_token_came(tiny):
    gen = generate(Engine(tiny), list(range(40, 80)), Drafter(), 12)
    assert 0 < gen.first_token_s < gen.wall_s and gen.tpot_s == pytest.approx(
        (gen.wall_s - gen.first_token_s) / 11)


def test_the_concurrency_table_reads_one_tpot_at_every_concurrency():
    common = {"model": "m", "benchmark": "b", "method": "goose", "variant": "", "budget": "60", "memory": "prompt",
              "steps": 5, "tau": 2.2, "lossless": True, "equality": "exact", "config_hash": "h", "speedup": 1.0,
              "tokens_per_s": 10.0, "ar_wall_s": 1.0}
    rows = pd.DataFrame([
        # concurrency 1: wall_s / new_tokens would read 100 ms (prefill included); after the first token, 50 ms
        {**common, "prompt_id": "0", "concurrency": 1, "new_tokens": 11, "wall_s": 1.1, "ttft_s": 0.6,
         "tpot_s": 0.05, "first_token_s": 0.6, "done_s": float("nan")},
        {**common, "prompt_id": "0", "concurrency": 4, "config_hash": "h4", "new_tokens": 11, "wall_s": 0.3,
         "ttft_s": 0.2, "tpot_s": 0.05, "first_token_s": 1.2, "done_s": 1.7},
    ])
    t = concurrency_table(rows)
    t = t[t.benchmark == "b"].set_index("concurrency")
    assert t.loc[1, "TPOT p50 ms"] == pytest.approx(50.0) == t.loc[4, "TPOT p50 ms"]
    assert t.loc[1, "TTFT p50 ms"] == pytest.approx(600.0) and t.loc[4, "TTFT p50 ms"] == pytest.approx(200.0)
