"""src/goose/measurement/draft_bounds.py: the replay accepts what verification accepts, and the clairvoyant pruner
bounds the shipped one."""

import os
import subprocess
import sys

import pytest
import torch

from goose.baselines.pld import PromptLookupDrafter
from goose.drafting.budget import AutoBudget, CostCurve
from goose.drafting.contract import Drafter
from goose.drafting.tree import TreeNodes
from goose.engine.single import Engine
from goose.measurement import draft_bounds
from goose.methods.goose import SPINE, GooseDrafter
from goose.running.loop import generate
from goose.storage.metrics import copy_split


@pytest.fixture(scope="module")
def bounds():
    from goose.measurement import draft_bounds
    return draft_bounds


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
    """PLD harvests nothing: its replay must give the real engine's widths step by step, and its tau."""
    engine = Engine(tiny)
    real_tokens = real_steps = 0
    for _, prompt, out, stops, ids, scores in cases:
        for auto in (False, True):
            drafters = [PromptLookupDrafter(), PromptLookupDrafter()]
            if auto:
                for d in drafters:
                    d.enable_auto_budget(AutoBudget(CURVE))
            real = generate(engine, prompt, drafters[0], len(out), stops)
            replayed = generate(bounds.ReplayEngine(prompt + out, ids, scores), prompt, drafters[1], len(out), stops)
            assert replayed.tokens == real.tokens == out
            assert replayed.widths == real.widths
        real_tokens, real_steps = real_tokens + len(real.tokens), real_steps + real.steps
    d = PromptLookupDrafter()
    d.enable_auto_budget(AutoBudget(CURVE))
    tau, *_ = bounds.summary(bounds.replay(d, cases, CURVE), CURVE)
    assert tau == pytest.approx(real_tokens / real_steps)  # the project's tau: prefill counted


def test_modelled_speed_divides_ar_by_the_verifications(bounds):
    curve = CostCurve([1, 4], [2.0, 3.0])
    # two prompts, 11 tokens each, 4 forwards each (prefill + 3 verifications costing 6 s in all)
    tau, speed, detail, split = bounds.summary({"b": [22, 8, 12.0, 2, 20 * 2.0, 6, 3, 1]}, curve)
    assert tau == 22 / 8 and speed == pytest.approx(20 * 2.0 / 12.0)
    assert detail == "b 2.75 / 3.33x" and split == "27 / 14 / 5"  # of the 22 tokens


def test_copy_split_tells_a_repeat_of_the_answer_from_the_prompt():
    prompt = [1, 2, 3, 4, 5, 6]
    out = [9, 1, 2, 3, 4, 7, 8, 9, 1, 2, 3, 4]  # copies the prompt, then repeats its own earlier text
    drafted = [False, False, True, True, True, False, False, False, False, True, True, True]
    # drafted 2 (6,9,1,2) and 3 (9,1,2,3): new text; 4 (1,2,3,4): the prompt's; then 2 (8,9,1,2): new; 3 and 4
    # end 4-grams the answer already holds (9,1,2,3 and 1,2,3,4): its own repeat, though the prompt has one too
    assert copy_split(prompt, out, drafted) == [2, 1, 3]


@pytest.mark.parametrize("curve", [CURVE, CostCurve([1, 2, 4, 8, 32], [1.0, 1.2, 0.9, 1.1, 2.0])])
def test_clairvoyant_bounds_the_shipped_pruner(cases, bounds, curve):
    """Also where 4 nodes cost less than 1 (as on prepacked CPUs): the clairvoyant steps are costed padded."""
    shipped = GooseDrafter()
    shipped.enable_auto_budget(AutoBudget(curve))
    _, speed, *_ = bounds.summary(bounds.replay(shipped, cases, curve), curve)
    c_tau, c_speed, *_ = bounds.summary(bounds.replay(GooseDrafter(), cases, curve, clairvoyant=True), curve)
    assert c_speed >= speed  # per step it verifies only what is accepted (tau itself may differ a little)
    assert c_tau > 1.2  # the tiny model's repetitive text gives GOOSE something to accept
    padded = bounds.Clairvoyant.padded(curve)
    assert padded(1) == min(curve(w) for w in range(1, 40)) and padded(8) == curve(8) and padded(5) <= curve(5)


