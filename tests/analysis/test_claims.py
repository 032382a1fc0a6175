"""The claims scorecard on fixture rows: each claim's statistic against hand-computed numbers, the verdict
logic (holds, contradicted, inconclusive where the interval straddles the threshold), paired against unpaired
intervals, and an artifact that is the same bytes when written twice."""

import io
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from goose.analysis.artifacts import make
from goose.analysis.bootstrap import interval, ratio, tau
from goose.analysis.claims.card import CHAT, CLAIMS, scorecard
from goose.analysis.claims.page import summary_block
from goose.analysis.claims.summaries import summary
from goose.analysis.claims.verdicts import CONTRADICTED, HOLDS, INCONCLUSIVE
from goose.analysis.claims.verdicts import direction as verdict
from goose.analysis.load import load_rows
from goose.storage.result_files import ResultsFile

ROOT = Path(__file__).resolve().parents[2]
CLAIM = {c.number: c for c in CLAIMS}
BUDGET = {"pld": "fixed", "tr": "fixed", "lookahead": "fixed", "rest": "fixed"}


def put(root, method, steps, bench="humaneval", new=120, model="m", budget=None, **per_row):
    """One configuration's rows: prompt i gets `new` tokens in steps[i] forwards (tau = new / steps[i])."""
    budget = budget or BUDGET.get(method, "60")
    f = ResultsFile(root / model / bench / method / f"B{budget}" / "results.csv")
    for i, n in enumerate(steps):
        extra = {k: (v[i] if isinstance(v, list) else v) for k, v in per_row.items()}
        f.append({"model": model, "benchmark": bench, "method": method, "budget": budget, "prompt_id": str(i),
                  "new_tokens": new, "steps": n, "tau": new / n, "wall_s": 1.0, "tokens_per_s": new,
                  "lossless": True, "config_hash": f"{model}-{bench}-{method}-{budget}", "speedup_source": "none",
                  "timed_at": "2026-12-03T10:00:00+0000", "device_name": "cpu", "threads": 1, "dtype": "float32",
                  "model_fingerprint": "abcdef0123", **extra})


def protocol(card: pd.DataFrame, column: str = "m") -> dict:
    """The summary's cells of the paper's protocol reading: claim -> `column`."""
    t = summary(card)
    t = t[t.reading == "paper's protocol"]
    return dict(zip(t.claim, t[column]))


def card(root) -> pd.DataFrame:
    from goose.analysis.artifacts import rows_for

    return scorecard(rows_for("claims", load_rows(root))).set_index(["claim", "comparison"])


def test_tau_claims_are_pooled_tau_ratios_over_the_prompts_both_ran(tmp_path):
    root = tmp_path / "r"
    put(root, "goose", [30, 40, 20, 24])  # 480 tokens / 114 forwards
    put(root, "iso3", [40, 48, 30, 36])  # 480 / 154
    put(root, "spine-only", [60, 60, 60])  # one prompt short: compared on prompts 0-2 only
    put(root, "branches-only", [50, 50, 50, 50])
    put(root, "goose-no-bigram", [33, 44, 22, 26])
    c = card(root)
    assert c.loc[(3, "goose vs iso3"), "effect"] == pytest.approx((154 / 114 - 1) * 100)
    assert c.loc[(3, "goose vs iso3"), "n"] == 4
    assert c.loc[(2, "goose vs spine-only"), "effect"] == pytest.approx((180 / 90 - 1) * 100)  # prompts 0-2
    assert c.loc[(2, "goose vs spine-only"), "n"] == 3
    best = c.loc[(6, "goose vs best of spine-only / branches-only")]  # branches-only is the better source
    assert best.effect == pytest.approx((150 / 90 - 1) * 100) and best.n == 3  # prompts 0-2: 360 / 90 vs 360 / 150
    assert c.loc[(7, "goose-no-bigram vs goose"), "effect"] == pytest.approx((114 / 125 - 1) * 100)
    assert c.loc[(7, "goose-no-bigram vs goose"), "verdict"] == HOLDS  # every prompt lost tau: interval below 0


