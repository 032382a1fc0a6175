"""SuffixDecoding through arctic-inference, GOOSE with a suffix-tree spine, and cross-prompt memory
(memory=prompt|run) for every method that keeps state."""

import csv
import sys
from pathlib import Path

import pytest
from conftest import drafter_for, hf_greedy, spec_of

from goose.baselines.suffix_decoding import SuffixDrafter
from goose.drafting.suffix_cache import library
from goose.engine.draft import Draft, Verification
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.methods.goose_suffix import GooseSuffixDrafter
from goose.running.loop import generate
from goose.running.registry import build_drafters, load_method
from goose.running.timing import Timer
from goose.storage.result_files import ReferenceStore, TimingStore

# "10 11 12" is followed by 20 twice and 21 once; "10 11 12 20" by 30 once and 31 once.
HAND_MADE = [10, 11, 12, 20, 30, 10, 11, 12, 20, 31, 10, 11, 12, 21, 32, 10, 11, 12]


def started(drafter, context):
    drafter.start(context, Verification(path=[0], bonus=context[-1]))
    return drafter


def test_the_library_draft_hangs_under_our_root():
    """The library leaves the root out and marks its children with parent -1; node 0 is our root,
    and -1 on any other node would mean "visible, never walked" (a silent tau of 1)."""
    d = started(SuffixDrafter(), HAND_MADE).propose(HAND_MADE)
    assert d.tokens == [12, 20, 21, 30]  # root, its two seen successors, then 30 after 20
    assert d.parents == [-1, 0, 0, 1]
    chain = started(SuffixDrafter(tree=False), HAND_MADE).propose(HAND_MADE)
    assert chain.tokens == [12, 20, 30, 10] and chain.parents == [-1, 0, 1, 2]
    # ... and it is exactly what the library proposes for the same request.
    cache = library().SuffixDecodingCache(max_tree_depth=24, max_cached_requests=10000)
    cache.start_request("r", HAND_MADE[:-1])
    cache.add_active_response("r", HAND_MADE[-1:])
    raw = cache.speculate("r", HAND_MADE, max_spec_tokens=59, max_spec_factor=1.0, min_token_prob=0.1,
                          use_tree_spec=True)
    assert d.tokens[1:] == list(raw.token_ids) and [p - 1 for p in d.parents[1:]] == list(raw.parents)


@pytest.mark.integration
@pytest.mark.parametrize("memory", ["prompt", "run"])
@pytest.mark.parametrize("method", ["suffix", "suffix-chain", "goose-suffix"])
def test_lossless_and_drafts_are_walked(method, memory, tiny, prompts):
    d = drafter_for(f"{method}:{memory}")[0]
    assert d.config.memory == memory and d.capabilities.memory == (memory == "run")
    engine = Engine(tiny)
    walked = 0
    for p in prompts:
        g = generate(engine, p, d, 40)
        assert g.tokens == hf_greedy(tiny, p, 40)
        walked += g.stats["suffix_accepted" if method.startswith("suffix") else "spine_accepted"]
    # A mis-mapped draft is lossless too, but nothing below the root is ever accepted.
    assert walked >= 10


def test_a_draft_not_shifted_under_the_root_is_lossless_and_useless(tiny, prompts):
    """Why the test above counts accepted tokens: the wrong encoding passes every lossless check."""

    class Unshifted(SuffixDrafter):
        def propose(self, context):
            right = super().propose(context)
            return Draft(right.tokens, [-1] + [p - 1 for p in right.parents[1:]])

    g = generate(Engine(tiny), prompts[1], Unshifted(), 40)
    assert g.tokens == hf_greedy(tiny, prompts[1], 40) and g.tau == pytest.approx(1.0, abs=0.05)


def drafts_of(drafter, engine, prompt):
    seen = []
    propose = drafter.propose

    def spy(context):
        d = propose(context)
        seen.append((tuple(d.tokens), tuple(d.parents)))
        return d

    drafter.propose = spy
    generate(engine, prompt, drafter, 40)
    drafter.propose = propose
    return seen


@pytest.mark.integration
@pytest.mark.parametrize("method", ["suffix", "goose-suffix", "tr", "goose"])
def test_memory_prompt_clears_and_memory_run_remembers(method, tiny, prompts):
    engine = Engine(tiny)

    def after(memory, earlier):
        d = drafter_for(f"{method}:{memory}")[0]
        for p in earlier:
            generate(engine, p, d, 40)
        return drafts_of(d, engine, prompts[1])

    assert after("prompt", [prompts[0]]) == after("prompt", [prompts[2], prompts[1]]) == after("prompt", [])
    # Under run the same prompt, decoded after its own answer, is drafted differently.
    assert after("run", [prompts[1]]) != after("run", [])


