"""The production peers' artifact (goose.analysis.production_peers) on hand-made rows: GOOSE's gain over each
drafter a serving engine ships, per reading (loop-free window, whole answer, the clock), over the prompts both ran;
the page from the same rows."""

import io
import re
import subprocess
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from goose.analysis.artifacts import make
from goose.analysis.load import load_rows
from goose.analysis.production_peers import CLOCK, CLOCK_STOPPED, WHOLE, WINDOW, production_peers, write
from goose.analysis.writers import ran_on
from goose.storage.result_files import OutputsFile, ResultsFile


def _run(root, method, budget, forwards, prompts, tokens=40, stop=False, timed=True, benchmark="humaneval", **own):
    """`prompts` answers of `tokens` distinct tokens, each in `forwards` forwards (the last token of each a bonus);
    `stop`: runs stopped at their first loop (stop_at_loop); `timed`: against AR beside it (AR 0.1 s a token);
    `own`: the rows' values otherwise (threads, cost_fingerprint, wall_s, ...)."""
    config = ("" if benchmark == "humaneval" else f"{benchmark}-") + f"{method}-{budget}" + "-loopstop" * stop
    folder = root / "m" / benchmark / method / config
    per = tokens // forwards
    origins = (["drafted"] * (per - 1) + ["bonus"]) * forwards
    for i in range(prompts):
        answer = list(range(100 + i, 100 + i + tokens))
        OutputsFile(folder / "outputs.jsonl").append(str(i), config, "p", answer, [str(t) for t in answer], origins)
        clock = {"speedup_source": "interleaved", "ar_wall_s": tokens * 0.1, "speedup": tokens / forwards}
        ResultsFile(folder / "results.csv").append({**(clock if timed else {}),
            "model": "m", "benchmark": benchmark, "method": method, "budget": budget, "prompt_id": str(i),
            "new_tokens": tokens, "steps": forwards, "tau": tokens / forwards, "wall_s": forwards * 0.1,
            "tokens_per_s": 1.0, "lossless": True, "equality": "exact", "config_hash": config,
            "timed_at": "2026-12-06T10:00:00+0000", "device_name": "cpu", "threads": 1, "dtype": "float32",
            "model_fingerprint": "abcdef0123", "prompts_fingerprint": "p", "max_new_tokens": 512,
            "benchmark.paper_max_new_tokens": 512, "stop_at_loop": stop, **own})


def test_a_configuration_measured_apart_in_two_folders_is_read_as_one_measurement(tmp_path, capsys):
    """The same configuration run in two results folders (another machine, another thread count) is never pooled
    prompt by prompt: budget=auto rows of one cost, and one setup's clock; the other's rows stay for tau only."""
    peers, claims = tmp_path / "peers", tmp_path / "claims"
    _run(peers, "vllm-ngram", "fixed", 20, 4)  # tau 2, 2x AR
    _run(peers, "goose", "60", 10, 4)  # tau 4, 4x AR, one thread
    _run(claims, "goose", "60", 10, 2, threads=2, wall_s=0.5)  # the same drafts timed on two threads: 8x AR
    _run(peers, "goose", "auto", 8, 4, cost_fingerprint="c1")  # tau 5
    _run(claims, "goose", "auto", 5, 2, cost_fingerprint="c2")  # pruned against another cost: tau 8
    df = load_rows([peers, claims])
    said = capsys.readouterr().out
    assert "goose B=60 on m / humaneval (config goose-60) was timed on several setups in its folders: read cpu, 1 " \
        "thread(s) (4 prompts); cpu, 2 thread(s) (2 prompts): read for tau, their timing left out" in said
    assert "goose B=auto on m / humaneval (config goose-auto) was pruned against several costs in its folders: read " \
        "c1 (4 prompts); c2 (2 prompts): left out" in said
    t = production_peers(df)
    clock = t[(t.reading == CLOCK) & (t.peer == "vllm-ngram")].set_index("goose budget")
    assert (clock.loc["60", "n"], clock.loc["60", "goose speedup"]) == (4, 4.0)
    assert (clock.loc["auto", "n"], clock.loc["auto", "goose speedup"]) == (4, 5.0)
    whole = t[(t.reading == WHOLE) & (t.peer == "vllm-ngram")].set_index("goose budget")
    assert whole.loc["auto", "goose tau"] == 5.0 and whole.loc["60", "goose tau"] == 4.0
    assert len(df[df.config_hash == "goose-60"]) == 4 and len(df[df.config_hash == "goose-auto"]) == 4