def test_what_the_claims_do_not_read_is_said(tmp_path, capsys):
    """Rows at another budget, a method whose counterpart never ran, and two sides with no prompt in common
    were passed over without a word (a new user's folder: 'No rows for this claim yet' beside rows)."""
    root = tmp_path / "r"
    put(root, "goose", [30, 40])
    put(root, "goose", [20, 20], budget="20")
    put(root, "iso3", [40, 48])
    put(root, "pld", [10, 10], bench="gsm8k")  # tr never ran on gsm8k
    put(root, "goose", [30], bench="mbpp")
    f = ResultsFile(root / "m" / "mbpp" / "iso5" / "B60" / "results.csv")  # iso5 on another prompt only
    f.append({"model": "m", "benchmark": "mbpp", "method": "iso5", "budget": "60", "prompt_id": "other",
              "new_tokens": 120, "steps": 40, "tau": 3.0, "wall_s": 1.0, "tokens_per_s": 120, "lossless": True,
              "config_hash": "m-mbpp-iso5-60", "speedup_source": "none", "timed_at": "2026-12-03T10:00:00+0000",
              "device_name": "cpu", "threads": 1, "dtype": "float32", "model_fingerprint": "abcdef0123"})
    c = card(root)
    said = capsys.readouterr().out
    assert c.loc[(3, "goose vs iso3"), "n"] == 2  # B=20 never pooled with B=60
    assert "m / humaneval: left out 2 row(s) at budgets no claim reads (goose B=20 (2))" in said
    line = next(x for x in said.splitlines() if "m / gsm8k: not read where a side has no rows" in x)
    assert {"goose", "tr", "iso3"} <= set(line.split(": ")[-1].split(", ")) and "pld" not in line.split(": ")[-1]
    assert "claims 3 goose vs iso5: m / mbpp: its sides ran no prompt in common" in said


def test_source_gap_and_speedup_by_hand(tmp_path):
    root = tmp_path / "r"
    put(root, "pld", [40, 40, 40], accepted=[30, 20, 10], drafted=[100, 100, 100])  # 60 / 300 = 0.2
    put(root, "tr", [40, 40, 40], accepted=[10, 10, 10], drafted=[500, 500, 500])  # 30 / 1500 = 0.02
    put(root, "goose", [30, 30, 30], wall_s=[1.0, 2.0, 1.0], ar_wall_s=[3.0, 5.0, 4.0], speedup=[3.0, 2.5, 4.0],
        speedup_source="interleaved", host="h", ar_host="h", ar_threads=1, torch="t", ar_torch="t", backend="b",
        ar_backend="b", ar_device_name="cpu", mean_width=[10.0, 10.0, 10.0])
    c = card(root)
    assert c.loc[(1, "pld / tr standalone"), "effect"] == pytest.approx(10.0)
    s = c.loc[(4, "goose B=60")]
    assert s.effect == pytest.approx(12 / 4) and s.tau == pytest.approx(4.0)
    assert s["AR ms/token"] == pytest.approx(1e3 * 12 / 360) and s["GOOSE ms/forward"] == pytest.approx(1e3 * 4 / 90)


@pytest.mark.parametrize("claim, low, high, expected", [
    (3, 13.0, 20.0, HOLDS), (3, 12.0, 20.0, HOLDS), (3, 5.0, 20.0, INCONCLUSIVE), (3, 1.0, 11.9, CONTRADICTED),
    (5, 0.0, 3.0, INCONCLUSIVE), (5, 0.1, 3.0, HOLDS), (5, -2.0, 0.0, CONTRADICTED),  # strict: 0 is not ahead
    (7, -5.0, -1.0, HOLDS), (7, -5.0, 0.0, INCONCLUSIVE), (7, 0.0, 0.0, CONTRADICTED), (7, 1.0, 2.0, CONTRADICTED),
    (1, 2.5, 9.0, HOLDS), (1, 1.5, 3.0, INCONCLUSIVE), (1, 1.1, 1.9, CONTRADICTED),
    (3, float("nan"), float("nan"), INCONCLUSIVE),
])
def test_verdicts_read_the_interval_against_the_papers_threshold(claim, low, high, expected):
    assert verdict(CLAIM[claim], low, high) == expected


def test_an_interval_straddling_the_threshold_is_inconclusive(tmp_path):
    # GOOSE over Iso(3) per prompt: +0%, +30%, +5%, +25%, +10%, +20%: pooled about +15%, the interval wide
    # enough on six prompts to reach below the paper's +12%
    root = tmp_path / "r"
    iso = [60, 60, 60, 60, 60, 60]
    put(root, "goose", [round(60 / g) for g in (1.0, 1.3, 1.05, 1.25, 1.1, 1.2)])
    put(root, "iso3", iso)
    row = card(root).loc[(3, "goose vs iso3")]
    assert row.low < 12 < row.high and row.verdict == INCONCLUSIVE and row["vs no effect"] == "above"


