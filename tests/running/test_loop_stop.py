"""stop_at_loop (goose.running.loop.LoopWatch): an answer ends once its last 32 tokens repeat an earlier run of it.
Every lossless method then stops at AR's token, alone, in a batch and when sampling; the stopped answer is the full
answer's prefix, so its loop-free window (where the loop starts, and the forwards that produced the tokens before
it) is the full run's; the setting off changes no hash, key or folder; a run with it on is another configuration
whose rows say why each answer ended."""

import pytest
import torch
from conftest import drafter_for, spec_of

from goose.analysis.loops import window_forwards
from goose.engine.batched import BatchEngine
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import CAPPED, LOOPED, STOPPED, LoopWatch, commit, generate, loop_start, loop_stop

METHODS = ["ar", "pld", "goose", "tr", "lookahead", "iso3", "spine-only", "goose-no-bypass"]


@pytest.mark.parametrize("tokens, span, start, kept", [
    (list(range(10)), 3, 10, 10),  # nothing repeats: the whole answer, and it never stops
    ([1, 2, 3, 4, 1, 2, 3, 5], 3, 4, 7),  # 1 2 3 again at 4: found, and stopped, at its third token (index 6)
    ([7, 7, 7, 7], 2, 1, 3),  # 7 7 at 1 overlaps its first occurrence: still a repeat
    ([5, 6, 5, 6, 5], 4, 5, 5),  # shorter than a repeat of 4 needs
])
def test_the_watch_finds_the_loop_at_the_token_that_completes_it(tokens, span, start, kept):
    assert loop_start(tokens, span) == start
    assert loop_stop(tokens, span) == kept
    watch = LoopWatch(span)
    fired = [watch.push(t) for t in tokens]
    assert fired.count(True) == (start < len(tokens)) and (not any(fired) or fired.index(True) == kept - 1)


def test_commit_keeps_the_token_that_ends_the_answer_and_says_why():
    watch = LoopWatch(2)
    assert commit([1, 2, 1], 10, frozenset(), watch, True) == ([1, 2, 1], "")
    assert commit([2, 9], 10, frozenset(), watch, True) == ([2], LOOPED)  # 1 2 repeated
    assert commit([1, 2, 1, 2], 10, frozenset(), LoopWatch(2), False) == ([1, 2, 1, 2], "")  # off: only watched
    watch = LoopWatch(2)
    assert commit([4, 257, 5], 10, frozenset({257}), watch, True) == ([4, 257], STOPPED)
    assert watch.loop_free == 2  # the stop token counts, as the window reading of its record counts it
    assert commit([4, 5, 6], 2, frozenset(), LoopWatch(2), True) == ([4, 5], CAPPED)


def _prompts():
    g = torch.Generator().manual_seed(5)
    base = torch.randint(0, 250, (10,), generator=g).tolist()
    return [base * 3, torch.randint(0, 250, (17,), generator=g).tolist(), (base[:6] + [3, 3]) * 3]


@pytest.mark.parametrize("name", METHODS)
def test_every_method_stops_at_ars_token_and_keeps_the_full_runs_window(name, tiny):
    """The tiny model loops within 300 tokens on each prompt. Stopped: AR's prefix up to the loop's completing token,
    ended `loop`; the window (loop start, forwards that produced it) equals the full run's, which ran to the cap."""
    for p in _prompts():
        full = generate(Engine(tiny), p, drafter_for(name)[0], 300)
        stopped = generate(Engine(tiny), p, drafter_for(name)[0], 300, stop_at_loop=True)
        ar = generate(Engine(tiny), p, drafter_for("ar")[0], 300, stop_at_loop=True)
        kept = loop_stop(full.tokens)
        assert kept < 300 and full.ended == CAPPED and stopped.ended == LOOPED, name
        assert stopped.tokens == ar.tokens == full.tokens[:kept], name
        assert stopped.loop_free == full.loop_free == loop_start(full.tokens) < kept, name
        window = full.loop_free
        assert window_forwards(stopped.origins, window) == window_forwards(full.origins, window), name
        assert stopped.steps <= full.steps


@pytest.mark.parametrize("name", ["ar", "pld", "goose", "tr"])
def test_in_a_batch_and_when_sampling_the_stop_is_the_single_loops(name, tiny):
    """Four requests in one forward stop where each stops alone; sampled answers stop where AR sampling's does."""
    prompts = _prompts() + [_prompts()[0][3:]]
    alone = [generate(Engine(tiny), p, drafter_for(name)[0], 300, stop_at_loop=True) for p in prompts]
    template, _ = drafter_for(name)
    batched, _ = decode_batch(BatchEngine(tiny, rows=4), [Request(p, template.spawn(), 300) for p in prompts],
                              stop_at_loop=True)
    for a, b in zip(alone, batched):
        assert (b.tokens, b.ended, b.loop_free) == (a.tokens, a.ended, a.loop_free), name
    sampling = Sampling(0.7, 0, 1.0, 3)
    for p in prompts[:2]:
        ar = generate(Engine(tiny), p, drafter_for("ar")[0], 300, sampling=sampling, stop_at_loop=True)
        mine = generate(Engine(tiny), p, drafter_for(name)[0], 300, sampling=sampling, stop_at_loop=True)
        assert mine.tokens == ar.tokens and mine.ended == ar.ended, name


def test_off_it_changes_no_hash_key_or_folder_and_on_it_splits_the_configuration():
    off, on = spec_of("method=goose", "budget=60"), spec_of("method=goose", "budget=60", "stop_at_loop=true")
    for role in ("hashed", "reference"):
        assert "stop_at_loop" not in off.settings(role) and on.settings(role)["stop_at_loop"] is True
    assert "loopstop" not in off.folder_name("h") and on.folder_name("h").endswith("-loopstop-h")
    assert off.settings("row")["stop_at_loop"] is False


def test_a_value_that_is_not_a_flag_is_refused_in_one_line():
    from goose.errors import GooseError

    with pytest.raises(GooseError, match="stop_at_loop must be true or false"):
        spec_of("stop_at_loop=3")


@pytest.mark.integration
def test_a_stopped_run_writes_why_each_answer_ended_and_ar_agrees_with_hugging_face(tiny_folder, prompt_file, tmp_path,
                                                                                     run_goose):
    """run.py with stop_at_loop=true: another folder (`loopstop`), rows ended at `loop`, every method's and AR's
    tokens equal; AR's row is held to Hugging Face's generate cut where the loop completes."""
    from goose.storage.result_files import ResultsFile

    base = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
            "n_prompts=null", "max_new_tokens=300", "speedup_reference=none", "budget=60", f"results_dir={tmp_path}"]
    rows = {}
    for method in ("ar", "goose"):
        summary, _ = run_goose(*base, f"method={method}", "stop_at_loop=true")
        assert "-loopstop-" in summary["run_dir"]
        rows[method] = ResultsFile(f"{summary['run_dir']}/results.csv").rows()
    for ar, goose in zip(rows["ar"], rows["goose"]):
        assert ar["lossless"] == goose["lossless"] == "True" and ar["equality"] == "exact"
        assert ar["ended"] == goose["ended"] == "loop" and ar["new_tokens"] == goose["new_tokens"]
        assert int(ar["loop_free_tokens"]) == int(goose["loop_free_tokens"]) < int(ar["new_tokens"]) < 300
