"""The docs cannot go stale silently: the README is short, every page it names exists, and every command the
docs show is checked (tests/docs_commands.py): settings and values of run.py commands, scripts' flags, make
targets."""

import re
import subprocess
from pathlib import Path

import pytest
from docs_commands import DOCS, ROOT, check, commands

COMMANDS = commands()


def test_the_readme_is_short_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 10_000
    for doc in DOCS:
        placeholder = re.search(r"\b[A-Z]+_(?:OUTPUT|PLACEHOLDER)\b|\bTODO\b|\bTBD\b|to fill later", doc.read_text())
        assert not placeholder, f"{doc.relative_to(ROOT)} shows a placeholder ({placeholder.group()}), not real text"
        for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).is_file(), f"{doc.name} links to {target}, which does not exist"


def test_the_docs_show_commands_and_every_one_is_checked():
    assert len(COMMANDS) > 40
    where = {w for w, _ in COMMANDS}
    assert "README.md" in where and any(w.startswith("docs/results/") for w in where)


@pytest.mark.parametrize("where, command", COMMANDS, ids=[f"{w}: {c[:60]}" for w, c in COMMANDS])
def test_a_command_in_the_docs_is_valid(where, command, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "docs" / "examples"))  # the example drafter of docs/adding.md
    check(command)


def test_every_row_column_is_documented():
    from goose.storage.row_schema import COLUMNS, TAIL

    text = (ROOT / "docs" / "rows.md").read_text()
    from goose.running.spec import SETTINGS

    missing = [c.name for c in (*COLUMNS, *TAIL) if f"`{c.name}`" not in text]
    missing += [s.key for s in SETTINGS if s.row and f"`{s.key}`" not in text]
    assert not missing, f"docs/rows.md does not describe {missing}"


def test_every_results_page_says_when_and_on_what_it_was_measured():
    for page in sorted((ROOT / "docs" / "results").glob("*.md")):
        head = page.read_text()[:600]
        assert re.search(r"Measured: \d{4}-\d{2}-\d{2}", head), f"{page.name} gives no date"
        assert "on:" in head.lower(), f"{page.name} does not say what it ran on"


def test_the_readme_leads_with_the_claims_scorecards_summary():
    from goose.analysis.claims.page import summary_block

    readme = (ROOT / "README.md").read_text()
    scorecard = (ROOT / "docs" / "results" / "claims.md").read_text()
    assert readme.index("## What replicates") < readme.index("## Set up")
    assert summary_block(readme) == summary_block(scorecard) != ""


def test_the_test_tiers_are_described_once_and_make_test_runs_each():
    """docs/testing.md's table is where the tiers are described; `make test` runs exactly the tiers the table marks
    as in it, in that order, each with its own target's selection, and says in one line which it skipped and how to
    run it; CI (.ci/run) runs `make test`, then each skipped tier's target; every pytest marker is one of them (the
    unit tier is what no marker selects)."""
    table = (ROOT / "docs" / "testing.md").read_text()
    rows = re.findall(r"^\| (\w+) \| `make test-(\w+)` \| (yes|no)\b[^|]*\|", table, re.M)
    assert rows and all(name == target for name, target, _ in rows), rows
    tiers = [name for name, _, in_test in rows if in_test == "yes"]
    skipped = [name for name, _, in_test in rows if in_test == "no"]
    makefile = (ROOT / "Makefile").read_text()

    def recipe(target: str) -> str:
        found = re.search(rf"^{re.escape(target)}:(.*)\n((?:\t.*\n)+)", makefile, re.M)
        assert found, f"the Makefile has no target {target}"
        return found.group(1), found.group(2)

    def selections(target: str) -> list[str]:
        return re.findall(r"^\t\$\(TIER\) -m (.+)$", recipe(target)[1], re.M)

    assert selections("test") == [s for name in tiers for s in selections(f"test-{name}")]
    said = [line for line in recipe("test")[1].splitlines() if line.startswith("\t@echo")]
    assert len(said) == 1 and all(f"make test-{name}" in said[0] for name in skipped), said
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make ")]
    assert ci == ["make test", *(f"make test-{name}" for name in skipped)], ci
    assert "set -euo pipefail" in (ROOT / ".ci" / "run").read_text()
    declared = re.search(r"^markers = \[(.*?)\]$", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    markers = set(re.findall(r'"(\w+):', declared))
    assert markers == {name for name, _, _ in rows} - {"unit"}
    (unit,) = selections("test-unit")
    assert set(re.findall(r"not (\w+)", unit)) == markers and unit.count(" and ") == len(markers) - 1


def test_make_test_installs_no_system_package():
    """`make test` and what it depends on never reach apt-get (the slurm tier's packages are `make test-slurm`'s)."""
    makefile = (ROOT / "Makefile").read_text()

    def needs(target: str, seen: set) -> set:
        found = re.search(rf"^{re.escape(target)}:([^=\n]*)$", makefile, re.M)
        if not found or target in seen:
            return seen
        seen.add(target)
        for dep in found.group(1).split():
            needs(dep, seen)
        return seen

    reached = needs("test", set())
    assert "slurm-packages" not in reached, reached
    for target in reached:
        body = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)*)", makefile, re.M).group(1)
        run = [line for line in body.splitlines() if not re.match(r"\t@?echo ", line)]  # what it says is not run
        assert not any("apt-get" in line for line in run), target


