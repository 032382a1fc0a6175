import functools
import os

import pytest
import torch

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def tiny():
    from tiny import tiny_model

    return tiny_model(seed=0)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory):
    from tiny import save_tiny

    return save_tiny(tmp_path_factory.mktemp("tiny") / "model")


def unit_keeps(values, keep):
    """The parameters of a test over every method (or artifact, or folder): the cases in `keep` stay in the unit
    tier, the others are integration (docs/testing.md)."""
    return [pytest.param(v, marks=() if v in keep else pytest.mark.integration) for v in values]


def hf_greedy(model, prompt, n, eos=None):
    out = model.generate(torch.tensor([prompt]), max_new_tokens=n, do_sample=False,
                         eos_token_id=eos, pad_token_id=0)
    return out[0, len(prompt):].tolist()


def needs_data(*relative: str):
    """Skip (with the reason) where a real benchmark file is found in none of the data folders: a clone
    without ../shared/data and without `make data`. In this repository's CI they are found."""
    from goose.benchmarks.prompts import DataDirs

    dirs = DataDirs.of()
    missing = [r for r in relative if dirs.find(r) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not in {dirs.describe()} "
                              "(`make data` fetches it)")


SPEC_BENCH = needs_data("spec_bench/question.jsonl")
ALL_DATA = needs_data("spec_bench/question.jsonl", "gsm8k/test.jsonl", "mbpp/mbpp.jsonl",
                      "classeval/ClassEval_data.json")


# Settings under which llama.cpp's n-gram peers draft on the tiny model's short texts (tests over every method add
# them): by default they match 12- and 24-token n-grams, draft at least 12 or 48 tokens, and ngram-mod files what
# is generated 32 tokens at a time (goose.baselines.llamacpp_ngram).
SHORT_TEXT = {"llamacpp-ngram-simple": ("+method.drafter.size_n=1", "+method.drafter.size_m=8"),
              "llamacpp-ngram-mod": ("+method.drafter.n_match=3", "+method.drafter.n_min=1", "+method.drafter.n_max=8",
                                     "+method.drafter.chunk=0")}


PAPER_B = 60  # the tests' drafters and specs run at the paper's B unless they name a budget (the default, budget=null:
# auto where a method prunes, is pinned in tests/running/test_spec.py)


def at_paper_budget(spec: str) -> str:
    """`name[:memory]` as `name@60[:memory]`; a spec naming its budget as it is."""
    head, colon, memory = spec.partition(":")
    return spec if "@" in head else f"{head}@{PAPER_B}{colon}{memory}"


def drafter_for(spec: str, model: str = "smollm2-135m", extra=()):
    """A fresh drafter for `name[@budget][:memory]` (no budget: the paper's 60), and its budget, resolved as run.py
    resolves them."""
    from goose.running.registry import make_drafter

    method, budget = _method(at_paper_budget(spec), model, tuple(extra))
    return make_drafter(method, budget), budget


@functools.cache
def _method(spec: str, model: str, extra: tuple) -> tuple:
    """load_method's (frozen) answer, once per session: Hydra's composition is most of a drafter test's time, and
    the config files do not change while the tests run."""
    from goose.running.registry import load_method

    return load_method(spec, model, extra=extra)


def spec_of(*overrides):
    """The run spec run.py builds for these command-line overrides (composed in this process); no budget among them:
    the paper's 60."""
    from goose.running.registry import compose_config
    from goose.running.spec import RunSpec

    given = any(o.lstrip("+~").startswith("budget=") for o in overrides)
    return RunSpec.from_config(compose_config([*overrides, *([] if given else [f"budget={PAPER_B}"])]))


def hash_of(*overrides, model_fp="m", prompts_fp="p", data_fp=""):
    """The config hash of these overrides, with made-up fingerprints (what the config points at)."""
    from goose.core.identity import ModelIdentity
    from goose.storage.run_folder import config_hash

    return config_hash(spec_of(*overrides), ModelIdentity("m", model_fp, "", "hf", ""), prompts_fp, data_fp)