def test_paired_intervals_use_the_pairing_and_unpaired_ones_do_not():
    # prompts differ a lot (tau 1.5 .. 6), GOOSE is 20% ahead on every one of them: pairing removes the prompt
    # spread and leaves a narrow interval around +20%; resampling each side's prompts on its own does not
    rng = np.random.default_rng(1)
    base = np.array([80.0, 20.0, 60.0, 35.0, 50.0, 25.0, 70.0, 30.0, 45.0, 55.0])
    a = {"new_tokens": np.full(10, 120.0), "steps": base / 1.2 * (1 + 0.01 * rng.standard_normal(10))}
    b = {"new_tokens": np.full(10, 120.0), "steps": base}
    est, lo_p, hi_p = interval(ratio(tau), [a, b], paired=True)
    _, lo_u, hi_u = interval(ratio(tau), [a, b], paired=False)
    assert est == pytest.approx(1.2, rel=0.02)
    assert lo_p < est < hi_p and hi_p - lo_p < 0.05
    assert lo_u < lo_p and hi_u > hi_p and (hi_u - lo_u) > 10 * (hi_p - lo_p)
    assert interval(ratio(tau), [a, b], paired=True) == (est, lo_p, hi_p)  # seeded: the same every time


def test_one_or_two_prompts_give_no_interval():
    one = {"new_tokens": np.array([100.0]), "steps": np.array([25.0])}
    est, lo, hi = interval(ratio(tau), [one, one], paired=True)
    assert est == 1.0 and np.isnan(lo) and np.isnan(hi)
    # two prompts: three distinct resamples, which gave SmolLM2's MT-Bench clock a "holds" on 6.0x [3.9x, 12.3x]
    a = {"new_tokens": np.array([100.0, 90.0]), "steps": np.array([25.0, 40.0])}
    b = {"new_tokens": np.array([100.0, 90.0]), "steps": np.array([50.0, 60.0])}
    est, lo, hi = interval(ratio(tau), [a, b], paired=True)
    assert est == pytest.approx((190 / 65) / (190 / 110)) and np.isnan(lo) and np.isnan(hi)


def test_the_artifact_is_the_same_bytes_twice_and_says_what_it_ran_on(tmp_path):
    root = tmp_path / "r"
    for bench in ("humaneval", "gsm8k"):
        put(root, "goose", [30, 40, 20], bench=bench, copied_answer=[10, 5, 0], copied_prompt=[2, 2, 2])
        put(root, "pld", [60, 50, 40], bench=bench, accepted=[20, 20, 20], drafted=[50, 60, 70])
        put(root, "tr", [70, 60, 55], bench=bench, accepted=[9, 9, 9], drafted=[400, 400, 400])
    df = load_rows(root)
    first = [p.read_bytes() for p in make("claims", df, tmp_path / "a")]
    again = [p.read_bytes() for p in make("claims", df, tmp_path / "b")]
    assert first == again and len(first) == 3
    text = first[0].decode()
    assert "Measured: 2026-12-03 on: cpu with 1 thread; float32" in text[:2000]
    assert "| goose vs pld |" in text
    assert "4 / 2" in text  # GOOSE's copy split: 15 of 360 tokens repeat its answer, 6 the prompt (%)
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in text.splitlines() if line.startswith("| ")]
    assert ["5. ahead of peers", "paper's protocol", "> 0% in every cell", "4 / 0 / 0 (2 of 5 benchmarks)",
            "no size in the paper"] in cells
    assert ["3. vs balanced trees", "paper's protocol", "+12..+33%", "not run", ""] in cells
    assert ["3. vs balanced trees", "chat template", "+12..+33%",
            "no chat-template rows (not run, or a model without one)", ""] in cells
    block = summary_block(text)  # the README's: at a glance, the loop-free window first (no outputs records here)
    assert ["5. ahead of peers", "> 0% in every cell", "- · 4/4 · -", "- · -"] in cells
    assert ["3. vs balanced trees", "+12..+33%", "- · - · -", "- · -"] in cells
    assert "| 6. synergy (= claim 2, read for size) |" in block


def test_the_paper_plan_counts_runs_prompts_and_tokens(capsys):
    from goose.experiments import claims_plan

    claims_plan.main(["--profile", "paper"])
    out = capsys.readouterr().out
    # 5 models x 5 benchmarks x 15 methods, plus GOOSE at two budgets timed: 425 runs
    assert "425 runs" in out and "| vicuna-33b |" in out and "164/500/100/1319/80" in out
    jobs = claims_plan.plan("paper", None, 2039.0, 0.6)
    per_model = sum(r["tokens"] for r in jobs if r["model"] == "vicuna-7b")
    assert per_model == 17 * (164 * 512 + 500 * 512 + 100 * 512 + 1319 * 1024 + 80 * 1024)
    assert {r["gpu_h"] > 0 for r in jobs} == {True}