def test_goose_against_each_production_drafter_on_the_prompts_both_ran(tmp_path, capsys):
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 4)  # tau 4
    _run(root, "vllm-ngram", "fixed", 20, 4)  # tau 2
    _run(root, "llamacpp-ngram-mod", "fixed", 8, 3)  # tau 5, on 3 of GOOSE's 4 prompts
    _run(root, "vllm-ngram-budget", "60", 5, 4)  # tau 8: vLLM's chain at GOOSE's budget, read at that budget
    _run(root, "vllm-ngram-budget", "30", 4, 4)  # another budget than GOOSE's: not its peer
    t = production_peers(load_rows(root)).set_index(["reading", "peer"])
    equal = t.loc[(WHOLE, "vllm-ngram-budget")]
    assert (equal.n, equal["goose budget"], equal["peer tau"]) == (4, "60", 8.0)
    assert equal["goose vs peer [95% CI]"] == "-50.0% [-50.0%, -50.0%]"
    for reading in (WHOLE, WINDOW):
        vllm, mod = t.loc[(reading, "vllm-ngram")], t.loc[(reading, "llamacpp-ngram-mod")]
        assert (vllm.n, vllm["goose tau"], vllm["peer tau"]) == (4, 4.0, 2.0)
        assert vllm["goose vs peer [95% CI]"] == "+100.0% [+100.0%, +100.0%]"
        assert (mod.n, mod["peer tau"]) == (3, 5.0) and mod["goose vs peer [95% CI]"].startswith("-20.0%")
    clock = t.loc[(CLOCK, "vllm-ngram")]
    assert clock["goose speedup"] == pytest.approx(4.0) and clock["peer speedup"] == pytest.approx(2.0)
    assert clock["goose vs peer [95% CI]"] == "+100.0% [+100.0%, +100.0%]" and clock.n == 4
    assert t.loc[(WINDOW, "vllm-ngram")][["goose speedup", "peer speedup"]].isna().all()  # a window has no clock
    assert "sglang-ngram" not in set(t.index.get_level_values("peer"))  # not run: no row, no made-up one
    said = capsys.readouterr().out
    assert "no rows of sglang-ngram, llamacpp-ngram-simple, sglang-ngram-budget, pld, goose-suffix: not compared" \
        in said


def test_rows_without_a_production_drafter_are_refused_in_one_line(tmp_path):
    _run(tmp_path / "r", "goose", "60", 10, 4)
    with pytest.raises(SystemExit, match=r"these rows have no production drafter \(sglang-ngram.*make reproduce-prod"):
        production_peers(load_rows(tmp_path / "r"))
    _run(tmp_path / "s", "vllm-ngram", "fixed", 20, 4)
    with pytest.raises(SystemExit, match="these rows have no GOOSE"):
        production_peers(load_rows(tmp_path / "s"))