@pytest.fixture
def prompt_file(tmp_path):
    """Four code-like prompts as a JSONL benchmark file (benchmark=jsonl benchmark.path=...)."""
    import json

    p = tmp_path / "prompts.jsonl"
    lines = [{"id": f"p{i}", "prompt": f"def f{i}(x):\n    return x + x + x + {i}\n" * 2} for i in range(4)]
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


@pytest.fixture(scope="session")
def prompts():
    g = torch.Generator().manual_seed(1)
    # Repetitive prompts so context matching finds something, plus random ones.
    base = torch.randint(0, 250, (12,), generator=g).tolist()
    return [base * 3, torch.randint(0, 250, (20,), generator=g).tolist(), (base[:5] + [7, 7]) * 4]


@pytest.fixture
def run_goose(capsys):
    """run.py's job in this process (Hydra compose, no interpreter start): returns (summary, stdout)."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    from goose.paths import register_experiments
    from goose.running.runner import run

    register_experiments()

    def go(*overrides, sweep_id="test-sweep"):
        with initialize_config_dir(str(Path(__file__).resolve().parents[1] / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=list(overrides))
        summary = run(cfg, sweep_id)
        return summary, capsys.readouterr().out

    return go


@pytest.fixture(scope="session")
def store(tmp_path_factory):
    """A small REST datastore built with the tiny model's byte tokenizer."""
    from tiny import byte_tokenizer

    from goose.baselines.rest_datastore import build

    corpus = tmp_path_factory.mktemp("corpus")
    (corpus / "a.py").write_text("def add(a, b):\n    return a + b\n\n" * 5)
    (corpus / "b.txt").write_text("the cat sat on the mat. the cat ate.\n" * 3)
    out = tmp_path_factory.mktemp("ds") / "store"
    meta = build(byte_tokenizer(), "tiny", str(corpus), out, None, 10_000)
    assert meta["documents"] == 2 and meta["tokens"] > 100
    return out


def many_prompts():
    g = torch.Generator().manual_seed(3)
    base = torch.randint(0, 250, (9,), generator=g).tolist()
    return [base * 3, torch.randint(0, 250, (31,), generator=g).tolist(), base[:4] * 5, [7, 8, 9],
            (base[2:7] + [1, 1]) * 4, torch.randint(0, 250, (12,), generator=g).tolist()]


# GOOSE's ablations as Config overrides: every one lossless (test_goose_parts, the slow tier)
ABLATIONS = [dict(), dict(rho=0.0), dict(bigram=False), dict(use_confidence=False), dict(prefill_harvest=False),
             dict(context_spine=False), dict(spine_continuation=False)]


def lossless_everywhere(tiny, prompts, make, one_drafter: bool = False, new_tokens: int = 40) -> int:
    """A method's drafters (`make()` builds one) return AR's tokens: alone (Hugging Face's greedy), in batches of 1
    and 4 (continuous refill, drafters spawned from one template) and sampled (the AR sampler, two seeds).
    `one_drafter`: one drafter answers the prompts alone in turn (what it keeps carries over, memory=run). Returns
    the tokens its drafts landed alone, so a test can check they are walked, not only verified."""
    from goose.drafting.contract import Drafter
    from goose.engine.batched import BatchEngine
    from goose.engine.sampling import Sampling
    from goose.engine.single import Engine
    from goose.running.batch_loop import Request, decode_batch
    from goose.running.loop import generate

    engine = Engine(tiny)
    shared = make() if one_drafter else None
    landed = 0
    for p in prompts:
        g = generate(engine, p, shared or make(), new_tokens)
        assert g.tokens == hf_greedy(tiny, p, new_tokens)
        landed += len(g.tokens) - g.steps
    batch = many_prompts()
    want = [generate(engine, p, Drafter(), 24).tokens for p in batch]
    for rows in (1, 4):
        template = make()
        got, _ = decode_batch(BatchEngine(tiny, rows=rows), [Request(p, template.spawn(), 24) for p in batch])
        assert [g.tokens for g in got] == want, rows
    for seed in (0, 1):
        s = Sampling(0.7, 0, 0.95, seed)
        for p in prompts:
            assert generate(engine, p, make(), 32, sampling=s).tokens == \
                generate(engine, p, Drafter(), 32, sampling=s).tokens, seed
    return landed
