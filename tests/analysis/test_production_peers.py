"""The production peers' artifact (goose.analysis.production_peers) on hand-made rows: GOOSE's gain over each
drafter a serving engine ships, per reading (whole answer, loop-free window), over the prompts both ran."""

import pytest

from goose.analysis.load import load_rows
from goose.analysis.production_peers import WHOLE, WINDOW, production_peers
from goose.storage.result_files import OutputsFile, ResultsFile


def _run(root, method, budget, forwards, prompts, tokens=40):
    """`prompts` answers of `tokens` distinct tokens, each in `forwards` forwards (the last token of each a bonus)."""
    config = f"{method}-{budget}"
    folder = root / "m" / "humaneval" / method / config
    per = tokens // forwards
    origins = (["drafted"] * (per - 1) + ["bonus"]) * forwards
    for i in range(prompts):
        answer = list(range(100 + i, 100 + i + tokens))
        OutputsFile(folder / "outputs.jsonl").append(str(i), config, "p", answer, [str(t) for t in answer], origins)
        ResultsFile(folder / "results.csv").append({
            "model": "m", "benchmark": "humaneval", "method": method, "budget": budget, "prompt_id": str(i),
            "new_tokens": tokens, "steps": forwards, "tau": tokens / forwards, "wall_s": forwards * 0.1,
            "tokens_per_s": 1.0, "lossless": True, "equality": "exact", "config_hash": config,
            "speedup_source": "interleaved", "ar_wall_s": tokens * 0.1, "speedup": tokens / forwards,
            "timed_at": "2026-12-06T10:00:00+0000", "device_name": "cpu", "threads": 1, "dtype": "float32",
            "model_fingerprint": "abcdef0123", "prompts_fingerprint": "p", "max_new_tokens": 512,
            "benchmark.paper_max_new_tokens": 512})


def test_goose_against_each_production_drafter_on_the_prompts_both_ran(tmp_path, capsys):
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 4)  # tau 4
    _run(root, "vllm-ngram", "fixed", 20, 4)  # tau 2
    _run(root, "llamacpp-ngram-mod", "fixed", 8, 3)  # tau 5, on 3 of GOOSE's 4 prompts
    t = production_peers(load_rows(root)).set_index(["reading", "peer"])
    for reading in (WHOLE, WINDOW):
        vllm, mod = t.loc[(reading, "vllm-ngram")], t.loc[(reading, "llamacpp-ngram-mod")]
        assert (vllm.n, vllm["goose tau"], vllm["peer tau"]) == (4, 4.0, 2.0)
        assert vllm["goose vs peer [95% CI]"] == "+100.0% [+100.0, +100.0]"
        assert (mod.n, mod["peer tau"]) == (3, 5.0) and mod["goose vs peer [95% CI]"].startswith("-20.0%")
    whole, window = t.loc[(WHOLE, "vllm-ngram")], t.loc[(WINDOW, "vllm-ngram")]
    assert whole["goose speedup"] == pytest.approx(4.0) and whole["peer speedup"] == pytest.approx(2.0)
    assert window[["goose speedup", "peer speedup"]].isna().all()  # a window has no clock
    assert "sglang-ngram" not in set(t.index.get_level_values("peer"))  # not run: no row, no made-up one
    assert "no rows of sglang-ngram, llamacpp-ngram-simple, pld, goose-suffix: not compared" in capsys.readouterr().out


def test_rows_without_a_production_drafter_are_refused_in_one_line(tmp_path):
    _run(tmp_path / "r", "goose", "60", 10, 4)
    with pytest.raises(SystemExit, match=r"these rows have no production drafter \(sglang-ngram.*make reproduce-prod"):
        production_peers(load_rows(tmp_path / "r"))
    _run(tmp_path / "s", "vllm-ngram", "fixed", 20, 4)
    with pytest.raises(SystemExit, match="these rows have no GOOSE"):
        production_peers(load_rows(tmp_path / "s"))