def test_foreseeing_long_runs_adds_their_path_to_what_the_shipped_pruner_keeps(bounds):
    """Where the walk will accept 8 or more drafted nodes the whole path is verified, whatever the pruner
    chose; elsewhere exactly the pruner's choice."""
    chain = TreeNodes(0)
    for i in range(12):
        chain.add(i, 100 + i, SPINE, 0.5, 1)
    dear = CostCurve([1, 2, 16], [1.0, 5.0, 80.0])  # the shipped pruner keeps the root alone
    for held, kept in ((12, 13), (7, 1)):
        truth = [100 + i for i in range(held)] + [0]
        engine = bounds.ReplayEngine([0, *truth], None, None)
        engine.n = 1
        pruner = bounds.Foresighted(dear, engine)
        assert len(AutoBudget(dear).prune(chain)) == 1
        assert len(pruner.prune(chain)) == kept


def test_accepted_path_follows_the_truth_and_skips_context_nodes(bounds):
    tokens, parents = [0, 1, 2, 3, 2], [-1, 0, 1, 0, -1]
    assert bounds.accepted_path(tokens, parents, [1, 2, 9]) == [0, 1, 2]
    assert bounds.accepted_path(tokens, parents, [2]) == [0]  # node 4 is visible context only
    assert bounds.accepted_path(tokens, parents, [3, 3]) == [0, 3]


def test_hypothetical_cost_curve_is_read_in_ms_and_bad_points_refused(bounds):
    errors = []

    def error(message):
        errors.append(message)
        raise SystemExit(2)

    curve = bounds.parse_cost(["16:36", "1:36.5", "32:70"], error)
    assert curve.widths == [1, 16, 32] and curve(1) == pytest.approx(0.0365) and curve(24) == pytest.approx(0.053)
    for bad in (["8"], ["0:30"], ["8:-1"], ["8:nan"], ["a:3"], ["8:30", "8:31"]):
        with pytest.raises(SystemExit):
            bounds.parse_cost(bad, error)
    assert len(errors) == 6 and "W:MS" in errors[0] and "each width once" in errors[-1]


@pytest.mark.integration
def test_script_runs_and_refuses_methods_it_cannot_replay(tiny_folder, tmp_path, capsys, monkeypatch):
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH="")
    args = ["--model", "hf", "--model-path", str(tiny_folder), "--benchmarks", "humaneval", "--n-prompts", "2",
            "--max-new-tokens", "16"]
    ok = subprocess.run([sys.executable, "-m", "goose.measurement.draft_bounds", *args, "--methods", "pld@auto",
                         "goose@auto", "--real"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr[-2000:]
    rows = [line for line in ok.stdout.splitlines() if line.startswith("| ") and "method" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["hf-prompt-lookup", "pld@auto", "goose@auto:prompt"]
    rows = {r.split("|")[1].strip(): r for r in rows}
    goose = rows["goose@auto:prompt"].split("|")
    assert float(goose[6]) >= float(goose[3])  # clairvoyant x AR >= shipped
    assert float(goose[4]) > 0 and rows["hf-prompt-lookup"].split("|")[4].strip() == "-"  # foresight: auto only
    pld = rows["pld@auto"].split("|")
    assert pld[9:11] == pld[2:4] and float(goose[9]) > 1  # PLD harvests nothing: its real run is its replay
    # the rest in this process (the subprocess above shows the script runs as a command)
    monkeypatch.chdir(tmp_path)
    draft_bounds.main([*args, "--methods", "goose@auto", "--cost-ms", "1:10", "64:10"])
    assert "hypothetical, from --cost-ms): T=1 10.0, T=2 10.0" in capsys.readouterr().out
    for methods, says in ((["lookahead"], "support budget=auto"), (["nope"], "unknown nope")):
        with pytest.raises(SystemExit) as stop:
            draft_bounds.main([*args, "--methods", *methods])
        assert stop.value.code == 2 and says in capsys.readouterr().err
