"""The docs cannot go stale silently: the README is short, every page it names exists, and every command the
docs show is checked (tests/docs_commands.py): settings and values of run.py commands, scripts' flags, make
targets."""

import re

import pytest
from docs_commands import DOCS, ROOT, check, commands

COMMANDS = commands()


def test_the_readme_is_short_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) < 10_000
    assert not re.search(r"\b[A-Z]+_OUTPUT\b", readme), "the README shows a placeholder instead of real output"
    for doc in DOCS:
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
    from goose.analysis.scorecard import summary_block

    readme = (ROOT / "README.md").read_text()
    scorecard = (ROOT / "docs" / "results" / "claims.md").read_text()
    assert readme.index("## What replicates") < readme.index("## Set up")
    assert summary_block(readme) == summary_block(scorecard) != ""


def test_the_test_tiers_are_described_once_and_make_test_runs_each():
    """docs/testing.md's table is where the tiers are described; `make test` (what CI runs) runs exactly those
    tiers, in that order, each with its own target's selection, and every pytest marker is one of them (the unit
    tier is what no marker selects)."""
    tiers = re.findall(r"^\| (\w+) \| `make test-(\w+)` \|", (ROOT / "docs" / "testing.md").read_text(), re.M)
    assert tiers and all(name == target for name, target in tiers), tiers
    makefile = (ROOT / "Makefile").read_text()

    def selections(target: str) -> list[str]:
        recipe = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", makefile, re.M)
        assert recipe, f"the Makefile has no target {target}"
        return re.findall(r"^\t\$\(TIER\) -m (.+)$", recipe.group(1), re.M)

    assert selections("test") == [s for name, _ in tiers for s in selections(f"test-{name}")]
    declared = re.search(r"^markers = \[(.*?)\]$", (ROOT / "pyproject.toml").read_text(), re.M | re.S).group(1)
    markers = set(re.findall(r'"(\w+):', declared))
    assert markers == {name for name, _ in tiers} - {"unit"}
    (unit,) = selections("test-unit")
    assert set(re.findall(r"not (\w+)", unit)) == markers and unit.count(" and ") == len(markers) - 1
