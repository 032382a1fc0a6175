"""experiments/draft_bounds.py: the replay accepts what verification accepts, and the clairvoyant pruner
bounds the shipped one."""

import importlib.util
import os
import subprocess
import sys

import pytest
import torch
from test_run import ROOT

from baselines.pld import PromptLookupDrafter
from goose.budget import AutoBudget, CostCurve
from goose.decode import generate
from goose.drafter import Drafter
from goose.engine import Engine
from goose.spine_tree import GooseDrafter


@pytest.fixture(scope="module")
def bounds():
    spec = importlib.util.spec_from_file_location("draft_bounds", ROOT / "experiments" / "draft_bounds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def cases(tiny, prompts):
    engine = Engine(tiny)
    out = []
    for p in prompts:
        tokens = generate(engine, p, Drafter(), 32).tokens
        with torch.inference_mode():
            scores, ids = tiny(input_ids=torch.tensor([p + tokens])).logits[0].topk(10, dim=-1)
        out.append(("tiny", list(p), tokens, frozenset(), ids, scores))
    return out


CURVE = CostCurve([1, 8, 32], [1.0, 1.2, 2.0])


def test_replay_takes_the_steps_verification_takes(tiny, cases, bounds):
    """PLD harvests nothing: its replay must give the real engine's widths, step by step."""
    engine = Engine(tiny)
    for _, prompt, out, stops, ids, scores in cases:
        real = generate(engine, prompt, PromptLookupDrafter(), len(out), stops)
        replayed = generate(bounds.ReplayEngine(prompt + out, ids, scores), prompt, PromptLookupDrafter(), len(out),
                            stops)
        assert replayed.tokens == real.tokens == out
        assert replayed.widths == real.widths


def test_clairvoyant_bounds_the_shipped_pruner(cases, bounds):
    shipped = GooseDrafter()
    shipped.enable_auto_budget(AutoBudget(CURVE))
    _, speed, _ = bounds.summary(bounds.replay(shipped, cases, CURVE), CURVE)
    c_tau, c_speed, _ = bounds.summary(bounds.replay(GooseDrafter(), cases, CURVE, bounds.Clairvoyant), CURVE)
    assert c_speed >= speed  # per step it verifies only what is accepted (tau itself may differ a little)
    assert c_tau > 1.0  # the tiny model's repetitive text gives GOOSE something to accept


def test_accepted_path_follows_the_truth_and_skips_context_nodes(bounds):
    tokens, parents = [0, 1, 2, 3, 2], [-1, 0, 1, 0, -1]
    assert bounds.accepted_path(tokens, parents, [1, 2, 9]) == [0, 1, 2]
    assert bounds.accepted_path(tokens, parents, [2]) == [0]  # node 4 is visible context only
    assert bounds.accepted_path(tokens, parents, [3, 3]) == [0, 3]


def test_script_runs_and_refuses_methods_it_cannot_replay(tiny_folder, tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH="")
    base = [sys.executable, str(ROOT / "experiments" / "draft_bounds.py"), "--model", "hf", "--model-path",
            str(tiny_folder), "--benchmarks", "humaneval", "--n-prompts", "2", "--max-new-tokens", "16"]
    ok = subprocess.run([*base, "--methods", "pld@auto", "goose@auto"], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr[-2000:]
    rows = [line for line in ok.stdout.splitlines() if line.startswith("| ") and "method" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["hf-prompt-lookup", "pld@auto", "goose@auto:prompt"]
    bad = subprocess.run([*base, "--methods", "lookahead"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode == 2 and "support budget=auto" in bad.stderr
    unknown = subprocess.run([*base, "--methods", "nope"], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
    assert unknown.returncode == 2 and "unknown nope" in unknown.stderr
