"""Comparisons over the prompts every compared configuration ran (goose.analysis.comparable), in every artifact:
a folder of mixed prompt sets, a method run at two lengths, and the one line saying what was left out."""

import pandas as pd
import pytest

from goose.analysis.artifacts import make
from goose.analysis.load import load_rows
from goose.storage.result_files import ResultsFile

SAME_RUN = {"speedup_source": "interleaved", **{f"{p}{k}": v for p in ("", "ar_") for k, v in
            {"host": "h", "threads": 2, "torch": "2.13.0", "backend": "eager", "device_name": "cpu",
             "sweep_id": "s"}.items()}}


def put(root, method: str, bench: str, steps: dict[str, int], new: int = 120, budget="60", accepted=None,
        drafted=None, **extra):
    """One configuration's rows: prompt id -> forwards (tau = new / forwards, known in advance)."""
    tag = "-".join(f"{k}{v}" for k, v in extra.items())
    f = ResultsFile(root / "m" / bench / method / f"B{budget}{tag}" / "results.csv")
    for k, (pid, n) in enumerate(steps.items()):
        counts = {"accepted": accepted[k], "drafted": drafted[k]} if accepted else {}
        f.append({**counts, "model": "m", "benchmark": bench, "method": method, "budget": budget, "prompt_id": pid,
                  "new_tokens": new, "steps": n, "tau": new / n, "wall_s": n * 0.1, "tokens_per_s": new / (n * 0.1),
                  "lossless": True, "config_hash": f"{method}-{bench}-{budget}{tag}", "ar_wall_s": new * 0.1,
                  "max_new_tokens": extra.get("N", new), **SAME_RUN})


def table(name, root, tmp_path) -> pd.DataFrame:
    make(name, load_rows(root), tmp_path / "out")
    return pd.read_csv(tmp_path / "out" / f"{name}.csv")


def test_table1_and_table2_compare_on_the_prompts_every_method_ran(tmp_path, capsys):
    # goose ran two prompts (and gsm8k); the balanced trees and the ablation only the first, where all tie
    # but goose's gain over iso3 (tau 4 vs 3: +33.3%). Pooling goose's second prompt (tau 6) would read more.
    root = tmp_path / "r"
    put(root, "goose", "humaneval", {"0": 30, "1": 20})
    put(root, "goose", "gsm8k", {"0": 40, "1": 40})
    put(root, "iso3", "humaneval", {"0": 40})
    put(root, "iso5", "humaneval", {"0": 30})
    put(root, "goose-no-bigram", "humaneval", {"0": 30})
    t1 = table("table1", root, tmp_path).set_index("benchmark")
    assert t1.loc["humaneval", "gain_vs_iso3_%"] == pytest.approx(100 / 3)
    assert t1.loc["humaneval", "gain_vs_iso5_%"] == pytest.approx(0.0)
    assert t1.loc["humaneval", "n"] == 1
    said = capsys.readouterr().out
    assert "compared on the 1 prompt(s) every configuration has; left out 1: 1, which" in said
    t2 = table("table2", root, tmp_path).set_index("variant")
    assert t2.loc["no bigram tier", "delta_humaneval_%"] == pytest.approx(0.0)
    # "all" compares like with like: over humaneval only, the benchmark both ran
    assert t2.loc["no bigram tier", "delta_all_%"] == pytest.approx(0.0)
    assert t2.loc["GOOSE (full)", "tau_all"] == pytest.approx(4.0)
    assert t2.loc["no bigram tier", "n_all"] == 1
    assert "'all' pools humaneval, the benchmark(s) every configuration ran; not gsm8k" in capsys.readouterr().out


def test_all_never_pools_two_configurations_of_one_benchmark(tmp_path, capsys):
    # humaneval at max_new_tokens=12 and =16, two prompts each: per-column numbers, no "all" pooling both
    root = tmp_path / "r"
    for method, n12, n16 in (("goose", 4, 4), ("pld", 6, 8)):
        put(root, method, "humaneval", {"0": n12, "1": n12}, new=12, N=12)
        put(root, method, "humaneval", {"0": n16, "1": n16}, new=16, N=16)
    t = table("all_methods", root, tmp_path).set_index("method")
    assert "tau all" not in t or t["tau all"].isna().all()
    cols = [c for c in t if c.startswith("tau humaneval")]
    assert len(cols) == 2 and {t.loc["goose", c] for c in cols} == {3.0, 4.0}
    assert t.loc["goose", "lossless"] == "4/4"  # losslessness counts every row of the configuration
    assert "no 'all'" in capsys.readouterr().out