def test_the_summary_says_on_how_many_benchmarks_a_claim_was_read():
    five = ["humaneval", "mbpp", "classeval", "gsm8k", "mt_bench"]
    card = pd.DataFrame({"claim": [1] * 5 + [2] * 2, "model": ["m"] * 7, "benchmark": five + five[:2],
                         "verdict": [HOLDS] * 4 + [CONTRADICTED, INCONCLUSIVE, HOLDS]})
    cells = protocol(card)
    assert cells["1. source gap"] == "4 / 0 / 1"  # every benchmark read: no count
    assert cells["2. non-degradation"] == "1 / 1 / 0 (2 of 5 benchmarks)"
    assert cells["3. vs balanced trees"] == "not run"


@pytest.mark.parametrize("planned, says", [({"m"}, "not run yet"), (set(), "none planned: the chat sweep runs only "
                                           "models with a chat template")])
def test_an_empty_chat_cell_says_whether_the_plan_runs_the_model_with_its_template(planned, says):
    card = pd.DataFrame({"claim": [2], "model": ["m"], "benchmark": ["mbpp"], "verdict": [HOLDS], "reading": [CHAT]})
    card.attrs["chat planned"] = planned
    t = summary(card)
    assert t[(t.claim == "3. vs balanced trees") & (t.reading == CHAT)]["m"].item() == says


def test_prompts_answered_in_one_token_are_left_out_and_counted(tmp_path):
    """SmolLM2 on raw MT-Bench prompts: half its answers were the end of text alone (1 token, 1 forward, nothing
    drafted). Kept, they counted in n, and claim 1 had no interval (a resample of only them has no acceptance
    rate); left out, n is the prompts anything was drafted on, and the page counts the rest."""
    root = tmp_path / "r"
    one = dict(new=[120, 120, 1, 1, 120, 1], steps=[40, 40, 1, 1, 40, 1])
    for m, acc, dr in (("pld", [30, 20, 0, 0, 10, 0], [100, 100, 0, 0, 100, 0]),
                       ("tr", [10, 10, 0, 0, 10, 0], [500, 500, 0, 0, 500, 0])):
        f = ResultsFile(root / "m" / "mt_bench" / m / "Bfixed" / "results.csv")
        for i in range(6):
            f.append({"model": "m", "benchmark": "mt_bench", "method": m, "budget": "fixed", "prompt_id": str(i),
                      "new_tokens": one["new"][i], "steps": one["steps"][i], "tau": one["new"][i] / one["steps"][i],
                      "wall_s": 1.0, "tokens_per_s": 1.0, "lossless": True, "config_hash": f"m-{m}",
                      "speedup_source": "none", "timed_at": "2026-12-03T10:00:00+0000", "device_name": "cpu",
                      "threads": 1, "dtype": "float32", "model_fingerprint": "abcdef0123", "accepted": acc[i],
                      "drafted": dr[i]})
    row = card(root).loc[(1, "pld / tr standalone")]
    assert row.n == 3 and row["nothing drafted"] == 3
    assert row.effect == pytest.approx((60 / 300) / (30 / 1500))  # the left-out prompts add nothing to the sums
    assert np.isfinite(row.low) and np.isfinite(row.high)
    text = make("claims", load_rows(root), tmp_path / "out")[0].read_text()
    gap = text.split("## 1.")[1].split("## 2.")[0]
    assert "nothing drafted |" in gap and "| pld / tr standalone |   3 |" in gap
    assert "nothing drafted" not in text.split("## 2.")[1]  # a claim without any keeps its columns


@pytest.mark.integration
def test_the_committed_scorecard_is_what_the_committed_rows_give(tmp_path):
    """docs/results/claims.* are the claims artifact of results/claims-local as committed (HEAD's rows: a sweep
    writing into this checkout does not move them), by this checkout's code: rows committed without the scorecard
    regenerated from them, or an analysis change without it, fail here."""
    head = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD", "results/claims-local"], capture_output=True)
    if head.returncode != 0:
        pytest.skip(f"no committed rows to read (not a git checkout?): {head.stderr.decode().strip()}")
    tarfile.open(fileobj=io.BytesIO(head.stdout)).extractall(tmp_path, filter="data")
    out = tmp_path / "artifact"
    make("claims", load_rows(tmp_path / "results" / "claims-local"), out)
    for name in ("claims.md", "claims.csv", "claims.png"):
        assert (out / name).read_bytes() == (ROOT / "docs" / "results" / name).read_bytes(), (
            f"docs/results/{name} is not what the committed rows give: regenerate it (python -m "
            "goose.analysis.reproduce claims --results results/claims-local --out docs/results --readme README.md) "
            "and commit it with the rows")


