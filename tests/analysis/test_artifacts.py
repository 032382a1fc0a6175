"""Artifacts regenerated from a fixture CSV; numbers recomputed independently from raw rows."""

import random
from pathlib import Path

import pandas as pd
import pytest

from goose.analysis.artifacts import make
from goose.analysis.load import load_rows
from goose.analysis.pooling import by
from goose.analysis.tables import table1, table2
from goose.storage.result_files import ResultsFile

ROOT = Path(__file__).resolve().parents[2]
# Timing provenance of a row whose AR timing was taken beside it (speedup_reference=interleaved).
SAME_RUN = {"speedup_source": "interleaved", **{f"{p}{k}": v for p in ("", "ar_") for k, v in
            {"host": "h", "threads": 2, "torch": "2.13.0", "backend": "eager", "device_name": "cpu",
             "sweep_id": "s"}.items()}}
METHODS = ["ar", "goose", "iso3", "iso5", "goose-no-bigram", "goose-no-bypass"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    rng = random.Random(0)
    for bench in ("humaneval", "gsm8k"):
        for method in METHODS:
            f = ResultsFile(root / "smollm2-135m" / bench / method / "B60-N128" / "results.csv")
            for i in range(4):
                steps = rng.randint(20, 60) if method != "ar" else 128
                new = 128
                wall = steps * 0.05
                f.append({"model": "smollm2-135m", "benchmark": bench, "method": method, "budget": 60,
                          "prompt_id": str(i), "new_tokens": new, "steps": steps, "tau": new / steps,
                          "wall_s": wall, "tokens_per_s": new / wall, "lossless": True,
                          "config_hash": f"{method}-{bench}-60", "ar_wall_s": new / 20.0, **SAME_RUN,
                          "spine_drafted": rng.randint(50, 100),
                          "spine_accepted": rng.randint(5, 30), "branch_drafted": rng.randint(500, 900),
                          "branch_accepted": rng.randint(5, 30), "continuation_tokens": rng.randint(0, 9)})
        sweep = ResultsFile(root / "smollm2-135m" / bench / "goose" / "B16-N128" / "results.csv")
        sweep.append({"model": "smollm2-135m", "benchmark": bench, "method": "goose", "budget": 16, "prompt_id": "0",
                      "new_tokens": 128, "steps": 50, "tau": 2.56, "wall_s": 2.0, "tokens_per_s": 64,
                      "lossless": True, "config_hash": f"goose-{bench}-16", "ar_wall_s": 6.4, **SAME_RUN,
                      "spine_drafted": 1, "spine_accepted": 1,
                      "branch_drafted": 1, "branch_accepted": 0, "continuation_tokens": 0})
    return root


def test_table1_recomputed_from_raw_rows(results):
    df = load_rows(results)
    t = table1(df[df.budget == "60"])
    raw = df[df.budget == "60"]
    for bench in ("humaneval", "gsm8k"):
        row = t[t.benchmark == bench].iloc[0]
        for m in ("goose", "iso3", "iso5"):
            g = raw[(raw.benchmark == bench) & (raw.method == m)]
            assert row[m] == pytest.approx(g.new_tokens.sum() / g.steps.sum())


def by_hand(root, steps: dict[str, int]):
    """Two prompts of 120 tokens per method, `steps` forwards each: tau = 120 / steps, known in advance."""
    for method, n in steps.items():
        f = ResultsFile(root / "m" / "gsm8k" / method / "B60" / "results.csv")
        for i in range(2):
            f.append({"model": "m", "benchmark": "gsm8k", "method": method, "budget": 60, "prompt_id": str(i),
                      "new_tokens": 120, "steps": n, "tau": 120 / n, "wall_s": 1.0, "tokens_per_s": 120,
                      "lossless": True, "config_hash": method, **SAME_RUN})
    return load_rows(root)


def test_table1_and_table2_by_hand(tmp_path):
    df = by_hand(tmp_path, {"goose": 30, "iso3": 60, "iso5": 40, "goose-no-bigram": 40})  # tau 4, 2, 3, 3
    row = table1(df).iloc[0]
    assert (row["goose"], row["iso3"], row["iso5"]) == (4.0, 2.0, 3.0)
    assert row["gain_vs_iso3_%"] == pytest.approx(100.0) and row["gain_vs_iso5_%"] == pytest.approx(100 / 3)
    assert row["gain_vs_best_iso_%"] == pytest.approx(100 / 3)
    ablation = table2(df).set_index("variant").loc["no bigram tier"]
    assert ablation["tau_gsm8k"] == 3.0 and ablation["delta_gsm8k_%"] == pytest.approx(-25.0)
    assert ablation["paper_delta_%"] == -3.7  # the paper's Table 2, shown beside ours


def test_table2_deltas(results):
    df = load_rows(results)
    t = table2(df[df.budget == "60"])
    raw = df[df.budget == "60"]
    full = raw[raw.method == "goose"]
    abl = raw[raw.method == "goose-no-bigram"]
    row = t[t.variant == "no bigram tier"].iloc[0]
    expect = (abl.new_tokens.sum() / abl.steps.sum()) / (full.new_tokens.sum() / full.steps.sum()) - 1
    assert row["delta_all_%"] == pytest.approx(expect * 100)


@pytest.mark.parametrize("name", ["table1", "table2", "all_methods"])
def test_tables_written_in_three_formats(results, tmp_path, name):
    paths = make(name, load_rows(results), tmp_path)
    assert sorted(p.suffix for p in paths) == [".csv", ".md", ".tex"]
    assert all(p.stat().st_size > 100 for p in paths)
    assert "tau = generated tokens / target forwards incl. prefill" in paths[0].read_text()


@pytest.mark.parametrize("name", ["figure1", "figure4", "budget_sweep", "spine_continuation"])
def test_figures_have_axes_and_series(results, tmp_path, name):
    import matplotlib.pyplot as plt

    from goose.analysis.artifacts import FIGURE_ARTIFACTS as FIGURES

    df = load_rows(results)
    paths = make(name, df, tmp_path)
    assert [p.suffix for p in paths] == [".png", ".pdf"] and all(p.stat().st_size > 5000 for p in paths)
    fig = FIGURES[name].make(df if name == "budget_sweep" else df[df.budget == "60"])
    for ax in fig.axes:
        assert ax.get_ylabel() and ax.get_title() and ax.get_xticks().size
    if name == "figure1":
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert any("spine" in x for x in labels) and any("branch" in x for x in labels)
        assert len(fig.axes[0].patches) == 2 * 2  # spine + branch bar per (model, benchmark)
    if name == "budget_sweep":
        ax = fig.axes[0]
        assert ax.get_xlabel().startswith("budget B")
        goose = next(x for x in ax.get_lines() if x.get_label() == "goose")
        assert list(goose.get_xdata()) == [16, 60]
    plt.close("all")


def _execute_notebook(results: str, user_dir: Path, out: Path, monkeypatch):
    """analysis/figures.ipynb as `jupyter execute` runs it: the kernel in analysis/, the user's shell in
    `user_dir` (its $PWD), GOOSE_RESULTS as the user typed it."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "analysis" / "figures.ipynb", as_version=4)
    monkeypatch.setenv("PWD", str(user_dir))
    monkeypatch.setenv("GOOSE_RESULTS", results)
    monkeypatch.setenv("GOOSE_ARTIFACTS", str(out))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "analysis")}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


@pytest.mark.integration
def test_notebook_executes_headless_on_a_relative_folder(results, tmp_path, monkeypatch):
    """A mixed folder (B=60 beside a B=16 sweep point) named relative to where the user is, not to analysis/."""
    text = _execute_notebook(results.name, results.parent, tmp_path / "art", monkeypatch)
    assert (tmp_path / "art" / "figure1.png").exists() and (tmp_path / "art" / "table1.csv").exists()
    assert "figure1 (budget=60): wrote figure1.png" in text


@pytest.mark.integration
def test_notebook_executes_headless_on_budget_auto_rows(tmp_path, monkeypatch):
    from fixture_rows import readme_sweep

    readme_sweep(tmp_path / "sweep")
    text = _execute_notebook("sweep", tmp_path, tmp_path / "art", monkeypatch)
    assert "figure1 (budget=auto): wrote" in text and "figure4 (budget=auto): wrote" in text
    # the make target's hint runs into the folder read (the trial of 2026-12-06: it wrote to results/local)
    assert "table1: not written: no rows of iso3, iso5 at budget auto (run `make reproduce-table1 RESULTS=" in text
    assert "sweep`)" in text.split("table1: not written:")[1].splitlines()[0]


def test_the_notebooks_results_folder_is_found_from_the_user_then_the_checkout(tmp_path, monkeypatch):
    from goose.analysis.notebook import NotebookError, artifacts_folder, repo_root, results_folder

    (tmp_path / "mine").mkdir()
    monkeypatch.chdir(ROOT / "analysis")  # where a kernel runs
    monkeypatch.setenv("PWD", str(tmp_path))  # where the user started Jupyter
    assert repo_root() == ROOT
    assert results_folder("mine") == tmp_path / "mine"
    assert results_folder(None) == ROOT / "results" / "claims-local"  # unset: the committed rows, from the root
    assert results_folder(str(tmp_path / "mine")) == tmp_path / "mine"
    with pytest.raises(NotebookError) as e:
        results_folder("nope")
    line = e.value._render_traceback_()
    assert len(line) == 1 and line[0].startswith("error: GOOSE_RESULTS=nope: no such folder (looked in ")
    assert "--results" not in line[0] and "set GOOSE_RESULTS to the results_dir a sweep wrote" in line[0]
    assert artifacts_folder(ROOT / "results" / "claims-local") == ROOT / "results" / "claims-local" / "artifacts"
    assert artifacts_folder(tmp_path / "mine", "out") == tmp_path / "out"


def test_the_notebook_and_reproduce_write_into_one_artifacts_folder(results, tmp_path, monkeypatch):
    """One convention: <results>/artifacts, reproduce's default --out and the notebook's default, and the rows' reader
    reads nothing back from it (a table's CSV is no row)."""
    import shutil

    from goose.analysis.notebook import artifacts_folder
    from goose.analysis.reproduce import main

    copy = tmp_path / "rows"
    shutil.copytree(results, copy)
    n = len(load_rows(copy))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    main(["all_methods", "--results", str(copy)])
    assert (copy / "artifacts" / "all_methods.csv").is_file() and artifacts_folder(copy) == copy / "artifacts"
    assert len(load_rows(copy)) == n


def test_a_repeated_row_of_one_configuration_is_counted_once(results, tmp_path):
    import shutil

    copy = tmp_path / "r"
    shutil.copytree(results, copy)
    f = ResultsFile(copy / "smollm2-135m" / "gsm8k" / "goose" / "B60-N128" / "results.csv")
    first = f.rows()[0]
    f.append({**first, "steps": 1})  # the same prompt of the same configuration again
    df = load_rows(copy)
    assert len(df) == len(load_rows(results))
    sel = df[(df.benchmark == "gsm8k") & (df.method == "goose") & (df.budget == "60") & (df.prompt_id == "0")]
    assert sel.steps.tolist() == [1]


def test_rows_of_two_configurations_are_never_merged(results, tmp_path):
    import shutil

    copy = tmp_path / "r"
    shutil.copytree(results, copy)
    src = ResultsFile(copy / "smollm2-135m" / "gsm8k" / "goose" / "B60-N128" / "results.csv")
    other = ResultsFile(copy / "smollm2-135m" / "gsm8k" / "goose" / "B60-N128-fp16" / "results.csv")
    for r in src.rows():  # the same prompts in fp16: another configuration
        other.append({**r, "config_hash": "goose60fp16", "dtype": "float16", "steps": 128})
    df = load_rows(copy)
    assert len(df) == len(load_rows(results)) + 4
    t = by(df[(df.benchmark == "gsm8k") & (df.budget == "60")], ["model", "method"])
    assert sorted(set(t.model)) == ["smollm2-135m [float16]", "smollm2-135m [no dtype]"]
    fp16 = t[t.model.str.contains("float16")]
    assert fp16.prompts.tolist() == [4] and fp16.tau.tolist() == [1.0]


def test_legacy_rows_load_with_tau_and_no_speedup(tmp_path):
    f = ResultsFile(tmp_path / "smollm2-135m" / "gsm8k" / "goose" / "B60-N128" / "results.csv")
    f.append({"model": "smollm2-135m", "benchmark": "gsm8k", "method": "goose", "budget": 60, "prompt_id": "0",
              "new_tokens": 128, "steps": 40, "tau": 3.2, "wall_s": 2.0, "tokens_per_s": 64, "lossless": True,
              "ar_tokens_per_s": 20.0, "speedup": 3.2})  # written before timing provenance existed
    t = by(load_rows(tmp_path), ["model", "method"])
    assert t.tau.tolist() == [3.2] and t.speedup.isna().all()


def test_memory_modes_and_budgets_are_kept_apart(tmp_path):
    """Each (method, budget, memory) is its own row of the all-methods tables; the paper's artifacts
    read TR in its hot start and GOOSE with its table reset per prompt."""
    from goose.analysis.load import paper_settings
    from goose.analysis.tables import all_methods, suffix

    cells = {("tr", "fixed", "run"): 40, ("tr", "fixed", "prompt"): 80, ("goose", "60", "prompt"): 32,
             ("goose", "60", "run"): 30, ("goose", "auto", "prompt"): 36, ("pld", "fixed", "none"): 64,
             ("suffix", "60", "run"): 50}
    for (method, budget, memory), steps in cells.items():
        f = ResultsFile(tmp_path / "m" / "gsm8k" / method / f"B{budget}-M{memory}" / "results.csv")
        for i in range(2):
            f.append({"model": "m", "benchmark": "gsm8k", "method": method, "budget": budget, "memory": memory,
                      "prompt_id": str(i), "new_tokens": 128, "steps": steps, "tau": 128 / steps, "wall_s": 1.0,
                      "tokens_per_s": 128, "lossless": i == 0, "config_hash": f"{method}{budget}{memory}",
                      "method.drafter.memory": memory if memory != "none" else "", **SAME_RUN,
                      "memory_default": {"tr": "run", "suffix": "run", "pld": "none"}.get(method, "prompt")})
    df = load_rows(tmp_path)
    t = all_methods(df)
    got = {(m, b, mem): tau for m, b, mem, tau in zip(t.method, t.budget, t.memory, t["tau all"])}
    assert got == {k: pytest.approx(128 / v, abs=1e-3) for k, v in cells.items()}
    assert set(t.lossless) == {"1/2 (1 diverged)"}
    assert set(suffix(df).method) == {"tr", "goose", "pld", "suffix"}
    paper = paper_settings(df)
    assert sorted(set(zip(paper.method, paper.memory))) == [("goose", "prompt"), ("pld", "none"), ("suffix", "run"),
                                                            ("tr", "run")]  # each Config's default: its paper's
    out = make("suffix", df, tmp_path / "out")
    assert "auto" in out[0].read_text() and "| run " in out[0].read_text()


def test_sampling_artifacts_recomputed_and_kept_apart_from_greedy(tmp_path):
    """tau per temperature and the share of the greedy gain kept, lossless over the sampled rows only,
    and the outputs check read from the AR references; greedy artifacts never see sampled rows."""
    from goose.analysis.tables import all_methods
    from goose.analysis.temperatures import sampling, sampling_outputs
    from goose.storage.result_files import ReferenceStore

    refs = ReferenceStore(tmp_path / "references")
    answers = {  # prompt -> AR tokens per (temperature, seed)
        "p0": {(0.0, 0): [1, 2, 3], (0.7, 0): [1, 2, 4], (0.7, 1): [1, 2, 4]},
        "p1": {(0.0, 0): [5], (0.7, 0): [6], (0.7, 1): [7]},
    }
    steps = {(0.0, 0): 40, (0.7, 0): 80, (0.7, 1): 100}
    for (t, seed), n in steps.items():
        folder = f"B60-Mprompt-N128{'-T0.7-p0.95-s' + str(seed) if t else ''}"
        f = ResultsFile(tmp_path / "m" / "humaneval" / "goose" / folder / "results.csv")
        for pid, tokens in answers.items():
            key = f"{pid}-{t}-{seed}"
            refs.put(key, {"tokens": tokens[(t, seed)]})
            f.append({"model": "m", "benchmark": "humaneval", "method": "goose", "budget": 60, "memory": "prompt",
                      "prompt_id": pid, "new_tokens": 128, "steps": n, "tau": 128 / n, "wall_s": 1.0,
                      "tokens_per_s": 128, "lossless": not (t and seed == 1 and pid == "p1"),
                      "config_hash": f"h{t}{seed}", "reference_key": key, "speedup_source": "none",
                      "speedup_reference": "none" if t else "interleaved",
                      "temperature": t, "top_k": 0, "top_p": 0.95 if t else 1.0, "seed": seed})
    df = load_rows(tmp_path)
    t = sampling(df).set_index("benchmark").loc["all"]
    assert t["tau greedy"] == pytest.approx(256 / 80, abs=1e-3)
    assert t["tau T=0.7 p0.95 s0"] == pytest.approx(256 / 160, abs=1e-3)
    assert t["gain kept T=0.7 p0.95 s1 %"] == pytest.approx((256 / 200 - 1) / (256 / 80 - 1) * 100, abs=1e-3)
    lossless = [t[f"lossless {s}"] for s in ("greedy", "T=0.7 p0.95 s0", "T=0.7 p0.95 s1")]
    assert lossless == ["2/2", "2/2", "1/2 (1 diverged)"]
    out = sampling_outputs(df).set_index(["setting", "benchmark"])
    cols = ["prompts", "differs from greedy", "differs from the other seeds"]
    assert out.loc[("T=0.7 p0.95 s0", "all"), cols].tolist() == [2, "2/2", "1/2"]
    # Without the greedy run: nothing is compared with greedy, and no sampled setting is dropped.
    no_greedy = sampling_outputs(df[df.temperature > 0]).set_index(["setting", "benchmark"])
    assert no_greedy.loc[("T=0.7 p0.95 s0", "all"), cols].tolist() == [2, "0/0", "1/2"]
    greedy = make("all_methods", df, tmp_path / "art")
    # The sampled runs' speedup_reference=none does not rename the greedy method.
    assert greedy and all_methods(df[df.temperature == 0])[["method", "lossless"]].values.tolist() == [["goose", "2/2"]]
    assert "tau all" in pd.read_csv(tmp_path / "art" / "all_methods.csv") and \
        pd.read_csv(tmp_path / "art" / "all_methods.csv")["tau all"].tolist() == [pytest.approx(256 / 80, abs=1e-3)]
    assert make("sampling_figure", df, tmp_path / "art")[0].exists()


def test_hashes_and_ids_that_look_like_numbers_stay_text(tmp_path):
    """A config hash of digits and one 'e' parses as a float (inf) unless read as text: two such
    configurations would then merge and one's rows vanish; a prompt id like 007 would lose its zeros."""
    for method, chash in (("goose", "6e6088296560"), ("pld", "1e1234567890")):
        f = ResultsFile(tmp_path / "m" / "gsm8k" / method / "B60" / "results.csv")
        for pid in ("007", "7"):
            f.append({"model": "m", "benchmark": "gsm8k", "method": method, "budget": 60, "prompt_id": pid,
                      "new_tokens": 128, "steps": 32, "tau": 4.0, "wall_s": 1.0, "tokens_per_s": 128,
                      "lossless": True, "config_hash": chash, **SAME_RUN})
    df = load_rows(tmp_path)
    assert len(df) == 4 and set(df.config_hash) == {"6e6088296560", "1e1234567890"}
    assert sorted(df.prompt_id.unique()) == ["007", "7"]


def test_a_missing_or_empty_results_folder_is_one_line_saying_which(tmp_path):
    with pytest.raises(SystemExit, match="no results folder .*nope: give --results the results_dir a sweep wrote"):
        load_rows(tmp_path / "nope")
    with pytest.raises(SystemExit, match="no results.csv under .*: run a sweep into it first"):
        load_rows(tmp_path)


def test_figure1_says_where_a_source_drafted_nothing(results):
    """A cell whose spine drafted nothing had no bar and no word (a fresh-clone trial read it as a missing bar)."""
    import matplotlib.pyplot as plt

    from goose.analysis.figures import plot_figure1

    df = load_rows(results)
    df = df[(df.budget == "60") & (df.method == "goose")].copy()
    first = df.benchmark == df.benchmark.iloc[0]
    df.loc[first, ["spine_accepted", "spine_drafted"]] = 0
    texts = [t.get_text() for t in plot_figure1(df).axes[0].texts]
    assert "no spine\ndrafted" in texts and any(t.endswith("x") for t in texts)
    plt.close("all")