def test_the_page_says_what_it_read_what_it_ran_on_and_what_is_missing(tmp_path):
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 4)
    _run(root, "vllm-ngram", "fixed", 20, 4)
    md, csv = write(load_rows(root), tmp_path / "out")
    text = md.read_text()
    assert md.name == "production-peers.md" and csv.exists()
    assert "Measured: 2026-12-06 on: cpu with 1 thread; float32; models m (abcdef01). Rows read: 8" in text
    assert "Not run yet (no production drafter's rows): m on mbpp, classeval, gsm8k, mt_bench." in text
    assert "Not timed yet: m on mbpp, classeval, gsm8k, mt_bench." in text  # the clock says what it lacks too
    assert "Timed in part" not in text
    assert "PLD (the research drafter" in text and "not counted in the tallies" in text
    assert "- GOOSE B=60 against peers at defaults (n 4 a cell): interval above 0 / below 0, per production drafter: " \
        "vllm-ngram ahead in 1, " \
        "behind in 0 of 1" in text
    assert text == write(load_rows(root), tmp_path / "again")[0].read_text()  # the same bytes from the same rows
    assert "Every timed configuration's speedup is at most its tau, up to the clock's own noise (2 configurations, " \
        "8 rows; noise unmeasured" in text
    rows = load_rows(root)
    busy = rows.method.eq("vllm-ngram")  # AR's timing slowed by a busy machine: 9x over a tau of 2
    rows.loc[busy, "ar_wall_s"] = rows.loc[busy, "wall_s"] * 9.0
    flagged = write(rows, tmp_path / "busy")[0].read_text()
    assert "**Not trustworthy yet:** 1 of 2 timed configurations have a speedup above their tau (vllm-ngram) by " \
        "more" in flagged
    _run(root, "llamacpp-ngram-simple", "fixed", 40, 4)  # tau 1: AR's work, timed up to 6% faster than AR: the noise
    rows = load_rows(root)
    same = rows.method.eq("llamacpp-ngram-simple")
    rows.loc[same, "speedup"] = [1.06, 1.0, 0.97, 1.02]
    rows.loc[same, "ar_wall_s"] = rows.loc[same, "wall_s"] * rows.loc[same, "speedup"]
    vllm = rows.method.eq("vllm-ngram")
    rows.loc[vllm, "ar_wall_s"] = rows.loc[vllm, "wall_s"] * [2.3, 2.0, 1.9, 2.0]  # one prompt 15% above tau 2
    quiet = write(rows, tmp_path / "noisy")[0].read_text()
    assert "Every timed configuration's speedup is at most its tau, up to the clock's own noise (3 configurations, " \
        "12 rows; noise +6.0%, the largest speedup over AR of the 4 rows that did AR's work, tau 1), as on a quiet " \
        "machine." in quiet  # pooled: 2.05x over tau 2, within 6%
    rows.loc[vllm, "ar_wall_s"] = rows.loc[vllm, "wall_s"] * 2.3  # every prompt 15% above: beyond it
    assert "**Not trustworthy yet:** 1 of 3 timed configurations" in write(rows, tmp_path / "beyond")[0].read_text()


@pytest.mark.integration
def test_the_committed_page_is_what_the_committed_rows_give(tmp_path):
    """docs/results/production-peers.md and production_peers.csv are the artifact of the committed rows it reads
    (results/production-peers-local with the claims sweep's, results/claims-local), by this checkout's code."""
    root = Path(__file__).resolve().parents[2]
    folders = ["results/production-peers-local", "results/claims-local"]
    head = subprocess.run(["git", "-C", str(root), "archive", "HEAD", *folders], capture_output=True)
    if head.returncode != 0:
        pytest.skip(f"no committed rows to read (not a git checkout?): {head.stderr.decode().strip()}")
    tarfile.open(fileobj=io.BytesIO(head.stdout)).extractall(tmp_path, filter="data")
    out = tmp_path / "artifact"
    make("production_peers", load_rows([tmp_path / f for f in folders]), out)
    for name in ("production-peers.md", "production_peers.csv"):
        assert (out / name).read_bytes() == (root / "docs" / "results" / name).read_bytes(), (
            f"docs/results/{name} is not what the committed rows give: regenerate it (python -m "
            "goose.analysis.reproduce production_peers --results results/production-peers-local results/claims-local "
            "--out docs/results) and commit it with the rows")


def test_the_clock_times_stopped_runs_against_stopped_runs_only(tmp_path):
    """GOOSE timed on whole answers (the claims' clock) is no peer of a drafter timed on answers stopped at their
    first loop: each clock reading pairs runs of one kind."""
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 4)  # whole answers, timed
    _run(root, "vllm-ngram", "fixed", 20, 4, stop=True)  # stopped, timed
    t = production_peers(load_rows(root))
    assert t[t.reading.isin([CLOCK, CLOCK_STOPPED])].empty
    _run(root, "goose", "60", 8, 4, stop=True)
    t = production_peers(load_rows(root)).set_index(["reading", "peer"])
    clock = t.loc[(CLOCK_STOPPED, "vllm-ngram")]
    assert clock.n == 4 and clock["goose speedup"] == pytest.approx(5.0) and clock["peer speedup"] == pytest.approx(2.0)
    assert (CLOCK, "vllm-ngram") not in t.index


