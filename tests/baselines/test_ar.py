"""Autoregressive decoding (goose.baselines.ar): the one-node draft through the shared engine is Hugging Face's
greedy decoding one token per forward, alone and in batches; AR is AR because it declares so; a run of it is its
own timing (no AR beside it) and says so in its rows."""

import json

import pytest
from conftest import hf_greedy, many_prompts
from runs import rows

from goose.baselines.ar import ARDrafter
from goose.drafting.contract import Capabilities, Drafter
from goose.engine.batched import BatchEngine
from goose.engine.draft import Draft
from goose.engine.single import Engine
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate


class OneNode(Drafter):
    """Proposes what AR proposes, but does not declare that it is AR."""

    name = "one-node"

    def propose(self, context):
        return Draft([context[-1]], [-1])


class MyAR(ARDrafter):
    name = "my-ar"


def test_ar_is_declared_not_recognised_by_its_propose():
    assert ARDrafter().capabilities.autoregressive and MyAR().capabilities.autoregressive  # a subclass stays AR
    assert not OneNode().capabilities.autoregressive  # one-node drafts alone do not make a drafter AR
    assert not Drafter().capabilities.autoregressive and not Capabilities().autoregressive
    assert OneNode().propose([5, 6]).tokens == ARDrafter().propose([5, 6]).tokens == [6]


def test_one_token_per_forward_and_hugging_faces_greedy_alone_and_in_batches(tiny, prompts):
    engine = Engine(tiny)
    for p in prompts:
        g = generate(engine, p, ARDrafter(), 32)
        assert g.tokens == hf_greedy(tiny, p, 32)
        assert g.steps == len(g.tokens) and set(g.widths) == {1}  # one token per forward, the prefill's included
    batch = many_prompts()
    want = [hf_greedy(tiny, p, 16) for p in batch]
    for width in (1, 4):
        got, _ = decode_batch(BatchEngine(tiny, rows=width), [Request(p, ARDrafter(), 16) for p in batch])
        assert [g.tokens for g in got] == want, width


@pytest.mark.integration
def test_a_run_of_ar_is_its_own_timing(tiny_folder, prompt_file, tmp_path, run_goose):
    run_goose("model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
              f"results_dir={tmp_path}", "max_new_tokens=8", "method=ar", "n_prompts=2")
    (csv,) = tmp_path.rglob("results.csv")
    got = rows(csv)
    assert len(got) == 2
    for r in got:
        assert float(r["tau"]) == pytest.approx(1.0) and r["speedup_source"] == "self", json.dumps(r)[:300]
        assert float(r["speedup"]) == 1.0 and float(r["ar_wall_s"]) > 0
