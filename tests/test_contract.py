"""The drafter contract, checked for every method in conf/method/ (a new method is covered with no
edit here): declared capabilities hold, budgets are applied or refused, a toy drafter added as one
file plus one YAML runs through run.py, bench.py and the all-methods table."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import hf_greedy

from goose.drafting.budget import AUTO_BUILD_NODES, AutoBudget, CostCurve
from goose.engine.draft import Verification
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.methods.goose import GooseDrafter
from goose.running.loop import generate
from goose.running.registry import method_drafter, method_names

ROOT = Path(__file__).resolve().parents[1]
NO_GAIN = CostCurve([1, 2, 128], [1.0, 100.0, 10_000.0])  # any draft beyond the root costs more than it can win
FREE = CostCurve([1, 128], [1.0, 1.0])  # verification costs the same at any width


def drafter(spec, store):
    return method_drafter(spec, extra=[f"rest_datastore={store}"])


def decode(tiny, prompts, d, n=40):
    engine = Engine(tiny)
    return [generate(engine, p, d, n) for p in prompts]


@pytest.mark.integration
@pytest.mark.parametrize("name", method_names())
def test_budget_auto_is_applied_or_refused(name, tiny, prompts, store):
    """Tripwire: a method that claims budget=auto prunes to the root when no draft pays, keeps its
    drafts when verification is free, and stays lossless; any other method refuses it clearly."""
    try:
        d, _ = drafter(f"{name}@auto", store)
    except GooseError as e:
        assert "does not support budget=auto" in str(e)
        return
    assert d.capabilities.auto_budget
    d.enable_auto_budget(AutoBudget(NO_GAIN))
    for p, g in zip(prompts, decode(tiny, prompts, d)):
        assert g.widths == [1] * len(g.widths), "budget=auto is inert: drafts were verified that cannot pay"
        assert g.tokens == hf_greedy(tiny, p, 40)
    free, _ = drafter(f"{name}@auto", store)
    free.enable_auto_budget(AutoBudget(FREE))
    plain, _ = drafter(f"{name}@{AUTO_BUILD_NODES}", store)  # what budget=auto builds before it prunes
    for f, g in zip(decode(tiny, prompts, free), decode(tiny, prompts, plain)):
        assert max(f.widths) <= max(g.widths)  # pruned from the drafts it would verify anyway
        assert max(f.widths) > 1 or max(g.widths) == 1  # ... but not to nothing when verification is free


@pytest.mark.integration
@pytest.mark.parametrize("name", method_names())
def test_a_numeric_budget_changes_drafts_or_is_recorded_as_fixed(name, tiny, prompts, store):
    from tiny import byte_tokenizer

    from goose.running.registry import budget_label

    # A context from the REST store's corpus, proposed on directly: the tiny model never writes it.
    corpus = byte_tokenizer()("def add(a, b):\n    return a + b\n\ndef add(a, b):\n    ret").input_ids

    def first_draft(d):
        d.start(corpus, Verification(path=[0], bonus=corpus[-1]))
        return len(d.propose(corpus).tokens)

    small, _ = drafter(f"{name}@3", store)
    large, _ = drafter(f"{name}@60", store)
    w_small = [w for g in decode(tiny, prompts, small) for w in g.widths] + [first_draft(small)]
    w_large = [w for g in decode(tiny, prompts, large) for w in g.widths] + [first_draft(large)]
    if budget_label(small.config, 3) == "fixed":
        assert w_small == w_large  # the budget cannot change its drafts, so runs record budget=fixed
    else:
        assert sum(w_small) < sum(w_large)  # (a confident chain may exceed the budget: GOOSE's bypass)


@pytest.mark.parametrize("name", method_names())
def test_declared_memory_matches_behaviour(name, tiny, prompts, store):
    """A method that says it keeps no state across prompts drafts a prompt the same whatever ran before."""
    d, _ = drafter(name, store)
    engine = Engine(tiny)
    alone = generate(engine, prompts[-1], drafter(name, store)[0], 40)
    for p in prompts[:-1]:
        generate(engine, p, d, 40)
    after = generate(engine, prompts[-1], d, 40)
    assert after.tokens == alone.tokens
    if not d.capabilities.memory:
        assert (after.steps, after.widths, after.stats) == (alone.steps, alone.widths, alone.stats)


@pytest.mark.parametrize("name", method_names())
def test_capabilities_say_what_the_engine_must_return(name, tiny, prompts, store):
    """The engine hands top-k only to drafters that ask, and every drafter's counters add up."""
    d, _ = drafter(name, store)
    seen = []
    accepted = d.accepted

    def spy(result, context):
        seen.append(result.topk_ids is not None)
        accepted(result, context)

    d.accepted = spy
    g = decode(tiny, prompts[:1], d)[0]
    assert set(seen) == {d.capabilities.topk > 0}
    assert len(g.origins) == len(g.tokens) and g.origins[0] == "bonus"  # every token says where it came from
    s = g.stats
    if "drafted" in s:  # tree drafters: per-source counts add up to the totals
        names = [k[: -len("_drafted")] for k in s if k.endswith("_drafted") and k != "window_drafted"]
        assert sum(s[f"{n}_drafted"] for n in names if n != "") == s["drafted"]
        assert sum(s[f"{n}_accepted"] for n in names) == s["accepted"] >= len(g.tokens) - g.steps  # (last step cut)
        assert "spine_rate" not in s or isinstance(d, GooseDrafter)  # no baseline reports GOOSE's sources


