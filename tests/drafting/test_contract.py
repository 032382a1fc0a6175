"""The drafter contract, checked for every method in conf/method/ (a new method is covered with no
edit here): declared capabilities hold, budgets are applied or refused, requests decoded side by side
share what memory=run keeps and nothing else, a toy drafter added as one file plus one YAML runs
through run.py, bench.py and the all-methods table. (The contract's table in docs/engine.md is
checked against the class in tests/drafting/test_contract_table.py.)"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import SHORT_TEXT, drafter_for, hf_greedy, unit_keeps

from goose.drafting.budget import AUTO_BUILD_NODES, AutoBudget, CostCurve
from goose.engine.draft import Verification, greedy_walk
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.methods.goose import GooseDrafter
from goose.running.loop import generate
from goose.running.registry import method_names

ROOT = Path(__file__).resolve().parents[2]
NO_GAIN = CostCurve([1, 2, 128], [1.0, 100.0, 10_000.0])  # any draft beyond the root costs more than it can win
FREE = CostCurve([1, 128], [1.0, 1.0])  # verification costs the same at any width


def drafter(spec, store):
    return drafter_for(spec, extra=[f"rest_datastore={store}"])


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

    from goose.drafting.contract import takes_budget

    # A context from the REST store's corpus, proposed on directly: the tiny model never writes it.
    corpus = byte_tokenizer()("def add(a, b):\n    return a + b\n\ndef add(a, b):\n    ret").input_ids

    def first_draft(d):
        d.start(corpus, Verification(path=[0], bonus=corpus[-1]))
        return len(d.propose(corpus).tokens)

    small, _ = drafter(f"{name}@3", store)
    large, _ = drafter(f"{name}@60", store)
    w_small = [w for g in decode(tiny, prompts, small) for w in g.widths] + [first_draft(small)]
    w_large = [w for g in decode(tiny, prompts, large) for w in g.widths] + [first_draft(large)]
    if not takes_budget(small.config):
        assert w_small == w_large  # the budget cannot change its drafts, so runs record budget=fixed
    else:
        assert sum(w_small) < sum(w_large)  # (a confident chain may exceed the budget: GOOSE's bypass)


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m == "goose" else pytest.mark.integration)
                                  for m in method_names()])
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


@pytest.mark.parametrize("name", unit_keeps(method_names(), {"goose"}))
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
    summary, _ = run_goose(f"hydra.searchpath=[file://{user}]", "method=repeat", "budget=60", *common)
    assert summary["lossless"] == 2 and summary["budget"] == "fixed"
    run_goose("method=ar", *common)
    rows = load_rows(res)
    assert set(rows.method) == {"repeat", "ar"} and rows[rows.method == "repeat"].repeat_drafted.sum() > 0
    table = make("all_methods", rows, tmp_path / "artifacts")
    assert "repeat" in next(p for p in table if p.suffix == ".md").read_text()

    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONPATH="")
    b = subprocess.run([sys.executable, "-m", "goose.measurement.bench", "--model", "hf", "--model-path",
                        str(tiny_folder), "--search-path", str(user), "--methods", "repeat@60", "repeat@auto",
                        "--benchmarks", "humaneval", "--n-prompts", "1", "--max-new-tokens", "8", "--repeats", "1"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr[-2000:]
    lines = {line.split("|")[1].strip(): line for line in b.stdout.splitlines() if line.startswith("| ")}
    assert lines["repeat"].rstrip().endswith("1/1 |") and lines["repeat@auto"].rstrip().endswith("1/1 |")


# --- concurrency: two requests' drafters, spawned as a batch spawns them (goose.running.batch_loop) ----------
# A made-up target whose next token depends on the last token only: after RESPONSE[i] it writes RESPONSE[i + 1],
# elsewhere t + 1 (so after LESSON_PROMPT's last token, 99, it starts RESPONSE). Its top-k: that token, then 240+.
RESPONSE = list(range(100, 148, 2))
LESSON_PROMPT = list(range(1, 13)) + [99]
J = 10  # the second request's prompt ends with RESPONSE[J - 3 : J], its root is RESPONSE[J]: will it draft J + 1?
PROBE_PROMPT = [200, 201, 202, 203, *RESPONSE[J - 3 : J]]


def target_next(t: int) -> int:
    return RESPONSE[RESPONSE.index(t) + 1] if t in RESPONSE[:-1] else t + 1


def target_topk(tokens: list[int], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = [[target_next(t), *[a for a in range(240, 256) if a != target_next(t)][: k - 1]] for t in tokens]
    return torch.tensor(ids), torch.tensor([[8.0 - j for j in range(k)]] * len(tokens))


def begin(d, prompt: list[int]) -> list[int]:
    """`d.start` as the loops call it: prompt + the target's first token, the prompt's top-k when asked."""
    context = [*prompt, target_next(prompt[-1])]
    caps = d.capabilities
    ids, scores = target_topk(prompt, caps.topk) if caps.harvest_prefill and caps.topk else (None, None)
    d.start(context, Verification(path=[0], bonus=context[-1], topk_ids=ids, topk_scores=scores))
    return context


def teach(d) -> None:
    """The first request: LESSON_PROMPT, then RESPONSE decoded through the contract (propose, the target's walk,
    origins, accepted), then stop: what it files is RESPONSE."""
    context = begin(d, LESSON_PROMPT)
    k = d.capabilities.topk
    while len(context) < len(LESSON_PROMPT) + len(RESPONSE):
        draft = d.propose(context)
        path = greedy_walk(draft.parents, draft.tokens, [target_next(t) for t in draft.tokens])
        ids, scores = target_topk(draft.tokens, k) if k else (None, None)
        result = Verification(path=path, bonus=target_next(draft.tokens[path[-1]]), topk_ids=ids, topk_scores=scores,
                              width=len(draft))
        room = len(LESSON_PROMPT) + len(RESPONSE) - len(context)
        context.extend(([draft.tokens[i] for i in path[1:]] + [result.bonus])[:room])
        d.origins(path)
        d.accepted(result, context)
    assert context[len(LESSON_PROMPT):] == RESPONSE  # the made-up target decoded what it writes
    d.stop()


def probe(d):
    """The second request's first draft: its prompt ends where RESPONSE goes on, a continuation only a drafter that
    saw RESPONSE knows (it is in neither the second's prompt nor that prompt's top-k)."""
    return d.propose(begin(d, PROBE_PROMPT))


def knows_the_lesson(draft) -> bool:
    return any(p == 0 and t == RESPONSE[J + 1] for t, p in zip(draft.tokens[1:], draft.parents[1:]))


def same(a, b) -> bool:
    return (a.tokens, a.parents) == (b.tokens, b.parents)


def check_shared(template) -> None:
    """Under memory=run the requests in flight share what is kept across prompts: the second request's drafter
    drafts what the first filed, and exactly what one drafter drafts that decoded both requests in turn."""
    first, second = template.spawn(), template.spawn()  # both before either starts, as a batch spawns them
    assert not knows_the_lesson(probe(type(template)(template.config))), "the probe is answered without the lesson"
    teach(first)
    drafted = probe(second)
    who = type(template).__name__
    assert knows_the_lesson(drafted), (f"{who}: the second request's drafter does not see what the first filed "
                                       "(does share_with hand over the state kept across prompts?)")
    alone = type(template)(template.config)
    teach(alone)
    assert same(drafted, probe(alone)), (f"{who}: the second request's drafter does not see all that the first "
                                         "filed: it drafts other than one drafter that decoded both requests")


def check_isolated(template) -> None:
    """A drafter that keeps nothing across prompts shares nothing learned: the second request drafts as if the
    first had never run."""
    first, second = template.spawn(), template.spawn()
    teach(first)
    alone, after = probe(type(template)(template.config).spawn()), probe(second)
    assert same(after, alone), type(template).__name__


def forgetful(cls: type) -> type:
    """A broken drafter: `cls` whose share_with hands nothing over."""
    return type(f"Forgetful{cls.__name__}", (cls,), {"share_with": lambda self, other: None})


@pytest.mark.parametrize("name", unit_keeps(method_names(), {"goose"}))
def test_spawned_drafters_share_what_memory_run_keeps(name, store):
    """Every method at memory=run (a method without the setting keeps nothing: it runs as is): one that declares
    memory shares it with the requests beside it, and the same check fails the method with share_with forgotten;
    one that keeps nothing passes nothing between requests."""
    # (llama.cpp's ngram-mod by default hashes 24-grams and files generated ones 32 tokens at a time: the lesson
    # above is shorter than either)
    d, _ = drafter_for(f"{name}:run", extra=[f"rest_datastore={store}", *SHORT_TEXT.get(name, ())])
    if not d.capabilities.memory:
        check_isolated(d)
        return
    check_shared(d)
    with pytest.raises(AssertionError, match="does not see what the first filed"):
        check_shared(forgetful(type(d))(d.config))
    with pytest.raises(AssertionError):  # and what it shares shows: the isolation check is not vacuous either
        check_isolated(type(d)(d.config))


def test_the_check_catches_a_drafter_that_shares_only_part_of_its_memory(store):
    """GOOSE-suffix keeps two things under memory=run, the adjacency table and the library's suffix trees: sharing
    only the table (TreeDrafter's share_with, the library's forgotten) still drafts the lesson's next token from the
    table, and is caught because the drafts differ from one drafter's that decoded both requests."""
    from goose.drafting.tree import TreeDrafter

    d, _ = drafter("goose-suffix:run", store)
    half = type("TableOnlyGooseSuffix", (type(d),), {"share_with": TreeDrafter.share_with})
    check_shared(d)
    with pytest.raises(AssertionError, match="does not see all that the first filed"):
        check_shared(half(d.config))


@pytest.mark.parametrize("name", unit_keeps(method_names(), {"goose"}))
def test_spawned_drafters_share_nothing_learned_under_memory_prompt(name, store):
    d, _ = drafter(f"{name}:prompt", store)
    assert not d.capabilities.memory
    check_isolated(d)