@pytest.mark.integration
@pytest.mark.parametrize("spec", ["suffix", "goose-suffix:run", "tr", "goose:run", "iso3:run"])
def test_timed_repeats_start_from_the_state_the_prompt_found(spec, tiny, prompts, tmp_path):
    """Repeats (and the AR runs between them) measure the same work as a single run, and leave the
    state a single run leaves."""
    engine = Engine(tiny)

    def measured(repeats):
        d = drafter_for(spec)[0]
        assert d.capabilities.memory
        timer = Timer(engine, spec_of(f"repeats={repeats}"), frozenset(), {}, ReferenceStore(tmp_path / "r"),
                      TimingStore(tmp_path / "t"))
        out = []
        for i, p in enumerate(prompts + prompts[:1]):
            g = timer.measure(p, d, f"k{i}-{repeats}", i, 40).gen
            out.append((g.tokens, g.steps, g.widths, g.stats))
        return out

    once = measured(1)
    assert measured(3) == once
    # The last prompt repeats the first: its own earlier answer is in memory, so it differs from the
    # first decode (the restore above is what keeps the three repeats alike).
    assert once[-1][1:] != once[0][1:]


def test_the_library_missing_is_a_clear_error_and_other_methods_run(monkeypatch, tiny, prompts):
    monkeypatch.setitem(sys.modules, "arctic_inference", None)
    for spec in ("suffix", "goose-suffix"):
        with pytest.raises(GooseError, match="arctic-inference"):
            drafter_for(spec)
    g = generate(Engine(tiny), prompts[0], drafter_for("goose")[0], 16)
    assert g.tokens == hf_greedy(tiny, prompts[0], 16)
    # A default list (bench, gpu-check) leaves them out with a notice; a named one stops.
    assert list(build_drafters(["goose@60", "suffix", "tr@60:prompt"], skip_missing=True)) == ["goose@60:prompt",
                                                                                                "tr:prompt"]
    with pytest.raises(GooseError, match="arctic-inference"):
        build_drafters(["goose", "suffix"])


def test_bad_memory_values_are_clear_errors(run_goose, tmp_path):
    with pytest.raises(GooseError, match="memory must be prompt"):
        run_goose("method=tr", "memory=forever", f"results_dir={tmp_path}")
    with pytest.raises(GooseError, match="contradicts"):
        run_goose("method=suffix", "memory=run", "+method.drafter.memory=prompt", f"results_dir={tmp_path}")
    with pytest.raises(GooseError, match="goose-suffix: min_token_prob must lie in .0, 1. .got 2"):
        run_goose("method=goose-suffix", "+method.drafter.min_token_prob=2", f"results_dir={tmp_path}")
    for spec, message in (("suffix:always", "memory must be prompt"), ("suffix@:run", "NAME@BUDGET:MEMORY"),
                          ("suffix:", "NAME@BUDGET:MEMORY")):
        with pytest.raises(GooseError, match=message):
            load_method(spec)
    assert not any(tmp_path.iterdir())


def test_bench_labels_say_what_runs_and_run_a_configuration_once():
    built = build_drafters(["suffix", "suffix:run", "suffix@auto:prompt", "pld:run", "pld", "pld@60", "goose@16"])
    # no budget given: the method's default, auto where it prunes (so "suffix" is "suffix@auto:run")
    assert list(built) == ["suffix@auto:run", "suffix@auto:prompt", "pld@auto", "pld", "goose@16:prompt"]


def rows_of(root):
    (path,) = Path(root).rglob("results.csv")
    with open(path, newline="") as f:
        return path.parent, list(csv.DictReader(f))


@pytest.mark.integration
def test_memory_is_recorded_and_a_resumed_run_rebuilds_it(tiny_folder, prompt_file, tmp_path, run_goose):
    base = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
            "max_new_tokens=24", "speedup_reference=none", "budget=60", "method=suffix"]
    run_goose(*base, "n_prompts=4", f"results_dir={tmp_path / 'whole'}")
    run_goose(*base, "n_prompts=2", f"results_dir={tmp_path / 'resumed'}")
    _, out = run_goose(*base, "n_prompts=4", f"results_dir={tmp_path / 'resumed'}")
    assert "decoding the 2 finished prompt(s) again" in out
    folder, whole = rows_of(tmp_path / "whole")
    _, resumed = rows_of(tmp_path / "resumed")
    assert folder.name.startswith("B60-Mrun-N24-")
    keys = ("prompt_id", "memory", "steps", "tau", "suffix_drafted", "suffix_accepted", "lossless")
    assert [[r[k] for k in keys] for r in resumed] == [[r[k] for k in keys] for r in whole]
    assert {r["memory"] for r in whole} == {"run"} and {r["lossless"] for r in whole} == {"True"}
    # memory=prompt is another configuration, in another folder; a method without state records none.
    run_goose(*base, "n_prompts=1", "memory=prompt", f"results_dir={tmp_path / 'whole'}")
    assert len(list((tmp_path / "whole").rglob("results.csv"))) == 2
    for memory in ("prompt", "run"):
        run_goose(*base[:-1], "method=pld", "n_prompts=1", f"memory={memory}", f"results_dir={tmp_path / 'pld'}")
    folder, pld = rows_of(tmp_path / "pld")
    assert folder.name.startswith("Bfixed-Mnone-") and [r["memory"] for r in pld] == ["none"]


def test_goose_suffix_spine_comes_from_the_library():
    """Its spine is the library's best path, with a confidence below GOOSE's bypass."""
    d = started(GooseSuffixDrafter(), HAND_MADE)
    chain, c = d.spine(HAND_MADE)
    assert chain == [20, 30, 10] and 0 < c < 1
    assert started(GooseSuffixDrafter(context_spine=False), HAND_MADE).spine(HAND_MADE) == ([], 0.0)
