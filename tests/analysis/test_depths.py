"""Claim 1 at each depth (goose.analysis.claims.depths) and the window's counts (goose.analysis.loops): the ratio at a
depth pools the prompts that drafted both sources there; a row that carries its window's counts is read on them,
one that does not keeps none (never the whole answer's)."""

import numpy as np
import pandas as pd
import pytest

from goose.analysis import loops
from goose.analysis.claims.depths import depth_table
from goose.analysis.loops import parse


def test_parse_reads_the_rows_format():
    assert parse("1:62/182;2:35/143;7+:3/40") == {"1": (62, 182), "2": (35, 143), "7+": (3, 40)}
    assert parse(float("nan")) == {} and parse("") == {}


def _cell(spines, branches):
    n = len(spines)
    return pd.DataFrame({"method": "goose", "budget": "60", "config_hash": "h", "prompt_id": range(n),
                         "spine_by_depth": spines, "branch_by_depth": branches, "settings": ""})


def test_each_depth_pools_the_prompts_that_drafted_both_sources_there(monkeypatch):
    monkeypatch.setattr("goose.analysis.claims.depths.pick", lambda cell, method: cell)
    spines = ["1:5/10;2:2/10", "1:4/10;2:1/10", "1:6/10", "1:5/10;2:3/10"]
    branches = ["1:1/10;2:1/20", "1:1/10;2:1/20", "1:1/10;2:1/20", "1:2/10"]
    t = depth_table({("m", "b"): _cell(spines, branches)}).set_index("depth")
    assert t.loc["1", "n"] == 4 and t.loc["2", "n"] == 2  # prompt 3 drafted no spine at 2, prompt 4 no branch
    assert t.loc["1", "spine acceptance"] == pytest.approx(20 / 40)
    assert t.loc["1", "branch acceptance"] == pytest.approx(5 / 40)
    assert t.loc["1", "spine / branch [95% CI]"].startswith("4.0x [")
    assert t.loc["2", "spine / branch [95% CI]"] == "3.0x (no interval: n = 2, below 3)"
    assert t.loc["2", "size"] == "inconclusive"


def test_a_row_is_read_in_its_window_on_its_window_counts_and_an_older_one_on_none():
    rows = pd.DataFrame({"spine_accepted": [50.0, 40.0, 1.0], "spine_drafted": [100.0, 90.0, 1.0],
                         "branch_accepted": [5.0, 4.0, 1.0], "branch_drafted": [80.0, 70.0, 1.0],
                         "accepted": [55.0, 44.0, 1.0], "drafted": [180.0, 160.0, 1.0],
                         "loop_free_spine_by_depth": ["1:3/4;2:1/4", np.nan, ""],
                         "loop_free_branch_by_depth": [np.nan, np.nan, ""]})
    for c in ("spine_accepted", "spine_drafted", "branch_accepted", "branch_drafted", "accepted", "drafted"):
        rows[c] = np.nan  # what loop_free blanks before it fills
    out = loops._window_counts(rows.copy())
    assert out.loc[0, ["spine_accepted", "spine_drafted", "branch_accepted", "branch_drafted"]].tolist() == \
        [4.0, 8.0, 0.0, 0.0]
    assert out.loc[0, "accepted"] == 4.0 and out.loc[0, "drafted"] == 8.0
    assert out.loc[0, "spine_by_depth"] == "1:3/4;2:1/4"
    for old in (1, 2):  # no window counts (blank, read as NaN or ""): none, never the whole answer's nor zero
        assert out.loc[old, ["spine_accepted", "drafted"]].isna().all()
