"""Code is part of identity (#58): every row records the fingerprint of the code that drafted and verified it
(goose.storage.code_identity), and a run refuses to resume rows of other code (an edited drafter) in one line,
until told (accept_other_code=true, recorded) or a ledger entry declares the two codes equivalent."""

import csv
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODULE = "edited_drafter"  # the copied user drafter: a name of its own, never docs/examples' repeat_drafter


@pytest.fixture
def user(tmp_path, monkeypatch):
    """docs/examples' drafter copied into a user folder (module edited_drafter, method `edited`), imported from
    there; each edit is re-imported as it would be by a new process."""
    folder = tmp_path / "mine"
    (folder / "method").mkdir(parents=True)
    shutil.copy(ROOT / "docs" / "examples" / "repeat_drafter.py", folder / f"{MODULE}.py")
    (folder / "method" / "edited.yaml").write_text(f"name: edited\ndrafter:\n  _target_: {MODULE}.RepeatDrafter\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # an edit of equal size in the same second: no stale .pyc
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield folder
    sys.modules.pop(MODULE, None)


def edit(folder: Path, old: str, new: str) -> None:
    path = folder / f"{MODULE}.py"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    sys.modules.pop(MODULE, None)  # the next import reads the edited file, as a new process would
    importlib.invalidate_caches()


def fingerprint() -> str:
    from goose.storage.code_identity import code_fingerprint

    sys.modules.pop(MODULE, None)
    return code_fingerprint(importlib.import_module(MODULE).RepeatDrafter)


CODE_EDIT = ("range(min(self.config.length, self.config.budget - 1))", "range(min(self.config.length, 2))")


def test_the_fingerprint_sees_code_edits_but_not_comments_or_docstrings(user):
    first = fingerprint()
    assert len(first) == 12 and int(first, 16) >= 0
    edit(user, "# the method's hyperparameter, its default here", "# another comment\n\n")
    edit(user, '"""An example drafter', '"""A rewritten docstring: an example drafter')
    edit(user, "    def propose(self, context):", '    def propose(self, context):\n        """Says what it does."""')
    assert fingerprint() == first
    edit(user, *CODE_EDIT)
    changed = fingerprint()
    assert changed != first
    # the goose code it builds on counts too: a drafter's fingerprint is not its file's alone
    from goose.storage.code_identity import _FILES

    assert {"goose.drafting.tree", "goose.engine.single", "goose.running.loop", MODULE} <= set(_FILES)


# --- end to end on the tiny model (about a second each; the runner drives them, so the integration tier) ---------
def rows(folder: Path) -> list[dict]:
    with open(folder / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture
def go(user, tiny_folder, prompt_file, tmp_path, capsys):
    """Runs method=edited as `python run.py` would (exit status, stdout, stderr, the run folder)."""
    from hydra import compose, initialize_config_dir

    from goose.running.runner import exit_status, run

    def call(*extra, n=2):
        args = [f"hydra.searchpath=[file://{user}]", "method=edited", "model=hf", f"model.path={tiny_folder}",
                "benchmark=jsonl", f"benchmark.path={prompt_file}", f"n_prompts={n}", "max_new_tokens=8",
                "speedup_reference=none", "warmup=0", f"results_dir={tmp_path / 'res'}", *extra]
        with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=args)
        sys.modules.pop(MODULE, None)  # each run imports the drafter's file as it is now, as a new process would
        summary = {}
        status = exit_status(lambda: summary.update(run(cfg) or {}))
        out = capsys.readouterr()
        found = sorted((tmp_path / "res" / "model" / "jsonl" / "edited").glob("*"))
        return status, out.out, out.err, (found[0] if len(found) == 1 else None)

    return call


@pytest.mark.integration
def test_an_unedited_rerun_still_resumes_with_nothing_to_go(go):
    status, _, _, folder = go()
    assert status == 0
    written = rows(folder)
    assert len({r["code_fingerprint"] for r in written}) == 1 and len(written[0]["code_fingerprint"]) == 12
    status, out, _, _ = go()
    assert status == 0 and "resuming: 2 row(s) already in" in out and "0 prompt(s) to go" in out
    assert "other code" not in out and rows(folder) == written


@pytest.mark.integration
def test_an_edited_drafter_is_refused_in_one_line_before_anything_is_decoded(go, user, monkeypatch):
    status, _, _, folder = go()
    assert status == 0
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}
    edit(user, *CODE_EDIT)
    monkeypatch.setattr("goose.running.runner.decoding_for", lambda spec: pytest.fail("decoded after a refusal"))
    status, out, err, _ = go(n=3)
    assert status == 2 and "resuming" not in out
    old, line = rows(folder)[0]["code_fingerprint"], err.strip()
    assert "\n" not in line and line.startswith(f"error: {folder} holds 2 row(s) of this configuration written by "
                                                f"other code (code fingerprint {old}; this code is ")
    assert "another results_dir=..." in line and "accept_other_code=true" in line
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != ".lock"}
    assert after == before  # nothing written, the config.yaml included


