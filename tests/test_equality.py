"""The equality report: two run folders compared question by question (analysis/equality.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.integration
def test_equality_report_compares_every_question_and_shows_the_divergence(tiny_folder, prompt_file, tmp_path,
                                                                          run_goose):
    """Two runs of the tiny model (AR, GOOSE) are equal question by question; an edited copy is not: a
    missing question, a changed token and an output cut short are each reported, never hidden."""
    import json
    import shutil

    common = ["model=hf", f"model.path={tiny_folder}", "benchmark=jsonl", f"benchmark.path={prompt_file}",
              "n_prompts=3", "max_new_tokens=16", f"results_dir={tmp_path / 'res'}", "speedup_reference=none"]
    a = Path(run_goose("method=ar", *common)[0]["run_dir"])
    b = Path(run_goose("method=goose", "budget=16", *common)[0]["run_dir"])
    cmd = [sys.executable, str(ROOT / "analysis" / "reproduce.py"), "equality"]
    r = subprocess.run([*cmd, "--a", str(a), "--b", str(b)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "compared 3 question(s) present in both: 3 identical, 0 differ" in r.stdout and "EQUAL" in r.stdout
    # each run as its rows record it: AR takes no budget (B=fixed, never the config's default 60)
    assert "(ar, B=fixed, memory=none, jsonl, concurrency 1, float32)" in r.stdout
    assert "(goose, B=16, memory=prompt, jsonl, concurrency 1, float32)" in r.stdout
    edited = tmp_path / "edited"
    shutil.copytree(b, edited)
    lines = [json.loads(x) for x in (edited / "outputs.jsonl").read_text().splitlines()]
    lines[0]["tokens"][5] += 1  # p0 differs at token 5
    lines[1]["tokens"] = lines[1]["tokens"][:9]  # p1 stops early: A goes on
    lines[1]["pieces"] = lines[1]["pieces"][:9]
    from goose.fingerprints import digest

    for x in lines:  # as another run would have written them
        x["check"] = digest({k: v for k, v in x.items() if k != "check"}, 12)
    (edited / "outputs.jsonl").write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n")  # p2 missing
    r = subprocess.run([*cmd, "--a", str(a), "--b", str(edited)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    out = r.stdout
    assert "compared 2 question(s) present in both: 0 identical, 2 differ" in out
    assert "in A only (1): p2" in out and "in B only (0): -" in out
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.splitlines() if line.startswith("| p")}
    assert rows["p0"][1:4] == ["16", "16", "5"]
    assert rows["p1"][1:4] == ["16", "9", "9"] and rows["p1"][9].startswith("(ends here)")
    assert rows["p0"][4] == rows["p1"][4] == "diverged"  # an edited token is no near-tie swapped
    assert "NOT EQUAL" in out