def test_all_methods_shows_n_and_compares_common_prompts(tmp_path, capsys):
    root = tmp_path / "r"
    put(root, "goose", "gsm8k", {"0": 30, "1": 20, "2": 20})
    put(root, "pld", "gsm8k", {"0": 60, "2": 40})
    t = table("all_methods", root, tmp_path).set_index("method")
    assert t.loc["goose", "n gsm8k"] == 2 and t.loc["pld", "n gsm8k"] == 2
    assert t.loc["goose", "tau gsm8k"] == pytest.approx(240 / 50)
    assert "left out 1: 1, which pld B=60 did not run" in capsys.readouterr().out


def test_concurrency_table_compares_every_concurrency_on_common_prompts(tmp_path):
    root = tmp_path / "r"
    put(root, "goose", "gsm8k", {"0": 30, "1": 20})
    put(root, "goose", "gsm8k", {"0": 30}, c=4)
    df = load_rows(root)
    df.loc[df.config_hash.str.endswith("c4"), "concurrency"] = 4
    make("concurrency", df, tmp_path / "out")
    t = pd.read_csv(tmp_path / "out" / "concurrency.csv")
    assert set(t.prompts) == {1}


def test_rows_an_artifact_does_not_read_are_named_and_a_refusal_says_what_is_there(tmp_path, capsys):
    root = tmp_path / "r"
    put(root, "goose", "gsm8k", {"0": 30}, c=4)
    df = load_rows(root)
    df["concurrency"] = 4
    with pytest.raises(SystemExit, match="needs rows at concurrency 1 .the rows here: goose at budget 60; "
                       "concurrency 4"):
        make("claims", df, tmp_path / "out")  # the claims read one request at a time only
    make("all_methods", df, tmp_path / "out")  # the one concurrency the rows have, said in its title
    assert "(concurrency 4)" in (tmp_path / "out" / "all_methods.md").read_text().splitlines()[0]
    put(root, "goose", "gsm8k", {"0": 30})
    df = load_rows(root)
    df.loc[df.config_hash.str.endswith("c4"), "concurrency"] = 4
    make("all_methods", df, tmp_path / "out")
    assert "left out 1 row(s) at concurrency 4 (the concurrency artifact reads every" in capsys.readouterr().out


def test_source_gap_and_table1_never_pool_or_average_one_benchmark_twice(tmp_path, capsys):
    root = tmp_path / "r"
    for n in (12, 8):  # one benchmark at two lengths
        put(root, "pld", "humaneval", {"0": n, "1": n}, new=n, budget="fixed", N=n, accepted=[5, 5], drafted=[50, 50])
        put(root, "tr", "humaneval", {"0": n, "1": n}, new=n, budget="fixed", N=n, accepted=[1, 1], drafted=[100, 100])
        for m, steps in (("goose", 2), ("iso3", 4), ("iso5", 3)):
            put(root, m, "humaneval", {"0": steps, "1": steps}, new=n, N=n)
    gap = table("source_gap", root, tmp_path)
    assert "all" not in set(gap.benchmark) and set(gap["standalone PLD vs TR (as published): n"]) == {2}
    t1 = table("table1", root, tmp_path)
    assert "macro mean" not in set(t1.model) and "no macro mean" in capsys.readouterr().out
    assert (tmp_path / "out" / "table1.md").read_text().rstrip().endswith("|   2 |")  # n as a count, not 2.000


def test_one_refused_artifact_leaves_the_others_written_and_the_exit_says_it(tmp_path, capsys):
    from goose.analysis.reproduce import main

    root = tmp_path / "r"
    put(root, "goose", "gsm8k", {"0": 30, "1": 20})
    with pytest.raises(SystemExit) as e:
        main(["table1", "all_methods", "--results", str(root), "--out", str(tmp_path / "out")])
    assert e.value.code == 2 and (tmp_path / "out" / "all_methods.csv").is_file()
    err = capsys.readouterr().err
    assert "error: table1: no rows of iso3, iso5" in err and "not written: table1" in err
