"""The loop-free window (goose.analysis.loops) on hand-computed answers, and the claims read on it: where an answer
starts repeating itself, how many forwards produced the tokens before that, and a claim whose lead comes from a
loop that the window reading does not grant."""

import pytest

from goose.analysis.claims.card import LOOP_FREE, PROTOCOL, scorecard
from goose.analysis.load import load_rows
from goose.analysis.loops import loop_start, window_forwards, windows
from goose.storage.result_files import OutputsFile, ResultsFile


@pytest.mark.parametrize("tokens, span, start", [
    (list(range(10)), 3, 10),  # nothing repeats: the whole answer
    ([1, 2, 3, 4, 1, 2, 3, 5], 3, 4),  # 1 2 3 again at 4
    ([1, 2, 3, 4, 1, 2, 5, 6], 3, 8),  # only 2 tokens repeat: a phrase, not a loop
    ([7, 7, 7, 7], 2, 1),  # 7 7 at 1 overlaps its first occurrence at 0: still a repeat
    ([], 32, 0),
])
def test_the_loop_starts_at_the_first_span_that_occurred_before(tokens, span, start):
    assert loop_start(tokens, span) == start


@pytest.mark.parametrize("origins, length, forwards", [
    (["bonus", "spine", "spine", "bonus", "branch", "bonus"], 6, 3),  # prefill, then two forwards
    (["bonus", "spine", "spine", "bonus", "branch", "bonus"], 4, 2),  # ends on a forward's bonus
    (["bonus", "spine", "spine", "bonus", "branch", "bonus"], 2, 2),  # ends inside the second forward's drafts
    (["bonus"], 0, 0),
])
def test_the_window_counts_the_forwards_that_produced_it(origins, length, forwards):
    assert window_forwards(origins, length) == forwards


def _run(root, method, answers, config, first=0, **extra):
    """One configuration's rows and outputs records: answers[i] = (tokens, origins) of prompt first + i."""
    folder = root / "m" / "humaneval" / method / config
    rows, outputs = ResultsFile(folder / "results.csv"), OutputsFile(folder / "outputs.jsonl")
    for i, (tokens, origins) in enumerate(answers, first):
        outputs.append(str(i), config, "p", tokens, [str(t) for t in tokens], origins)
        rows.append({**extra, "model": "m", "benchmark": "humaneval", "method": method, "budget": "60",
                     "prompt_id": str(i),
                     "new_tokens": len(tokens), "steps": origins.count("bonus") + (origins[-1] != "bonus"),
                     "tau": 1.0, "wall_s": 1.0, "tokens_per_s": 1.0, "lossless": True, "equality": "exact",
                     "config_hash": config, "speedup_source": "none", "timed_at": "2026-12-03T10:00:00+0000",
                     "device_name": "cpu", "threads": 1, "dtype": "float32", "model_fingerprint": "abcdef0123",
                     "prompts_fingerprint": "p", "max_new_tokens": 512, "benchmark.paper_max_new_tokens": 512})


def test_a_lead_made_in_the_loop_is_not_granted_by_the_window(tmp_path):
    """GOOSE and Iso(3) give the same 100-token answer: 40 fresh tokens, then a loop. Both take 20 forwards over the
    fresh part; in the loop GOOSE copies 10 tokens a forward, Iso(3) 2. On the whole answer GOOSE is far ahead; on
    the loop-free window the two are equal."""
    fresh = list(range(100, 140))
    tokens = fresh + fresh[:40] + fresh[:20]  # the loop starts at 40
    head = ["bonus", "branch"] * 20  # 20 forwards, 2 tokens each
    goose = head + (["spine"] * 9 + ["bonus"]) * 6  # 6 forwards over the 60 looped tokens
    iso = head + ["branch", "bonus"] * 30  # 30 forwards over them
    root = tmp_path / "r"
    _run(root, "goose", [(tokens, goose)] * 4, "goose-60")
    _run(root, "iso3", [(tokens, iso)] * 4, "iso3-60")
    card = scorecard(load_rows(root)).set_index(["reading", "claim", "comparison"])
    whole = card.loc[(PROTOCOL, 3, "goose vs iso3")]
    assert whole.effect == pytest.approx((50 / 26 - 1) * 100)  # 100 tokens / 26 forwards against / 50
    window = card.loc[(LOOP_FREE, 3, "goose vs iso3")]
    assert window.effect == pytest.approx(0.0) and window.verdict != "holds"


def test_runs_stopped_at_their_loop_add_prompts_to_the_window_and_none_to_the_protocol(tmp_path):
    """GOOSE and Iso(3) ran whole on prompts 0-3 and stopped at the loop (stop_at_loop) on 2-7: the window reading
    has 8 prompts of each, a stopped run read as its whole twin (prompts 2 and 3 both ways: equal windows, counted
    once); the protocol reading keeps the 4 whole ones."""
    fresh = list(range(100, 140))
    whole = fresh + fresh[:40] + fresh[:20]
    stopped = whole[:40 + 32]  # ends at the token that completes the loop's first 32-token repeat
    head = ["bonus", "branch"] * 20
    goose, iso = head + (["spine"] * 9 + ["bonus"]) * 6, head + ["branch", "bonus"] * 30
    root = tmp_path / "r"
    _run(root, "goose", [(whole, goose)] * 4, "goose-60")
    _run(root, "iso3", [(whole, iso)] * 4, "iso3-60")
    _run(root, "goose", [(stopped, goose[:72])] * 6, "goose-60-stop", first=2, stop_at_loop=True)
    _run(root, "iso3", [(stopped, iso[:72])] * 6, "iso3-60-stop", first=2, stop_at_loop=True)
    rows = load_rows(root)
    w = windows(rows[rows.method == "goose"])
    assert w.attrs["twins"] == (2, 2) and sorted(w.prompt_id) == [str(i) for i in range(8)]
    assert set(w.config_hash) == {"goose-60"} and set(w.new_tokens) == {40} and set(w.steps) == {21}
    card = scorecard(rows).set_index(["reading", "claim", "comparison"])
    assert card.loc[(LOOP_FREE, 3, "goose vs iso3")].n == 8 and card.loc[(PROTOCOL, 3, "goose vs iso3")].n == 4
    assert card.attrs["twins"] == (4, 4)  # GOOSE's 2 and Iso(3)'s 2
    assert sorted(zip(card.attrs["stopped"]["stopped run"], card.attrs["stopped"]["read as"])) == [
        ("goose-60-stop", "goose-60"), ("iso3-60-stop", "iso3-60")]


def test_a_method_that_carries_state_across_prompts_is_not_read_as_its_whole_twin(tmp_path):
    """Token Recycling keeps its matrix across a run's prompts (memory=run): stopped, the earlier prompts leave it
    other state, so its window may differ from the whole run's. Its stopped runs stay a configuration of their own."""
    fresh = list(range(100, 140))
    whole = fresh + fresh[:40] + fresh[:20]
    head = ["bonus", "branch"] * 20
    root = tmp_path / "r"
    _run(root, "tr", [(whole, head + ["branch", "bonus"] * 30)] * 4, "tr-run", memory="run")
    _run(root, "tr", [(whole[:72], head + ["bonus"] * 32)] * 6, "tr-run-stop", first=2, stop_at_loop=True,
         memory="run")
    w = windows(load_rows(root))
    assert w.attrs["twins"] == (0, 0) and set(w.config_hash) == {"tr-run", "tr-run-stop"} and len(w) == 10
