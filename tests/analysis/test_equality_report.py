"""The equality report: two run folders compared question by question (analysis/question_diff.py)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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
    cmd = [sys.executable, "-m", "goose.analysis.reproduce", "equality"]
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
    from goose.core.fingerprints import digest

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


# --- like with like (issue #46): run folders written by the tests, two near-tied answers -------------------
def answer(tokens, near=None):
    """An outputs record's fields: every token clear of a far runner-up (100 + it, 5 below), except `near` =
    (index, other token, gap): there the runner-up is that token, `gap` below."""
    ups, gaps = [[100 + t] for t in tokens], [[5.0] for _ in tokens]
    if near:
        i, other, gap = near
        ups[i], gaps[i] = [other], [gap]
    return {"tokens": tokens, "pieces": [f"t{t} " for t in tokens], "origins": ["bonus"] * len(tokens),
            "margins": [g[0] for g in gaps], "runners_up": ups, "gaps": gaps}


def answers(gap=0.0):
    """A's (AR's) answers and B's: p0 the same; p1 a near-tie read two ways at token 2 (A chose 5 over 6, B 6 over
    5, each `gap` below its own choice)."""
    a = {"p0": answer([1, 2, 3, 4]), "p1": answer([1, 2, 5, 7], (2, 6, gap))}
    b = {"p0": answer([1, 2, 3, 4]), "p1": answer([1, 2, 6, 8], (2, 5, gap))}
    return a, b


def run_folder(path, outputs, *, fingerprint="m0", temperature=0.0, top_k=0, top_p=1.0, seed=0, max_new_tokens=8,
               chat_template=False, dtype="float32", method="ar", concurrency=1, backend="eager", capped=None,
               config=True, rows=True):
    """A run folder as a run writes it: config.yaml (unless not `config`), outputs.jsonl and results.csv (unless
    not `rows`), recording these settings; `capped` = {question: its new-token limit where the context caps it}."""
    from omegaconf import OmegaConf

    from goose.storage.result_files import OutputsFile, ResultsFile

    path.mkdir(parents=True)
    chash = f"hash-{path.name}"  # each folder its own configuration
    sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    if config:
        OmegaConf.save(OmegaConf.create({
            "model": {"name": "tiny"}, "method": {"name": method}, "benchmark": {"name": "jsonl"},
            "max_new_tokens": max_new_tokens, **sampling, "concurrency": concurrency, "chat_template": chat_template,
            "identity": {"config_hash": chash, "model_fingerprint": fingerprint, "dtype": dtype, "backend": backend,
                         "device": "cpu"}}), path / "config.yaml")
    out, res = OutputsFile(path / "outputs.jsonl"), ResultsFile(path / "results.csv")
    for q, x in outputs.items():
        out.append(q, chash, f"fp-{q}", x["tokens"], x["pieces"], x["origins"], x["margins"], x["runners_up"],
                   x["gaps"])
        if rows:
            res.append({"model": "tiny", "benchmark": "jsonl", "method": method, "prompt_id": q, "prompt_fingerprint":
                        f"fp-{q}", "new_tokens": len(x["tokens"]), "capped_at": (capped or {}).get(q, ""),
                        "config_hash": chash, "model_fingerprint": fingerprint, "backend": backend,
                        "device": "cpu", "dtype": dtype, "budget": "fixed", "memory": "none",
                        "max_new_tokens": max_new_tokens, **sampling, "concurrency": concurrency,
                        "chat_template": chat_template, "row_schema": 4})
    return path


SAMPLED = {"temperature": 0.7}
ANOTHER = {  # what B changes (A: the defaults, bfloat16 both) -> what the error says, both values
    "model": ({}, {"fingerprint": "m1"}, "model fingerprint (A: m0, B: m1)"),
    "greedy vs sampled": ({}, SAMPLED, "sampling (A: greedy, B: temperature=0.7, top_k=0, top_p=1.0, seed=0)"),
    "temperature": (SAMPLED, {"temperature": 0.9}, "(A: temperature=0.7, top_k=0, top_p=1.0, seed=0, B: "
                    "temperature=0.9, top_k=0, top_p=1.0, seed=0)"),
    "top_k": (SAMPLED, {**SAMPLED, "top_k": 50}, "B: temperature=0.7, top_k=50, top_p=1.0, seed=0)"),
    "top_p": (SAMPLED, {**SAMPLED, "top_p": 0.9}, "B: temperature=0.7, top_k=0, top_p=0.9, seed=0)"),
    "seed": (SAMPLED, {**SAMPLED, "seed": 1}, "B: temperature=0.7, top_k=0, top_p=1.0, seed=1)"),
    "max_new_tokens": ({}, {"max_new_tokens": 16}, "max_new_tokens (A: 8, B: 16)"),
    "chat template": ({}, {"chat_template": True}, "chat template (A: false, B: true)"),
    "stop rule": ({}, {"capped": {"p1": 4}}, "stop rule (p1 stop at A: 8, B: 4 new tokens"),
}


@pytest.mark.parametrize("what,recorded", [(w, r) for w in ANOTHER for r in ("config.yaml and rows", "rows only",
                                                                              "config.yaml only")
                                           if (w, r) != ("stop rule", "config.yaml only")])  # capped_at: rows only
def test_runs_of_another_model_or_setting_are_never_classed(tmp_path, what, recorded):
    """bfloat16 greedy against bfloat16 temperature=0.7 was classed `numerics`, and so was a model against a
    perturbed copy (another fingerprint): another model, sampling, length, chat template or stop rule is refused
    with both values, wherever the run records it (its config.yaml, its rows)."""
    from goose.analysis.question_diff import CannotCompare, compare

    a_kw, b_kw, said = ANOTHER[what]
    where = {"config": recorded != "rows only", "rows": recorded != "config.yaml only"}
    out_a, out_b = answers()
    a = run_folder(tmp_path / "a", out_a, dtype="bfloat16", **where, **a_kw)
    b = run_folder(tmp_path / "b", out_b, dtype="bfloat16", method="goose", **where, **b_kw)
    with pytest.raises(CannotCompare) as e:
        compare(a, b)
    msg = str(e.value)
    assert said in msg and "\n" not in msg and str(a) in msg and str(b) in msg, msg


@pytest.mark.integration
def test_the_command_names_the_difference_in_one_line_and_exits_2(tmp_path):
    """A model against a perturbed copy of it (another fingerprint) was a report with a class, exit 1."""
    out_a, out_b = answers()
    a = run_folder(tmp_path / "a", out_a)
    b = run_folder(tmp_path / "b", out_b, fingerprint="m0-perturbed")
    r = subprocess.run([sys.executable, "-m", "goose.analysis.reproduce", "equality", "--a", str(a), "--b",
                        str(b)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "", r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "model fingerprint (A: m0, B: m0-perturbed)" in lines[0], r.stderr


def test_runs_differing_in_what_the_report_is_for_are_compared_and_the_header_shows_both(tmp_path):
    """dtype, backend, concurrency, method (and a greedy run's unused seed) may differ: the report compares them,
    and its header shows each run's model fingerprint, dtype, sampling, length, chat template, stop rule, method
    and concurrency."""
    from goose.analysis.question_diff import NOT_EQUAL, compare

    out_a, out_b = answers()
    a = run_folder(tmp_path / "a", out_a)
    b = run_folder(tmp_path / "b", out_b, dtype="bfloat16", backend="prepacked", concurrency=4, method="goose",
                   seed=7)
    report, status = compare(a, b)
    assert status == NOT_EQUAL and "| p1 | 4 | 4 | 2 | numerics |" in report, report
    cells = [[c.strip() for c in line.strip("| ").split(" | ")] for line in report.split("- compared")[0].splitlines()
             if line.startswith("| ")]
    header = {c[0]: c[1:] for c in cells}
    assert header["model (fingerprint)"] == ["tiny (m0)", "tiny (m0)"]
    assert header["dtype"] == ["float32", "bfloat16"]
    assert header["sampling"] == ["greedy", "greedy"]
    assert header["max_new_tokens"] == ["8", "8"]
    assert header["chat template"] == ["false", "false"]
    assert header["stop rule"] == ["the model's EOS, or 8 new tokens"] * 2
    assert header["method"] == ["ar (B=fixed, memory=none)", "goose (B=fixed, memory=none)"]
    assert header["concurrency"] == ["1", "4"]
    assert header["backend, device"] == ["eager, cpu", "prepacked, cpu"]
    capped = run_folder(tmp_path / "c", out_b, capped={"p0": 6, "p1": 6})
    with_cap = run_folder(tmp_path / "d", out_a, capped={"p0": 6, "p1": 6})
    assert "| stop rule | the model's EOS, or 8 new tokens (2 question(s) capped by the context) |" in \
        compare(with_cap, capped)[0]


def test_two_dtypes_are_held_to_the_coarser_ones_tolerance(tmp_path):
    """float16 against bfloat16 was held to float16's tolerance (the larger name): bfloat16 (8 bits of mantissa)
    is the coarser, and a near-tie 0.5 apart (within its 1.0, beyond float16's 0.125) is numerics."""
    from goose.analysis.question_diff import compare

    out_a, out_b = answers(gap=0.5)
    report, _ = compare(run_folder(tmp_path / "a", out_a, dtype="float16"),
                        run_folder(tmp_path / "b", out_b, dtype="bfloat16"))
    assert "| p1 | 4 | 4 | 2 | numerics |" in report and "within bfloat16's tolerance (1)" in report, report
    out_a, out_b = answers(gap=0.1)  # float32 against float16: float16's 0.125
    report, _ = compare(run_folder(tmp_path / "c", out_a, dtype="float16"),
                        run_folder(tmp_path / "d", out_b, dtype="float32"))
    assert "| p1 | 4 | 4 | 2 | numerics |" in report and "within float16's tolerance (0.125)" in report, report
    import torch

    from goose.storage.equality import coarser

    assert coarser("float32", "float16", "bfloat16") == coarser(torch.bfloat16, "float16") == torch.bfloat16
    assert coarser("torch.float32", "float16") == torch.float16 and coarser("float32") == torch.float32


def test_the_summary_explains_only_the_classes_present(tmp_path):
    """A report with no numerics explained what numerics are; each class present is explained, no other."""
    from goose.analysis.question_diff import compare

    out_a, out_b = answers(gap=3.0)  # beyond every tolerance: diverged
    report, _ = compare(run_folder(tmp_path / "a", out_a), run_folder(tmp_path / "b", out_b))
    summary = next(line for line in report.splitlines() if line.startswith("- compared"))
    assert "1 differ (1 diverged; diverged: " in summary and "numerics" not in summary, summary
    out_a, out_b = answers(gap=0.0)
    report, _ = compare(run_folder(tmp_path / "c", out_a), run_folder(tmp_path / "d", out_b))
    summary = next(line for line in report.splitlines() if line.startswith("- compared"))
    assert "1 differ (1 numerics; numerics: a near-tie read two ways, within float32's tolerance" in summary
    assert "diverged" not in summary, summary


def test_runs_with_no_question_in_common_cannot_be_compared(tmp_path, capsys):
    """Two runs of different benchmarks read "compared 0 question(s) ... NOT EQUAL" (exit 1): nothing was compared.
    One line saying why (and, where the benchmarks differ, which), exit 2."""
    from omegaconf import OmegaConf

    from goose.analysis.question_diff import CannotCompare, compare
    from goose.analysis.reproduce import main

    out_a, out_b = answers()
    a = run_folder(tmp_path / "a", out_a)
    b = run_folder(tmp_path / "b", {f"HumanEval/{i}": x for i, x in enumerate(out_b.values())})
    config = OmegaConf.load(b / "config.yaml")
    config.benchmark.name = "humaneval"
    OmegaConf.save(config, b / "config.yaml")
    with pytest.raises(CannotCompare) as e:
        compare(a, b)
    msg = str(e.value)
    assert "no question in common" in msg and "benchmark jsonl" in msg and "humaneval" in msg and "\n" not in msg
    with pytest.raises(SystemExit) as code:
        main(["equality", "--a", str(a), "--b", str(b)])
    said = capsys.readouterr()
    assert code.value.code == 2 and said.out == "" and len(said.err.strip().splitlines()) == 1, said
    assert "could not compare" in said.err and "NOT EQUAL" not in said.err
    c = run_folder(tmp_path / "c", {"q9": out_b["p0"]})  # the same benchmark, other questions
    with pytest.raises(CannotCompare, match="no question in common"):
        compare(a, c)