def _rows(root, method, steps, bench="humaneval", n_new=512, folder="", config="", budget=None, **per_row):
    """put() with the settings that make a benchmark label (max_new_tokens against the paper's length) and a
    configuration (its hash, its drafter settings) explicit."""
    budget = budget or BUDGET.get(method, "60")
    config = config or f"{bench}-{method}-{budget}-N{n_new}"
    f = ResultsFile(root / "m" / bench / method / (folder or config) / "results.csv")
    for i, n in enumerate(steps):
        extra = {k: (v[i] if isinstance(v, list) else v) for k, v in per_row.items()}
        f.append({"model": "m", "benchmark": bench, "method": method, "budget": budget, "prompt_id": str(i),
                  "new_tokens": 120, "steps": n, "tau": 120 / n, "wall_s": 1.0, "tokens_per_s": 120,
                  "lossless": True, "equality": "exact", "config_hash": config, "speedup_source": "none",
                  "timed_at": "2026-12-03T10:00:00+0000", "device_name": "cpu", "threads": 1, "dtype": "float32",
                  "model_fingerprint": "abcdef0123", "prompts_fingerprint": "p", "max_new_tokens": n_new,
                  "benchmark.paper_max_new_tokens": 512, **extra})


TIMED = dict(speedup_source="interleaved", host="h", ar_host="h", ar_threads=1, torch="t", ar_torch="t",
             backend="eager", ar_backend="eager", ar_device_name="cpu", mean_width=10.0)


def test_a_benchmark_read_under_several_labels_is_one_benchmark(tmp_path, capsys):
    """PLD and TR on HumanEval at five answer lengths gave claim 1 "1 / 4 / 0" with no "(1 of 5)": one benchmark
    and three prompts read five times; the demo's 128-token GOOSE rows beside the claims' gave claim 4 eleven
    comparisons where five benchmarks x two budgets allow ten."""
    root = tmp_path / "r"
    for n_new in (64, 128, 256, 512, 1024):
        _rows(root, "pld", [40, 40, 40], n_new=n_new, accepted=[30, 20, 10], drafted=[100, 100, 100])
        _rows(root, "tr", [40, 40, 40], n_new=n_new, accepted=[10, 10, 10], drafted=[500, 500, 500])
    for n_new in (128, 512):  # the demo's length and the paper's
        for budget in ("60", "auto"):
            _rows(root, "goose", [30, 30, 30], n_new=n_new, budget=budget, wall_s=[1.0, 2.0, 1.0],
                  ar_wall_s=[3.0, 5.0, 4.0], speedup=[3.0, 2.5, 4.0], **TIMED)
    c = card(root)
    gap = c.loc[(1, "pld / tr standalone")]
    assert gap["read as"] == "humaneval [max_new_tokens=512]" and "paper's protocol" in gap["why this label"]
    assert len(c.loc[4]) == 2 and set(c.loc[4]["read as"]) == {"humaneval [max_new_tokens=512]"}
    cells = protocol(c.reset_index())
    assert cells["1. source gap"] == "0 / 1 / 0 (1 of 5 benchmarks)"  # GOOSE's own spine / branch: no such columns
    assert cells["4. lossless speedup"] == "CPU reading, B=60: faster than AR in 1 of 1 (1 of 5 benchmarks)"
    assert len(c.loc[4]) == 2  # B=60, counted as a reading, and budget=auto beside it
    text = make("claims", load_rows(root), tmp_path / "out")[0].read_text()
    assert "humaneval [max_new_tokens=512]" in text.split("## 1.")[1].split("## 2.")[0]


def test_a_benchmark_outside_the_papers_five_is_read_in_direction_and_not_counted(tmp_path, capsys):
    """A researcher's own prompts (benchmark=jsonl): each claim read in direction, no size (the paper has no number
    for them), not counted in the summary."""
    root = tmp_path / "r"
    for bench in ("humaneval", "jsonl"):
        _rows(root, "pld", [40, 40, 40], bench=bench, accepted=[30, 20, 10], drafted=[100, 100, 100])
        _rows(root, "tr", [40, 40, 40], bench=bench, accepted=[10, 10, 10], drafted=[500, 500, 500])
    c = card(root)
    assert set(c.benchmark) == {"humaneval", "jsonl"}
    own = c[c.benchmark == "jsonl"]
    assert not own.counted.any() and set(own["size"]) == {""} and set(own.verdict) <= {"holds", "inconclusive",
                                                                                       "contradicted"}
    assert own.note.str.startswith("not one of the paper's five benchmarks").all()
    assert "jsonl: not one of the paper's five benchmarks" in capsys.readouterr().out