@pytest.mark.integration
def test_accept_other_code_resumes_and_records_that_it_did(go, user):
    status, _, _, folder = go()
    old = rows(folder)[0]["code_fingerprint"]
    edit(user, *CODE_EDIT)
    status, out, _, _ = go("accept_other_code=true", n=3)
    assert status == 0 and "resuming: 2 row(s)" in out and "1 prompt(s) to go" in out
    assert "accept_other_code=true: 2 row(s) of other code" in out and "code-accepted.jsonl" in out
    got = rows(folder)
    new = got[2]["code_fingerprint"]
    assert [r["code_fingerprint"] for r in got] == [old, old, new] and new != old and len(new) == 12
    (record,) = [json.loads(line) for line in (folder / "code-accepted.jsonl").read_text().splitlines()]
    assert record["from"] == [old] and record["to"] == new and record["rows"] == 2
    assert record["at"].endswith("Z") and len(record["at"]) == 20
    # accepted once: the same code resumes the folder without the setting
    status, out, _, _ = go(n=3)
    assert status == 0 and "0 prompt(s) to go" in out and "accepted" in out


@pytest.mark.integration
def test_a_ledger_entry_resumes_without_the_setting_and_is_cited(go, user, tmp_path, monkeypatch):
    import goose.storage.code_identity as code_identity

    status, _, _, folder = go()
    old = rows(folder)[0]["code_fingerprint"]
    edit(user, *CODE_EDIT)
    new = fingerprint()
    ledger = tmp_path / "code-equivalence.yaml"
    ledger.write_text(f"equivalent:\n  - from: '{old}'\n    to: '{new}'\n    evidence: equality of both on p0-p2\n"
                      "    date: 2026-12-05\n")
    monkeypatch.setattr(code_identity, "LEDGER", ledger)
    status, out, err, _ = go(n=3)
    assert status == 0, err
    assert f"declared equivalent in code-equivalence.yaml: {old} -> {new} (2026-12-05: equality of both on p0-p2)" in (
        out)
    assert "1 prompt(s) to go" in out and not (folder / "code-accepted.jsonl").exists()
    assert [r["code_fingerprint"] for r in rows(folder)] == [old, old, new]


@pytest.mark.integration
def test_rows_written_before_fingerprints_are_refused_the_same_way(go, tmp_path, monkeypatch):
    import goose.storage.code_identity as code_identity
    from goose.storage.result_files import ResultsFile

    status, _, _, folder = go()
    current = rows(folder)[0]["code_fingerprint"]
    kept = rows(folder)
    (folder / "results.csv").unlink()  # as the code before this change wrote them: no code_fingerprint column
    for r in kept:
        ResultsFile(folder / "results.csv").append({k: v for k, v in r.items() if k not in ("code_fingerprint",
                                                                                             "row_check")})
    # a ledger cannot vouch for rows that recorded no code
    ledger = tmp_path / "code-equivalence.yaml"
    ledger.write_text(f"equivalent:\n  - {{from: 'aaaaaaaaaaaa', to: '{current}', evidence: x, date: 2026-12-05}}\n")
    monkeypatch.setattr(code_identity, "LEDGER", ledger)
    status, out, err, _ = go()
    assert status == 2 and "resuming" not in out
    assert err.strip() == (f"error: {folder} holds 2 row(s) of this configuration written by other code (code "
                           f"fingerprint none: written before rows recorded it; this code is {current}): the drafter "
                           "or the code that decodes and verifies it changed since. Measure this code afresh with "
                           "another results_dir=... (or run_dir=...), or keep those rows and add this code's beside "
                           "them with accept_other_code=true (recorded in code-accepted.jsonl).")
    status, out, _, _ = go("accept_other_code=true")
    assert status == 0 and "0 prompt(s) to go" in out and "none: written before rows recorded it" in out
    assert json.loads((folder / "code-accepted.jsonl").read_text())["from"] == [""]


def test_code_without_a_source_is_unknown_recorded_blank_and_never_refused(tmp_path):
    import types

    from goose.drafting.contract import Drafter
    from goose.storage.code_identity import check_code, code_fingerprint

    module = types.ModuleType("made_in_a_notebook")  # no file, and a class inspect cannot find the source of
    sys.modules[module.__name__] = module
    try:
        cls = type("Made", (Drafter,), {"__module__": module.__name__, "propose": lambda self, context: None})
        assert code_fingerprint(cls) == ""
    finally:
        del sys.modules[module.__name__]
    rows = [{"config_hash": "h", "code_fingerprint": "0123456789ab", "prompt_id": "p0"}]
    assert check_code(rows, tmp_path, "h", "", accept=False) is None and not (tmp_path / "code-accepted.jsonl").exists()


def test_a_room_the_install_maps_is_read_from_this_checkout_without_importing_it():
    """goose.baselines lives outside src/goose (pyproject.toml's package-dir): the fingerprint finds its modules
    where the install maps them, this checkout's baselines/, and imports none of them to do so."""
    import subprocess

    code = ("import sys; from goose.storage.code_identity import _locate; "
            "print(_locate('goose.baselines.pld'), _locate('goose.baselines'), "
            "'goose.baselines' in sys.modules, 'goose.baselines.pld' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "tests", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [str(ROOT / "baselines" / "pld.py"), str(ROOT / "baselines" / "__init__.py"),
                                "False", "False"]