def test_a_bad_hyperparameter_is_a_clear_error(run_goose, tmp_path):
    with pytest.raises(GooseError, match="rhoo"):
        run_goose("method=goose", "+method.drafter.rhoo=0.3", f"results_dir={tmp_path}")
    with pytest.raises(GooseError, match="rho"):
        run_goose("method=goose", "+method.drafter.rho=2", f"results_dir={tmp_path}")
    with pytest.raises(GooseError, match="top-level budget"):
        run_goose("method=goose", "+method.drafter.budget=8", f"results_dir={tmp_path}")
    assert not any(tmp_path.iterdir())


TOY = '''
from dataclasses import dataclass

from goose.drafting.contract import Capabilities
from goose.drafting.tree import Source, TreeDrafter, TreeNodes

REPEAT = Source("repeat")


@dataclass(frozen=True)
class RepeatConfig:
    length: int = 4


class RepeatDrafter(TreeDrafter):
    """Guesses that the last token repeats."""

    Config = RepeatConfig
    sources = (REPEAT,)
    capabilities = Capabilities(auto_budget=True, trace=True)

    def propose(self, context):
        nodes = TreeNodes(context[-1])
        for i in range(self.config.length):
            nodes.add(i, context[-1], REPEAT)
        return self.finish(nodes)
'''


@pytest.mark.integration
def test_a_new_drafter_is_one_file_plus_one_yaml(tiny_folder, tmp_path, run_goose, monkeypatch):
    from goose.analysis.artifacts import make
    from goose.analysis.load import load_rows

    user = tmp_path / "mine"
    (user / "method").mkdir(parents=True)
    (user / "repeat_drafter.py").write_text(TOY)
    (user / "method" / "repeat.yaml").write_text("name: repeat\ndrafter:\n  _target_: repeat_drafter.RepeatDrafter\n"
                                                 "  length: 3\n")
    monkeypatch.syspath_prepend(str(user))
    res = tmp_path / "res"
    common = ["model=hf", f"model.path={tiny_folder}", "n_prompts=2", "max_new_tokens=12", f"results_dir={res}"]
    summary, _ = run_goose(f"hydra.searchpath=[file://{user}]", "method=repeat", *common)
    assert summary["lossless"] == 2 and summary["budget"] == "fixed"
    run_goose("method=ar", *common)
    rows = load_rows(res)
    assert set(rows.method) == {"repeat", "ar"} and rows[rows.method == "repeat"].repeat_drafted.sum() > 0
    table = make("all_methods", rows, tmp_path / "artifacts")
    assert "repeat" in next(p for p in table if p.suffix == ".md").read_text()

    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH="")
    b = subprocess.run([sys.executable, "-m", "goose.experiments.bench", "--model", "hf", "--model-path",
                        str(tiny_folder), "--search-path", str(user), "--methods", "repeat", "repeat@auto",
                        "--benchmarks", "humaneval", "--n-prompts", "1", "--max-new-tokens", "8", "--repeats", "1"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr[-2000:]
    lines = {line.split("|")[1].strip(): line for line in b.stdout.splitlines() if line.startswith("| ")}
    assert lines["repeat"].rstrip().endswith("1/1 |") and lines["repeat@auto"].rstrip().endswith("1/1 |")