def test_the_claims_read_the_default_configuration_and_name_it(tmp_path, capsys):
    """A use_confidence=false GOOSE run on 5 prompts beside the default on 4 was the one read (the most prompts),
    named only on stdout; claims.md and claims.csv said "goose"."""
    root = tmp_path / "r"
    _rows(root, "goose", [30, 40, 20, 24], config="default-goose", **{"method.drafter.use_confidence": True})
    _rows(root, "goose", [90, 90, 90, 90, 90], config="no-confidence-goose",
          **{"method.drafter.use_confidence": False})
    _rows(root, "iso3", [40, 48, 30, 36])
    row = card(root).loc[(3, "goose vs iso3")]
    assert row.n == 4 and row.effect == pytest.approx((154 / 114 - 1) * 100)
    assert "goose default-goose" in row.configurations
    said = capsys.readouterr().out
    assert "not read: goose B=60 config no-confidence-goose (5 prompts): not the method's default: " \
           "use_confidence=False (default True)" in said
    out = tmp_path / "out"
    make("claims", load_rows(root), out)
    text = (out / "claims.md").read_text().split("## Configurations")[1]
    assert "default-goose" in text and "no-confidence-goose" in text.split("Not read:")[1]
    assert "goose default-goose" in set(pd.read_csv(out / "claims.csv").configurations.str.split("; ").sum())


def test_only_non_default_configurations_are_not_read(tmp_path, capsys):
    root = tmp_path / "r"
    _rows(root, "goose", [30, 40, 20, 24], **{"method.drafter.use_confidence": False})
    _rows(root, "iso3", [40, 48, 30, 36])
    _rows(root, "goose-no-bigram", [33, 44, 22, 26])
    with pytest.raises(SystemExit, match="no claim could be read"):
        card(root)
    line = next(x for x in capsys.readouterr().out.splitlines() if "not read where a side has no rows" in x)
    assert "goose" in line.split(": ")[-1].split(", ")


def test_a_lossy_comparison_never_holds(tmp_path):
    """GOOSE rows marked lossless=False / equality=diverged gave claim 4 "7.05x holds" with lossless 0/3 in the
    next column; bf16 and GPU runs write such rows for real. In half precision a numerics row (a near-tie decided
    the other way) is as good as exact."""
    root = tmp_path / "r"
    _rows(root, "goose", [30, 30, 30], wall_s=[1.0, 1.0, 1.0], ar_wall_s=[7.0, 7.0, 7.2], speedup=[7.0, 7.0, 7.2],
          lossless=False, equality="diverged", **TIMED)
    _rows(root, "iso3", [40, 48, 30])
    c = card(root)
    speed = c.loc[(4, "goose B=60")]
    assert speed.verdict == "not lossless" and "3 of 3 rows are not AR's tokens (equality diverged)" in \
        speed["not counted because"]
    assert c.loc[(3, "goose vs iso3"), "verdict"] == "not lossless"
    cells = protocol(c.reset_index())
    assert cells["4. lossless speedup"].startswith("CPU reading, B=60: faster than AR in 0 of 0 (+1 not lossless")
    assert cells["3. vs balanced trees"].startswith("0 / 0 / 0 (+1 not lossless, not counted)")
    half = tmp_path / "half"
    _rows(half, "goose", [30, 30, 30], dtype="float16", lossless=[True, False, True],
          equality=["exact", "numerics", "exact"])
    _rows(half, "iso3", [60, 60, 60], dtype="float16")
    assert card(half).loc[(3, "goose vs iso3"), "verdict"] == HOLDS  # float16, a numerics row: counted