def test_make_help_lists_every_target():
    """`make help` (and `make` alone) lists every target of the Makefile, the reproduce-% expansions included, each on
    a line of its own with what it does."""
    import os
    import shutil
    import subprocess

    if not shutil.which("make"):
        pytest.skip("needs make")
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", makefile, re.M).group(1).replace("\\\n", " ").split()
    targets = {*phony, *re.findall(r"^([a-z][\w-]*):", makefile, re.M),
               *(f"reproduce-{k}" for k in re.findall(r"^EXPERIMENT_([\w-]+) =", makefile, re.M))}
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    outs = [subprocess.run(["make", "-s", *goal, "PYTHON=false"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                           env=env) for goal in (["help"], [])]
    assert all(r.returncode == 0 for r in outs) and outs[0].stdout == outs[1].stdout, outs[1].stderr
    listed = {m.group(1): m.group(2) for m in re.finditer(r"^  ([a-z][\w-]*) +(\S.*)$", outs[0].stdout, re.M)}
    assert not targets - set(listed), f"make help does not list {sorted(targets - set(listed))}"
    assert set(listed) <= targets, f"make help lists what is no target: {sorted(set(listed) - targets)}"


def test_help_fits_a_terminal():
    """`python run.py --help`'s lines fit 120 columns (a long default, the experiments' list, the environment)."""
    from goose.help import render

    long = [line for line in render().replace("$$", "$").splitlines() if len(line) > 120]
    assert not long, long


def _readme_sweep(root):
    """The rows the README's sweep writes (its methods, budget, benchmarks and n_prompts), as fixture rows, and
    the README's section that shows them: its commands and its outputs."""
    from fixture_rows import put

    readme = (ROOT / "README.md").read_text()
    start = readme.index("**A sweep, its table and a figure**")
    section = readme[start:readme.index("\n## ", start)]
    commands_, *outputs = re.findall(r"```(?:bash)?\n(.*?)```", section, re.S)
    sweep = dict(w.split("=", 1) for w in next(c for c in commands_.splitlines()
                                                 if c.startswith("python run.py -m")).split()[3:])
    for method in sweep["method"].split(","):
        for bench in sweep["benchmark"].split(","):
            put(root, method, budget=sweep["budget"], bench=bench, prompts=int(sweep["n_prompts"]))
    return sweep["results_dir"], commands_.splitlines(), outputs


def test_the_readmes_sweep_table_and_figure_commands_give_what_it_shows(tmp_path, capsys):
    """The README's table and figure commands, run on rows like its sweep's: the table has the columns the README
    shows, and the figure command's last line is the README's, word for word."""
    from goose.analysis.reproduce import main

    results, lines, (table, closing) = _readme_sweep(tmp_path / "r")
    runs = [c for c in lines if c.startswith("python -m goose.analysis.reproduce")]
    assert len(runs) == 2 and all(f"--results {results}" in c for c in runs)
    for command in runs:
        out = command.split("--out ")[1].split()[0]
        argv = command.replace(f"--results {results}", f"--results {tmp_path / 'r'}").replace(
            f"--out {out}", f"--out {tmp_path / 'out'}").split()[3:]
        capsys.readouterr()
        main(argv)  # every artifact written: no exit
        said = capsys.readouterr().out.replace(str(tmp_path / "out"), out)
        if "all_methods" in argv:
            header = next(x for x in said.splitlines() if x.startswith("| model"))
            assert header == table.splitlines()[0]
        else:
            assert said.strip().splitlines()[-1] == closing.strip()


@pytest.mark.integration
@pytest.mark.parametrize("where, command", [(w, c) for w, c in COMMANDS if "jupyter execute" in c],
                         ids=[f"{w}: {c[:60]}" for w, c in COMMANDS if "jupyter execute" in c])
def test_a_notebook_command_in_the_docs_runs(where, command, tmp_path):
    """The docs' `jupyter execute` commands, as a user types them, on rows like the README's sweep (in a copy of
    the notebook's folder, so that --output writes there)."""
    import os
    import shutil
    import subprocess
    import sys

    from docs_commands import split_env

    _readme_sweep(tmp_path / "rows")
    (tmp_path / "analysis").mkdir()
    shutil.copy(ROOT / "analysis" / "figures.ipynb", tmp_path / "analysis")
    env, words = split_env(command)
    env = {**os.environ, **env, "GOOSE_RESULTS": "rows", "GOOSE_ARTIFACTS": str(tmp_path / "art"), "PWD": str(tmp_path)}
    jupyter = shutil.which("jupyter", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run([jupyter, *words[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "art" / "figure1.png").exists() and (tmp_path / "art" / "all_methods.csv").exists()


def test_make_help_says_the_tier_times_docs_testing_states():
    """The tiers' times in `make help` are docs/testing.md's (its "about N minutes"), and test-fast's is unit and
    integration together, so a measurement recorded in one place cannot leave the other behind."""
    table = (ROOT / "docs" / "testing.md").read_text()
    out = subprocess.run(["make", "--no-print-directory", "help", "PYTHON=python3"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    said = {t: re.search(rf"^  test-{t}\s+.*?(?:about|under) (\d+) min", out, re.M) for t in
            ("unit", "integration", "slow", "fast")}
    for tier in ("integration", "slow"):
        documented = re.search(rf"^\| {tier} \|.*\| about (\d+) minutes \(", table, re.M)
        assert documented and said[tier] and said[tier].group(1) == documented.group(1), tier
    seconds = [float(s) for s in re.findall(r"^\| (?:unit|integration) \|.*?: (\d+) s, \d+ tests\) \|$", table, re.M)]
    assert len(seconds) == 2 and said["fast"] and int(said["fast"].group(1)) == round(sum(seconds) / 60)
