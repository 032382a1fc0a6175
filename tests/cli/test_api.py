"""The Python API (goose.load, goose.generate), the demo's output and run.py --help, on the tiny model."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import hf_greedy

import goose
from goose.errors import GooseError
from goose.methods.goose import GooseDrafter

ROOT = Path(__file__).resolve().parents[2]
TEXT = "abcabcabd abcabcabd abcabcab"


@pytest.fixture(scope="module")
def model(tiny_folder):
    return goose.load(str(tiny_folder), quiet=True)


@pytest.mark.integration
def test_load_says_what_it_loaded_and_refuses_what_it_cannot(tiny_folder, capsys):
    m = goose.load(str(tiny_folder))
    assert f"as local folder {tiny_folder}" in capsys.readouterr().err
    assert m.stop_ids == {257} and m.identity.kind == "hf"  # the tokenizer's EOS
    with pytest.raises(GooseError, match="not a model config .*not an existing file or folder"):
        goose.load("no-such-model")
    with pytest.raises(GooseError, match="pass its path"):
        goose.load("hf")


@pytest.mark.integration
def test_generate_any_prompt_form_equals_ar_and_hf(model):
    ids = model.tokenizer(TEXT).input_ids
    ref = hf_greedy(model.hf, ids, 40, eos=257)
    outs = [goose.generate(model, p, method="goose", budget=16, max_new_tokens=40)
            for p in (TEXT, ids, torch.tensor(ids), torch.tensor([ids]))]
    for out in outs:
        assert out.tokens == ref and out.method == "goose"
        assert out.text == model.tokenizer.decode(ref, skip_special_tokens=True) == "".join(out.pieces)
        assert len(out.origins) == len(out.tokens) and sum(out.from_source.values()) == len(out.tokens)
        assert set(out.origins) <= {"bonus", "spine", "branch"}
        # one bonus per forward, but the last one's may fall past max_new_tokens
        assert out.steps - 1 <= out.from_source["bonus"] <= out.steps
        assert out.steps < len(out.tokens) == 40  # drafts landed: fewer forwards than tokens
    ar = goose.generate(model, ids, method="ar", max_new_tokens=40)
    assert ar.tokens == ref and ar.steps == 40 and ar.tau == 1.0 and set(ar.origins) == {"bonus"}
    assert len(outs[0].origins) - outs[0].from_source["bonus"] > 0, "the repetitive prompt should land drafts"
    import numpy as np

    assert goose.generate(model, np.array(ids), method="goose", budget=16, max_new_tokens=40).tokens == ref
    for bad, msg in (([[1, 2]], "list of token ids"), (torch.zeros(2, 3, dtype=torch.long), "1-D"),
                     (torch.zeros(3), "must be integers"), ([1, 99999], "outside this model's vocabulary"),
                     (3.5, "got 3.5, a float")):
        with pytest.raises(GooseError, match=msg):
            goose.generate(model, bad, max_new_tokens=4)
    for kwargs, msg in ((dict(method="goose@30"), "budget=..."), (dict(memory="run"), "same instance"),
                        (dict(budget="lots"), "budget"), (dict(budget=2000), "budget=2000 is too large"),
                        (dict(max_new_tokens=True), "max_new_tokens")):
        with pytest.raises(GooseError, match=msg):
            goose.generate(model, ids, **{"max_new_tokens": 4, **kwargs})


def test_eos_stops_by_default_and_a_drafter_instance_works(model):
    ids = model.tokenizer(TEXT).input_ids
    free = goose.generate(model, ids, method="ar", max_new_tokens=30, stop_at_eos=False)
    stop = free.tokens[6]
    first = free.tokens.index(stop)
    saved = model.stop_ids
    model.stop_ids = frozenset({stop})  # as if the model emitted EOS there
    try:
        for method in ("ar", "goose", GooseDrafter(budget=8)):
            out = goose.generate(model, ids, method=method, max_new_tokens=30)
            assert out.tokens == free.tokens[: first + 1]
        assert goose.generate(model, ids, method="goose", max_new_tokens=30, stop_at_eos=False).tokens == free.tokens
    finally:
        model.stop_ids = saved
    auto = GooseDrafter()
    assert goose.generate(model, ids, method=auto, budget="auto", max_new_tokens=30,
                          stop_at_eos=False).tokens == free.tokens
    assert auto.auto is not None  # budget="auto" armed pruning on the instance


def test_stop_at_loop_through_the_api_ends_every_method_where_ar_ends(model):
    from goose.running.loop import loop_stop

    ids = model.tokenizer(TEXT).input_ids
    whole = goose.generate(model, ids, method="ar", max_new_tokens=300, stop_at_eos=False)
    kept = loop_stop(whole.tokens)
    assert kept < 300  # the tiny model loops
    for method in ("ar", "goose", "pld"):
        out = goose.generate(model, ids, method=method, max_new_tokens=300, stop_at_eos=False, stop_at_loop=True)
        assert out.tokens == whole.tokens[:kept], method
    with pytest.raises(GooseError, match="stop_at_loop"):
        goose.generate(model, ids, stop_at_loop="yes")


def test_sampling_through_the_api_matches_ar_sampling(model):
    ids = model.tokenizer(TEXT).input_ids
    ar = goose.generate(model, ids, method="ar", max_new_tokens=24, temperature=0.8, seed=3)
    greedy = goose.generate(model, ids, method="ar", max_new_tokens=24)
    assert ar.tokens != greedy.tokens
    for method in ("goose", "pld", "tr"):
        assert goose.generate(model, ids, method=method, max_new_tokens=24, temperature=0.8, seed=3).tokens == ar.tokens


def test_marked_text_shows_each_run_of_drafted_tokens_by_source():
    pieces = list("abcdefg")
    origins = ["bonus", "spine", "spine", "branch", "bonus", "ngram", "bonus"]
    assert goose.marked(pieces, origins, colour=False) == "a⟦bc⟧⟨d⟩e⟪f⟫g"
    coloured = goose.marked(pieces, origins, colour=True)
    assert "\033[32mbc\033[0m" in coloured and "\033[33md\033[0m" in coloured


def test_a_character_split_over_tokens_belongs_to_the_token_that_completes_it(model):
    """Byte-level tokens: the two bytes of "é" are two tokens; the pieces still join to the text and
    the marks never cut the character in half."""
    from goose.storage.result_files import token_pieces

    ids = model.tokenizer("café ok").input_ids
    assert len(ids) == 8  # c a f, two bytes of é, space o k
    pieces = token_pieces(model.tokenizer, ids)
    assert "".join(pieces) == "café ok" and pieces[3:5] == ["", "é"]
    for at in (3, 4):
        origins = ["bonus"] * 8
        origins[at] = "spine"
        assert goose.marked(pieces, origins, colour=False) == ("café ok" if at == 3 else "caf⟦é⟧ ok")


@pytest.mark.integration
def test_demo_prints_the_comparison_from_the_rows_and_a_marked_answer(tiny_folder, prompt_file, tmp_path, capsys):
    from goose.demo import main

    main(["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}", "n_prompts=2",
          "max_new_tokens=24", f"results_dir={tmp_path}", "warmup=0"])
    out = capsys.readouterr().out
    assert "GOOSE (budget=auto) vs AR: jsonl" in out
    table = out[out.index("prompt            AR tok/s"):]
    assert [line.split()[0] for line in table.splitlines()[2:4]] == ["p0", "p1"]
    pooled = next(line for line in table.splitlines() if line.startswith("pooled")).split()
    assert pooled[-1] == "2/2" and pooled[-2].endswith("x")  # lossless, speedup measured in this sweep
    assert not list(tmp_path.glob("*/jsonl/ar/*/results.csv"))  # AR is timed inside GOOSE's run, per prompt
    assert len(list(tmp_path.glob("*/jsonl/goose/Bauto-*/results.csv"))) == 1
    assert "GOOSE's answer to p" in out and "unmarked: the target's own token (bonus)" in out
    # the AR column is the AR timing each GOOSE row's speedup divides by
    import csv

    rows = list(csv.DictReader(open(next(tmp_path.glob("*/jsonl/goose/Bauto-*/results.csv")))))
    for r, line in zip(rows, table.splitlines()[2:4]):
        assert line.split()[1] == f"{float(r['ar_tokens_per_s']):.1f}"
        assert r["speedup_source"] == "interleaved"  # AR and GOOSE back to back on this prompt, never cached
    with pytest.raises(GooseError, match="the demo compares GOOSE"):
        main(["method=pld"])


@pytest.mark.integration
def test_help_explains_every_setting_and_group():
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "--help"], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "budget (null)" in out and "B: draft nodes per verification, root included" in out
    assert "null = each method's default: auto where it can prune its" in out
    assert "engine.backend (auto)" in out and "prepacked (CPU fp32" in out
    assert "spine-only" in out and "Single source at equal budget" in out
    assert "smollm2-135m" in out and "HumanEval: 164 Python function signatures" in out
    assert out.count("python run.py ") >= 3 and "no arguments: GOOSE vs AR" in out