def test_the_whole_answer_clock_says_what_timing_it_costs(tmp_path):
    """Whole answers not timed yet: the page says what timing them costs, from the rows' own clocks (each prompt: its
    answer's core seconds plus AR's at the stopped clock's AR seconds per token), over the stopped clock's n."""
    root = tmp_path / "r"
    for method, forwards in (("goose", 10), ("vllm-ngram", 20)):
        _run(root, method, "60", forwards, 4, stop=True)  # timed, stopped: AR 0.1 s a token, n = 4
        _run(root, method, "60", forwards, 5, timed=False)  # whole, untimed
    rows = load_rows(root)
    whole = ~rows.config_hash.str.endswith("loopstop")
    rows.loc[whole, "wall_s"] = 896.0  # + 40 tokens x 0.1 s of AR: 900 s a prompt, 4 prompts, 2 configurations
    text = write(rows, tmp_path / "out")[0].read_text()
    assert "Timing the 2 whole-answer configurations not yet timed on all 4 prompts costs about 2.0 core-hours" \
        in text.split("## Clock, whole answers\n")[1]
    goose = whole & rows.method.eq("goose")  # GOOSE's whole answers timed now: vllm-ngram's are left
    rows.loc[goose, ["speedup", "ar_wall_s"]] = 4.0
    rows.loc[goose, "speedup_source"] = "interleaved"
    assert "Timing the 1 whole-answer configuration not yet timed on all 4 prompts costs about 1.0 core-hours" \
        in write(rows, tmp_path / "again")[0].read_text()
    part = rows.copy()  # GOOSE timed on 3 prompts, fewer than the stopped clock's 4: the sweep times it anew
    part.loc[goose & part.prompt_id.astype(str).isin(["0", "1"]), "speedup"] = float("nan")
    assert "Timing the 2 whole-answer configurations not yet timed on all 4 prompts costs about 2.0 core-hours" \
        in write(part, tmp_path / "part")[0].read_text()
    rows = pd.concat([rows, rows.assign(model="n", config_hash=rows.config_hash + "n")], ignore_index=True)  # model 2
    assert "costs about 2.0 core-hours (m 1.0, n 1.0) by the rows' own clocks" in \
        write(rows, tmp_path / "twice")[0].read_text()


def test_at_budget_auto_a_peer_is_read_at_its_defaults_and_at_its_own_budget_auto(tmp_path):
    """GOOSE B=auto against each peer at its defaults (what a practitioner switches from) and, where it ran them, at
    its own budget=auto runs (pruned as GOOSE's are); the table says which, and the tallies count them apart."""
    root = tmp_path / "r"
    _run(root, "goose", "auto", 10, 4)  # tau 4
    _run(root, "vllm-ngram", "fixed", 20, 6)  # tau 2, more prompts
    _run(root, "vllm-ngram", "auto", 5, 4)  # tau 8
    _run(root, "llamacpp-ngram-mod", "fixed", 40, 4)  # tau 1, no auto run
    rows = load_rows(root)
    t = production_peers(rows).set_index(["reading", "peer", "peer budget"])
    assert (t.loc[(WHOLE, "vllm-ngram", "auto")][["peer tau", "n"]] == [8.0, 4]).all()
    assert (t.loc[(WHOLE, "vllm-ngram", "fixed")][["peer tau", "n"]] == [2.0, 4]).all()
    assert t.loc[(WHOLE, "llamacpp-ngram-mod", "fixed")]["peer tau"] == 1.0
    assert (WHOLE, "llamacpp-ngram-mod", "auto") not in t.index
    text = write(rows, tmp_path / "out")[0].read_text()
    assert "- GOOSE B=auto against peers at defaults (n 4 a cell): interval above 0 / below 0, per production " \
        "drafter: vllm-ngram ahead in 1, behind in 0 of 1; llamacpp-ngram-mod ahead in 1, behind in 0 of 1." in text
    assert "- GOOSE B=auto against peers at their auto (n 4 a cell): interval above 0 / below 0, per production " \
        "drafter: vllm-ngram ahead in 0, behind in 1 of 1." in text


def test_the_clock_says_which_cells_it_has_timed_in_part(tmp_path):
    root = tmp_path / "r"
    for method, forwards in (("goose", 10), ("vllm-ngram", 20), ("llamacpp-ngram-mod", 30)):
        _run(root, method, "60", forwards, 4)
    for method, forwards in (("goose", 10), ("vllm-ngram", 20)):  # mbpp: the third drafter not timed yet
        _run(root, method, "60", forwards, 4, benchmark="mbpp")
    _run(root, "goose", "60", 10, 4, benchmark="gsm8k")  # GOOSE alone timed (the claims sweep's clock): not yet
    _run(root, "vllm-ngram", "fixed", 20, 4, benchmark="gsm8k", timed=False)
    text = write(load_rows(root), tmp_path / "out")[0].read_text()
    assert "Not timed yet: m on classeval, gsm8k, mt_bench. Timed in part (configurations timed, of the most any " \
        "cell has): m on mbpp (2 of 3)." in text


