"""Every artifact on any rows: it writes what the rows hold, taking the one budget and concurrency they have (and
saying so in its title), or refuses in one line saying what it needs and which command makes it; never a crash.
Fixture rows are written as runs write them (storage.result_files.ResultsFile)."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import unit_keeps
from fixture_rows import put, readme_sweep

from goose.analysis.artifacts import ARTIFACTS, REGISTRY, make
from goose.analysis.load import load_rows

FOLDERS = {
    "ar only": lambda root: put(root, "ar", budget="fixed"),
    "budget=auto only": readme_sweep,
    "concurrency 4 only": lambda root: [put(root, m, budget="60", concurrency=4) for m in ("goose", "pld")],
    "sampled only": lambda root: put(root, "goose", budget="60", temperature=0.7),
}


@pytest.mark.parametrize("folder", unit_keeps(FOLDERS, {"budget=auto only"}))  # the README's sweep
@pytest.mark.parametrize("name", ARTIFACTS)
def test_every_artifact_writes_or_says_in_one_line_what_it_needs(name, folder, tmp_path):
    FOLDERS[folder](tmp_path / "r")
    df = load_rows(tmp_path / "r")
    try:
        paths = make(name, df, tmp_path / "out")
    except SystemExit as e:
        msg = e.code
        assert isinstance(msg, str) and msg.startswith(f"{name}: ") and "\n" not in msg, msg
        assert "`" in msg or "--" in msg, f"no command to make the rows: {msg}"
        return
    assert paths and all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_the_readme_sweeps_rows_give_its_figures_at_the_budget_they_have(tmp_path):
    """budget=auto rows only (the README's sweep): the artifacts that read one budget take `auto` and say so."""
    readme_sweep(tmp_path / "r")
    df = load_rows(tmp_path / "r")
    for name in ("figure1", "figure4", "spine_continuation", "source_gap", "all_methods"):
        assert make(name, df, tmp_path / "out"), name
    assert "(budget=auto)" in (tmp_path / "out" / "source_gap.md").read_text().splitlines()[0]
    fig = REGISTRY["figure1"].make(df)  # the figure make() saved has the budget appended to its title
    from goose.analysis.artifacts import _retitle

    _retitle(fig, " (budget=auto)")
    assert fig.axes[0].get_title().splitlines()[0].endswith("(budget=auto)")
    with pytest.raises(SystemExit, match=r"^table1: no rows of iso3, iso5 at budget auto .*`make reproduce-table1`$"):
        make("table1", df, tmp_path / "out")
    with pytest.raises(SystemExit, match=r"^budget_sweep: needs .* at numeric budgets .*budget auto"):
        make("budget_sweep", df, tmp_path / "out")


def test_one_budget_or_concurrency_is_taken_from_the_rows_else_asked_for(tmp_path, capsys):
    root = tmp_path / "r"
    for m in ("goose", "pld"):
        put(root, m, budget="60", concurrency=4)
    make("all_methods", load_rows(root), tmp_path / "out")
    assert "(concurrency 4)" in (tmp_path / "out" / "all_methods.md").read_text().splitlines()[0]
    with pytest.raises(SystemExit, match="^claims: needs rows at concurrency 1"):  # the claims are batch-1 claims
        make("claims", load_rows(root), tmp_path / "out")
    put(root, "goose", budget="20")
    put(root, "goose", budget="30")
    df = load_rows(root)
    with pytest.raises(SystemExit, match="^figure1: reads one budget and the rows have 20, 30: give --budget"):
        make("figure1", df[df.concurrency == 1], tmp_path / "out")
    make("figure1", df, tmp_path / "out", budget="30")  # asked: concurrency 1 of 1 and 4, budget 30 of three
    assert "left out 4 row(s) at concurrency 4" in capsys.readouterr().out
    put(root, "goose")  # budget=auto beside the numbers: of several budgets, the paper's 60 is read
    make("source_gap", load_rows(root), tmp_path / "out", concurrency=4)
    assert "(budget=60, concurrency 4)" in (tmp_path / "out" / "source_gap.md").read_text().splitlines()[0]


def test_of_several_configurations_in_a_cell_one_is_read_and_said(tmp_path, capsys):
    """The committed claims rows hold GOOSE timed on 3 prompts beside GOOSE untimed on 10: a figure of speedups
    reads the timed one, a tau table the one with more prompts, each saying which (never both pooled)."""
    root = tmp_path / "r"
    put(root, "goose", budget="60", prompts=3)
    put(root, "goose", budget="60", prompts=5, speedup_reference="none")
    put(root, "iso3", budget="60", prompts=5)
    put(root, "iso5", budget="60", prompts=5)
    df = load_rows(root)
    capsys.readouterr()
    make("figure4", df, tmp_path / "out")
    said = capsys.readouterr().out
    assert "figure4: goose B=60 ran several configurations in smollm2-135m / humaneval: read " \
           "speedup_reference=interleaved (timed), not speedup_reference=none" in said
    t = make("table1", df, tmp_path / "out")[2]
    assert "read speedup_reference=none (most prompts), not speedup_reference=interleaved" in capsys.readouterr().out
    assert pd.read_csv(t).n.dropna().tolist() == [5]  # GOOSE's 5 prompts, not the 3 of the timed run, nor 8 pooled


def test_reproduce_closes_with_what_was_written_and_what_not(tmp_path, capsys):
    from goose.analysis.reproduce import main

    readme_sweep(tmp_path / "r")
    argv = ["figure1", "table1", "budget_sweep", "all_methods", "--results", str(tmp_path / "r"), "--out",
            str(tmp_path / "out")]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (f"written to {tmp_path / 'out'}: figure1 (budget=auto), all_methods; not written: table1 (no "
                    "rows of iso3, iso5 at budget auto); budget_sweep (needs goose, tr, iso3, iso5 at numeric budgets)")
    main(["figure1", "--results", str(tmp_path / "r"), "--out", str(tmp_path / "out")])
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"written to {tmp_path / 'out'}: figure1 (budget=auto)"


def test_a_figure_of_rows_without_speedups_says_what_they_lack_before_the_target(tmp_path):
    """figure4 on tau-only rows (a claims sweep's: speedup_reference=none): what the rows lack first, then what
    makes it, never only "run make reproduce-figure4"."""
    put(tmp_path / "r", "goose", budget="60", speedup_reference="none", prompts=3)
    with pytest.raises(SystemExit, match=r"^figure4: these goose rows have no speedup \(3 rows speedup_reference="
                                         r"none: tau only\); time them with speedup_reference=interleaved, or run "
                                         r"`make reproduce-figure4`$"):
        make("figure4", load_rows(tmp_path / "r"), tmp_path / "out")