@pytest.mark.parametrize("readme, says, separate", [
    ("# x\n<!-- summary -->\nold\n", "found 1 <!-- summary --> and 0 <!-- /summary -->", False),
    ("# x\n<!-- /summary -->\nold\n<!-- summary -->\n", "in the wrong order", False),
    pytest.param(None, "no such file", True, marks=pytest.mark.integration),  # once as a user runs it: its own
])                                                                            # process, one line on stderr
def test_a_readme_without_its_markers_is_refused_before_anything_is_written(tmp_path, capsys, readme, says, separate):
    from goose.analysis.reproduce import main

    root = tmp_path / "r"
    _rows(root, "goose", [30, 40, 20, 24])
    _rows(root, "iso3", [40, 48, 30, 36])
    path = tmp_path / "README.md"
    if readme is not None:
        path.write_text(readme)
    out = tmp_path / "out"
    argv = ["claims", "--results", str(root), "--out", str(out), "--readme", str(path)]
    if separate:
        run = subprocess.run([sys.executable, "-m", "goose.analysis.reproduce", *argv], capture_output=True, text=True)
        code, stderr = run.returncode, run.stderr
    else:
        with pytest.raises(SystemExit) as e:
            main(argv)
        code, stderr = e.value.code, capsys.readouterr().err
    assert code == 2, stderr
    assert stderr.strip().count("\n") == 0 and says in stderr and "Traceback" not in stderr
    assert not out.exists() or not any(out.iterdir())
    assert readme is None or path.read_text() == readme


@pytest.mark.parametrize("low, high, expected", [
    (14.0, 30.0, "within"), (12.0, 33.0, "within"),  # the whole interval inside +12..+33%
    (34.0, 90.0, "above"), (-5.0, 11.9, "below"),  # wholly past one end
    (5.0, 20.0, "inconclusive"), (20.0, 60.0, "inconclusive"), (0.0, 99.0, "inconclusive"),  # overlaps and reaches past
    (float("nan"), float("nan"), "inconclusive"),
])
def test_the_size_verdict_reads_the_interval_against_the_papers_range(low, high, expected):
    from goose.analysis.claims.verdicts import size

    assert size((12, 33), low, high) == expected
    assert size(None, low, high) == ""  # a claim of direction only has no size verdict


def test_an_ablation_below_the_papers_range_is_said_so():
    from goose.analysis.claims.verdicts import size

    assert size((-5.1, -2.9), -70.0, -50.0) == "below"  # costs far more than the paper's 3-5%
    assert size((-5.1, -2.9), -2.0, -1.0) == "above"  # costs less
    assert size((-5.1, -2.9), -4.0, -3.0) == "within"


def test_one_configuration_under_two_names_is_counted_once(tmp_path):
    """goose-no-context-spine and branches-only are one configuration (GOOSE with context_spine=false): their rows
    are one measurement, which was counted in claims 2, 6 and 7."""
    root = tmp_path / "r"
    put(root, "goose", [30, 40, 20, 24])
    put(root, "branches-only", [50, 50, 50, 50])
    put(root, "goose-no-context-spine", [50, 50, 50, 50])
    put(root, "goose-no-bigram", [33, 44, 22, 26])
    put(root, "goose-no-prefill-harvest", [33, 44, 22, 26])
    c = card(root)
    twin = c.loc[(7, "goose-no-context-spine vs goose")]
    assert not twin.counted and "the configuration of branches-only" in twin.note
    assert c.loc[(2, "goose vs branches-only")].counted
    assert not c.loc[(7, "goose-no-prefill-harvest vs goose")].counted  # no number in the paper
    bigram = c.loc[(7, "goose-no-bigram vs goose")]
    assert bigram.counted and bigram.paper == "-3.7%"
    cells = protocol(c.reset_index())
    assert cells["7. ablations cost tau"] == "1 / 0 / 0 (1 of 5 benchmarks)"  # no-bigram alone is counted
    sizes = protocol(c.reset_index(), "m size")
    assert sizes["7. ablations cost tau"] == "0 / 0 / 1 / 0"  # -8.8%, every prompt -8..-10%: below -5.1..-2.9%


def test_the_source_gap_is_read_inside_gooses_own_trees(tmp_path):
    """The paper's claim compares spine against branch acceptance; standalone PLD against TR also measures a chain
    against a wide tree, so it is shown beside, not counted."""
    root = tmp_path / "r"
    put(root, "goose", [30, 30, 30], spine_accepted=[40, 30, 20], spine_drafted=[100, 100, 100],
        branch_accepted=[5, 5, 5], branch_drafted=[300, 300, 300], drafted=[400, 400, 400])
    put(root, "pld", [40, 40, 40], accepted=[30, 20, 10], drafted=[100, 100, 100])
    put(root, "tr", [40, 40, 40], accepted=[10, 10, 10], drafted=[500, 500, 500])
    c = card(root)
    own = c.loc[(1, "goose: spine / branch nodes")]
    assert own.effect == pytest.approx((90 / 300) / (15 / 900)) and own.counted  # 18x
    assert not c.loc[(1, "pld / tr standalone")].counted


