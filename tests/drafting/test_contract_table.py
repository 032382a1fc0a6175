"""The drafter contract as documented is the contract as coded: the table in docs/engine.md names every public
member of `Drafter` and nothing else, and AR is AR because it says so (capabilities.autoregressive), not because
of how it drafts."""

import re
from pathlib import Path

from goose.drafting.contract import Drafter

ROOT = Path(__file__).resolve().parents[2]
PARTS = {"declared", "core", "core (must)", "concurrency", "`memory=run`", "`budget=auto`", "`trace=true`",
         "token data"}


def contract_table() -> dict[str, str]:
    """Member -> its part, from the first table of docs/engine.md's drafter-contract section (a row may name
    several members: `save_memory()` / `restore_memory(saved)`)."""
    text = (ROOT / "docs" / "engine.md").read_text()
    section = text.split("## The drafter contract", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows and rows[0].split("|")[1].strip() == "member", "the contract table's first column is `member`"
    out = {}
    for row in rows[2:]:  # past the header and its rule
        cells = [c.strip() for c in row.strip("|").split("|")]
        names = [re.match(r"\w+", code).group() for code in re.findall(r"`([^`]+)`", cells[0])]
        assert names, f"a contract table row names no member: {row}"
        for name in names:
            assert name not in out, f"{name} is in the contract table twice"
            out[name] = cells[1]
    return out


def members(cls: type) -> set[str]:
    """The public members a drafter may set or override: attributes, methods, properties."""
    return {n for n in vars(cls) if not n.startswith("_")}


def test_the_contract_table_names_every_member_of_the_drafter_and_nothing_else():
    table = contract_table()
    missing = sorted(members(Drafter) - set(table))
    unknown = sorted(set(table) - members(Drafter))
    assert not missing, f"docs/engine.md's contract table does not describe Drafter.{missing}"
    assert not unknown, f"docs/engine.md's contract table names {unknown}, which Drafter does not have"
    assert {p for p in table.values()} <= PARTS, f"unknown parts: {set(table.values()) - PARTS}"
    assert table["propose"] == "core (must)"
    assert {"spawn", "share_with", "skipped", "stop", "save_memory", "restore_memory"} <= set(table)


def test_the_check_sees_a_member_missing_from_the_table(monkeypatch):
    """The table check is not vacuous: a member added to the class without a row is found."""
    monkeypatch.setattr(Drafter, "forget_everything", lambda self: None, raising=False)
    assert members(Drafter) - set(contract_table()) == {"forget_everything"}


def test_docs_adding_names_every_member_a_method_may_implement():
    text = (ROOT / "docs" / "adding.md").read_text()
    unnamed = sorted(n for n in members(Drafter) if f"`{n}`" not in text and f"`{n}(" not in text)
    assert not unnamed, f"docs/adding.md does not say whether a method implements {unnamed}"


def test_every_registered_method_but_ar_is_timed_against_ar(store):
    from conftest import drafter_for

    from goose.running.registry import method_names

    for name in method_names():
        d, _ = drafter_for(name, extra=[f"rest_datastore={store}"])
        assert d.capabilities.autoregressive == (name == "ar"), name
