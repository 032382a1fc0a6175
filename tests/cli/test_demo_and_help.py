"""The demo's output (`python run.py` without arguments) and run.py --help, on the tiny model."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from goose.errors import GooseError

ROOT = Path(__file__).resolve().parents[2]


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