def test_a_tally_states_the_n_of_its_own_cells(tmp_path):
    """PLD is shown beside the production drafters, not tallied: its larger n is not the tally's."""
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 6)
    _run(root, "vllm-ngram", "fixed", 20, 4)
    _run(root, "pld", "fixed", 20, 6)
    text = write(load_rows(root), tmp_path / "out")[0].read_text()
    assert "- GOOSE B=60 against peers at defaults (n 4 a cell): interval above 0 / below 0, per production " \
        "drafter: vllm-ngram ahead" in text


def test_the_page_opens_with_the_answer_per_reading_and_where_goose_is_behind(tmp_path):
    """In short: ahead / behind / cells against each production drafter per reading and budget, then a sentence
    per budget naming where GOOSE is behind, or that it is behind nowhere."""
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 4)  # tau 4
    _run(root, "goose", "auto", 10, 4)  # tau 4
    _run(root, "vllm-ngram", "fixed", 20, 4)  # tau 2: GOOSE ahead at both budgets
    _run(root, "sglang-ngram", "fixed", 5, 4)  # tau 8: GOOSE behind at both budgets
    _run(root, "sglang-ngram", "auto", 20, 4)  # tau 2: at budget=auto the peer's own auto runs, GOOSE ahead
    text = write(load_rows(root), tmp_path / "out")[0].read_text()
    short = text.split("## In short\n")[1].split("\n## ")[0]
    rows = re.sub(" +", " ", short)  # the table's padding is to_markdown's
    assert "| reading | GOOSE B | peers at | n a cell | sglang-ngram | vllm-ngram | llamacpp-ngram-mod |" in rows
    assert "| whole answer (tau) | 60 | defaults | 4 | 0 / 1 of 1 | 1 / 0 of 1 | not run |" in rows
    assert "| whole answer (tau) | auto | their auto | 4 | 1 / 0 of 1 | not run |" in rows
    assert "GOOSE B=60's interval lies below 0 against sglang-ngram (defaults) in 1 of 1 cells (window (tau)); " \
        "sglang-ngram (defaults) in 1 of 1 cells (whole answer (tau)); sglang-ngram (defaults) in 1 of 1 cells " \
        "(clock, whole answer)." in short
    assert "GOOSE's own speedup over AR by this CPU's clock: B=60 4.00x to 4.00x (median 4.00x, 1 cells with a peer " \
        "timed; clock, whole answer); B=auto 4.00x to 4.00x" in short
    # against vLLM alone, GOOSE is behind nowhere
    text = write(load_rows(root).query("method != 'sglang-ngram'"), tmp_path / "again")[0].read_text()
    assert "GOOSE B=auto's interval lies below 0 against no production drafter in any cell, in any reading." in text


def test_a_cell_without_an_interval_is_not_counted_as_read(tmp_path):
    """n = 1 has no interval: the tally says so instead of counting it among the cells read."""
    root = tmp_path / "r"
    _run(root, "goose", "60", 10, 4)
    _run(root, "vllm-ngram", "fixed", 20, 4)
    _run(root, "goose", "60", 10, 1, benchmark="mbpp")
    _run(root, "vllm-ngram", "fixed", 20, 1, benchmark="mbpp")
    text = write(load_rows(root), tmp_path / "out")[0].read_text()
    assert "vllm-ngram ahead in 1, behind in 0 of 1 (+1 without an interval)" in text


def test_what_rows_ran_on_names_torch_and_the_versions_of_drafting_code():
    rows = pd.DataFrame({"timed_at": ["2026-12-06T10:00"] * 4 + [float("nan")], "device_name": ["cpu"] * 5,
                         "threads": [1] * 5, "dtype": ["float32"] * 5, "model": ["m"] * 5,
                         "model_fingerprint": ["abcdef0123"] * 5, "torch": ["2.13.0+cpu"] * 5,
                         "method": ["goose", "goose", "pld", "pld", "tr"],
                         "code_fingerprint": ["c1", "c2", "p", "p", ""]})
    assert ran_on(rows) == ("Measured: 2026-12-06 on: cpu with 1 thread; float32; torch 2.13.0+cpu; models m "
                            "(abcdef01); drafting code: one version a method, except goose (2) (column "
                            "code_fingerprint; 1 rows predate it)")