def test_the_clock_is_a_cpu_reading_never_contradicted(tmp_path):
    root = tmp_path / "r"
    _rows(root, "goose", [30, 30, 30], wall_s=[2.0, 2.0, 2.0], ar_wall_s=[1.0, 1.1, 0.9], speedup=[0.5, 0.55, 0.45],
          **TIMED)
    row = card(root).loc[(4, "goose B=60")]
    assert row.verdict == "CPU reading" and row["size"] == "CPU reading: below" and row["vs no effect"] == "below"


def test_the_clock_timed_on_a_gpu_is_a_verdict(tmp_path):
    root = tmp_path / "r"
    _rows(root, "goose", [30, 30, 30], wall_s=[1.0, 1.0, 1.0], ar_wall_s=[2.5, 2.6, 2.4], speedup=[2.5, 2.6, 2.4],
          device="cuda", **TIMED)
    row = card(root).loc[(4, "goose B=60")]
    assert row.verdict == "holds" and row["size"] == "within"


def test_a_label_is_chosen_by_the_rows_the_claims_could_read(tmp_path):
    """Neither label at the paper's length: the 48-token one had more rows, but two were a non-default GOOSE's, so
    the claims read it at n = 1 and left the 32-token label's complete default runs (n = 2) unread."""
    root = tmp_path / "r"
    for n_new in (32, 48):
        _rows(root, "pld", [40, 40], n_new=n_new, accepted=[30, 20], drafted=[100, 100])
        _rows(root, "tr", [40, 40], n_new=n_new, accepted=[10, 10], drafted=[500, 500])
    _rows(root, "goose", [30, 30], n_new=32)
    _rows(root, "goose", [30], n_new=48)
    _rows(root, "goose", [20, 20], n_new=48, config="no-confidence", **{"method.drafter.use_confidence": False})
    c = card(root)
    peers = c.loc[(5, "goose vs pld")]
    assert peers["read as"] == "humaneval [max_new_tokens=32]" and peers.n == 2
    assert "not the paper's protocol (32 new tokens, the paper's 512)" in peers["why this label"]


def test_a_clock_whose_timed_rows_are_all_stale_says_so_not_not_run(tmp_path):
    """GOOSE's B=60 rows timed, but every AR timing taken under other conditions (another host): left out of the
    clock, and the page says "timing stale (N rows), left out", never that claim 4 did not run."""
    root = tmp_path / "r"
    _rows(root, "goose", [30, 30, 30], wall_s=[1.0, 2.0, 1.0], ar_wall_s=[3.0, 5.0, 4.0], speedup=[3.0, 2.5, 4.0],
          speedup_stale=True, **{**TIMED, "ar_host": "another"})
    _rows(root, "spine-only", [40, 40, 40])
    cells = protocol(card(root).reset_index())
    assert cells["4. lossless speedup"] == "timing stale (3 rows), left out"
    assert cells["2. non-degradation"] != "not run"
    _rows(root, "goose", [30, 30, 30], bench="mbpp", wall_s=[1.0, 2.0, 1.0], ar_wall_s=[3.0, 5.0, 4.0],
          speedup=[3.0, 2.5, 4.0], **TIMED)  # a benchmark timed here: the clock reads it, the stale rows stay out
    assert protocol(card(root).reset_index())["4. lossless speedup"].startswith("CPU reading, B=60: faster than AR")


def test_the_production_peers_stand_beside_claim_5_and_are_not_counted(tmp_path):
    """A serving engine's drafter, at its defaults or at GOOSE's budget, is read against GOOSE beside claim 5's
    peers (beyond the paper), never counted for the claim."""
    root = tmp_path / "r"
    put(root, "goose", [30, 40, 20, 24])
    put(root, "pld", [40, 50, 30, 30])
    put(root, "sglang-ngram", [60, 60, 40, 40], budget="fixed")
    put(root, "vllm-ngram-budget", [20, 30, 15, 20])  # vLLM's chain at B = 60 ahead of GOOSE on every prompt
    c = card(root)
    assert bool(c.loc[(5, "goose vs pld")].counted)
    for peer, said in (("sglang-ngram", "holds"), ("vllm-ngram-budget", "contradicted")):
        row = c.loc[(5, f"goose vs {peer}")]
        assert not bool(row.counted) and row.note.startswith("beyond the paper") and row.verdict == said, peer
    assert "at GOOSE's budget" in c.loc[(5, "goose vs vllm-ngram-budget")].note
