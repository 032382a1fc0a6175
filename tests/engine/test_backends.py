"""Execution backends: the prepacked (oneDNN) path computes what eager computes, every method stays
token-identical to AR on it, and the backend keys every stored result."""

import copy

import pytest
import torch
from conftest import drafter_for
from torch import nn

from goose.drafting.contract import Drafter
from goose.engine.backends import PrepackedLinear, apply_backend, backend_of, default_backend
from goose.engine.draft import Draft
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.running.loop import generate
from goose.running.registry import method_names

pytestmark = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")


@pytest.fixture(scope="module")
def packed():
    from tiny import tiny_model

    return apply_backend(tiny_model(seed=0), "prepacked")


def test_every_linear_is_prepacked_and_matches_eager_logits(tiny, packed):
    assert backend_of(tiny) == "eager" and backend_of(packed) == "prepacked"
    assert not any(type(m) is nn.Linear for m in packed.modules())
    assert sum(isinstance(m, PrepackedLinear) for m in packed.modules()) == sum(
        type(m) is nn.Linear for m in tiny.modules())
    ids = torch.randint(0, 250, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        a, b = tiny(input_ids=ids).logits, packed(input_ids=ids).logits
    assert torch.allclose(a, b, atol=1e-4, rtol=1e-4)
    assert Engine(packed).backend == "prepacked" and Engine(tiny).backend == "eager"
    kept = sum(p.numel() for p in packed.parameters())  # the plain weights are dropped but the output embeddings'
    assert kept < sum(p.numel() for p in tiny.parameters()) * 0.8


def test_a_row_does_not_depend_on_how_many_rows_share_the_forward():
    """Verification batches T tokens where AR runs one: a prepacked row comes out bit-identical either way (fp32,
    CPU). Only close would not do: a near-tie read two ways is a method's token differing from AR's."""
    lin = PrepackedLinear(nn.Linear(64, 300))
    x = torch.randn(1, 17, 64, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        whole = lin(x)
        alone = torch.cat([lin(x[:, i : i + 1]) for i in range(17)], dim=1)
    assert torch.equal(whole, alone)


def test_masked_attention_over_the_grouped_heads_computes_what_sdpa_computes(packed):
    """prepacked attends to the key/value heads as stored (no repeat_kv copy); a tree verification gives
    bit-identical logits to transformers' own sdpa on the same weights."""
    from goose.engine.backends import KV_HEADS_ATTENTION

    assert packed.config._attn_implementation == KV_HEADS_ATTENTION and packed.config.num_key_value_heads < \
        packed.config.num_attention_heads
    g = torch.Generator().manual_seed(5)
    prompt = torch.randint(0, 250, (37,), generator=g).tolist()
    tree = torch.randint(0, 250, (9,), generator=g).tolist()

    def logits(implementation):
        packed.set_attn_implementation(implementation)
        engine = Engine(packed)
        engine.prefill(prompt)
        res = engine.verify(Draft(tree, [-1, 0, 0, 1, 1, 2, 3, 3, 6]), topk=8)
        return res.topk_scores, res.topk_ids

    try:
        ours, theirs = logits(KV_HEADS_ATTENTION), logits("sdpa")
    finally:
        packed.set_attn_implementation(KV_HEADS_ATTENTION)
    assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


# GOOSE in the unit tier, the others in the integration tier
@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m == "goose" else pytest.mark.integration)
                                  for m in method_names()])
def test_every_method_is_token_identical_to_ar_on_the_prepacked_backend(name, packed, prompts, store):
    drafter, _ = drafter_for(name, extra=[f"rest_datastore={store}"])
    engine = Engine(packed)
    for p in prompts:
        assert generate(engine, p, drafter, 40).tokens == generate(engine, p, Drafter(), 40).tokens, name


def test_backend_choices_and_refusals(tiny):
    cpu = torch.device("cpu")
    assert default_backend(cpu, torch.float32) == "prepacked"
    assert default_backend(cpu, torch.float16) == "eager" and default_backend(torch.device("cuda"), torch.float32) \
        == "eager"
    with pytest.raises(GooseError, match="unknown engine.backend 'fast'"):
        apply_backend(copy.deepcopy(tiny), "fast")
    with pytest.raises(GooseError, match="runs fp32 weights"):
        apply_backend(copy.deepcopy(tiny).to(torch.bfloat16), "prepacked")
    assert apply_backend(tiny, "eager") is tiny and backend_of(tiny) == "eager"


@pytest.mark.integration
def test_the_backend_is_in_the_config_hash_and_the_run_folder_keeps_them_apart(tiny_folder, tmp_path):
    from runs import rows, run_here, run_py

    base = ["model=hf", f"model.path={tiny_folder}", "method=pld", "n_prompts=2", "max_new_tokens=8",
            f"results_dir={tmp_path}"]
    for backend in ("eager", "prepacked"):
        r = run_py(*base, f"engine.backend={backend}")
        assert r.returncode == 0, r.stderr[-2000:]
    folders = sorted((tmp_path / "model" / "humaneval" / "pld").iterdir())
    assert len(folders) == 2
    got = {rows(f / "results.csv")[0]["backend"] for f in folders}
    assert got == {"eager", "prepacked"}
    assert all(r["lossless"] == "True" for f in folders for r in rows(f / "results.csv"))
    bad = run_here(*base, "engine.backend=turbo")
    assert bad.returncode == 2 and "unknown engine.backend 'turbo'" in bad.stderr


@pytest.mark.integration
def test_bench_runs_both_backends_side_by_side(tiny_folder, tmp_path):
    """bench.py on a CPU fp32 model: cost curves of both backends, every method on each, HF's loops on each
    backend's model object, every row identical to HF greedy on its own backend."""
    import os
    import subprocess
    import sys


    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH="")
    b = subprocess.run([sys.executable, "-m", "goose.measurement.bench", "--model", "hf", "--model-path",
                        str(tiny_folder), "--methods", "pld@60", "goose@auto", "hf-prompt-lookup", "--benchmarks",
                        "humaneval", "--n-prompts", "2", "--max-new-tokens", "16", "--repeats", "1"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr[-2000:]
    assert "| T | eager | prepacked |" in b.stdout
    lines = {line.split("|")[1].strip(): line for line in b.stdout.splitlines() if line.startswith("| ")}
    for m in ("ar", "pld", "goose@auto:prompt", "hf-prompt-lookup"):
        for name in (m, f"{m} [prepacked]"):
            assert lines[name].rstrip().endswith("2/2 |"), lines[name]
    assert lines["hf-greedy [prepacked]"].rstrip().endswith("ref |")
    assert "AR on prepacked gives eager AR's tokens on" in b.stdout


def test_bench_cost_table_says_when_the_machine_was_busy(capsys):
    """Rounds of one backend's measurement that disagree (another process took the cores for a while) get a
    warning beside the table; calm rounds none."""


    from goose.measurement import bench

    class Timed:
        def __init__(self, busy: bool):
            self.busy = busy

        def measure_rounds(self, widths, context_len, repeats):
            slow = [1.0] * (repeats - 1) + [3.0 if self.busy else 1.0]  # the last round three times slower
            return [[0.01 * w * f for f in slow] for w in widths]

    bench.print_cost_curves({"eager": Timed(False), "prepacked": Timed(True)})
    out = capsys.readouterr()
    assert "busy while prepacked's cost was measured" in out.out and "eager's" not in out.out
    assert "| 8 | 80.0 (8.00, 8.00) | 80.0 (8.00, 8.00) |" in out.out  # medians: the busy round left out
