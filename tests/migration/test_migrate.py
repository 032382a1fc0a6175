"""Identity before moves (#47): a method's config hash is its registered name and its Config's values, never its
drafter class's module path; `python -m goose.migration.migrate` re-keys folders written under the old hash (row
schema 4) so they resume, refusing what it cannot verify or would merge, and never leaving a half-migrated folder."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import hash_of, spec_of, unit_keeps

MFP, PFP = "mfp", "pfp"  # made-up fingerprints: the migrator reads them from config.yaml, never from a model


# --- the hash ------------------------------------------------------------------------------------------------
def test_moving_a_drafter_class_to_another_module_keeps_its_config_hash(tmp_path, monkeypatch):
    from goose.methods.goose import GooseDrafter

    before = hash_of("method=goose")
    saved = GooseDrafter.__module__, GooseDrafter.__qualname__
    try:  # the same class, moved: its module (and its place in it) changed
        GooseDrafter.__module__, GooseDrafter.__qualname__ = "goose.drafters.goose", "tree.GooseDrafter"
        assert spec_of("method=goose").method.target == "goose.drafters.goose.tree.GooseDrafter"
        assert hash_of("method=goose") == before
    finally:
        GooseDrafter.__module__, GooseDrafter.__qualname__ = saved
    # a copy in another module, named by the method config's _target_
    (tmp_path / "moved_drafters.py").write_text("from goose.methods.goose import GooseDrafter as _Goose\n\n\n"
                                                "class GooseDrafter(_Goose):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    moved = ("method=goose", "method.drafter._target_=moved_drafters.GooseDrafter")
    assert hash_of(*moved) == before
    # the import path stays, as provenance: config.yaml (and W&B) record what ran
    assert spec_of(*moved).plain_section("method")["drafter"]["_target_"] == "moved_drafters.GooseDrafter"


def test_moving_a_benchmark_loader_keeps_its_config_hash(tmp_path, monkeypatch):
    """A loader is code too: the prompts it reads are hashed by content, so moving it keeps the folders."""
    before = hash_of("benchmark=gsm8k")
    (tmp_path / "moved_loaders.py").write_text("from goose.benchmarks.builtin import gsm8k  # noqa: F401\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert hash_of("benchmark=gsm8k", "benchmark.loader._target_=moved_loaders.gsm8k") == before
    assert hash_of("benchmark=gsm8k") != hash_of("benchmark=gsm8k", "benchmark.paper_max_new_tokens=7")


def test_the_hash_still_covers_the_methods_name_and_every_config_value():
    assert hash_of("method=goose") != hash_of("method=goose", "+method.drafter.rho=0.25")
    assert hash_of("method=goose") != hash_of("method=goose-no-bigram")  # one class, two registered methods
    assert hash_of("method=goose") != hash_of("method=spine-only")


def test_the_legacy_hash_is_the_one_schema_4_wrote():
    """Pinned: what the code before #47 (commit 24c71ef) computed for these configurations and fingerprints. If
    this fails, the fields of the config hash changed: schema-4 folders no longer verify, and the migrator
    refuses them (it never guesses)."""
    from goose.storage.run_folder import legacy_config_hash

    # the import paths those folders recorded (before the files moved into goose's rooms): drafter and loader
    pld, goose, tr = (f"{m}Drafter" for m in ("baselines.pld.PromptLookup", "goose.spine_tree.Goose",
                                                "baselines.token_recycling.TokenRecycling"))
    loader = "benchmark.loader._target_=goose.benchmark_loaders.humaneval"
    assert legacy_config_hash(spec_of("method=pld", loader), MFP, PFP, "dfp", ["a", "b"], target=pld) == "7a4ff9f3bf51"
    assert legacy_config_hash(spec_of("method=goose", "concurrency=4", loader), MFP, PFP, "dfp", ["a", "b"],
                              target=goose) == "1bbb460aa7cf"
    assert legacy_config_hash(spec_of("method=tr", "memory=run", loader), MFP, PFP, "dfp", target=tr) == "fa030a565889"
    # the recorded import path is what schema 4 hashed: another one is another key
    spec = spec_of("method=pld", loader)
    assert legacy_config_hash(spec, MFP, PFP, "dfp", ["a", "b"], target="baselines.old.PromptLookupDrafter") != (
        "7a4ff9f3bf51")


# --- a schema-4 folder, as the code before #47 wrote it -------------------------------------------------------
def old_folder(root: Path, *overrides, target: str | None = None, n: int = 2, name: str | None = None,
               batch: list[str] | None = None):
    """A run folder as row schema 4 left it: config.yaml (identity row_schema 4, the drafter's import path
    `target`), results.csv rows and outputs records under the schema-4 key (at concurrency > 1 computed over
    `batch`, the prompts the run was asked for), summaries. Returns (folder, spec)."""
    from omegaconf import OmegaConf

    from goose.core.identity import ModelIdentity
    from goose.storage.result_files import OutputsFile, ResultsFile
    from goose.storage.row_schema import flat
    from goose.storage.run_folder import RunIdentity, default_run_dir, legacy_config_hash, write_config
    from goose.storage.run_records import write_summary

    spec = spec_of(*overrides, f"results_dir={root}")
    target = target or spec.method.target
    key = legacy_config_hash(spec, MFP, PFP, "", batch, target=target)
    folder = default_run_dir(spec, "m", key) if name is None else Path(root) / name
    folder.mkdir(parents=True)
    write_config(folder, spec, RunIdentity(ModelIdentity("m", MFP, "m.gguf", "hf", ""), PFP, "", key))
    config = OmegaConf.load(folder / "config.yaml")
    config.identity.row_schema = 4
    config.method.drafter._target_ = target
    (folder / "config.yaml").write_text(OmegaConf.to_yaml(config))
    results, outputs = ResultsFile(folder / "results.csv"), OutputsFile(folder / "outputs.jsonl")
    for i in range(n):
        results.append({"model": "m", "benchmark": spec.benchmark.name, "method": spec.method.name,
                        "prompt_id": f"p{i}", "new_tokens": 3, "steps": 2, "tau": 1.5, "lossless": True,
                        "timed_at": f"{key}-{i}",  # two runs' rows differ (a run's rows hold its timings)
                        "config_hash": key, "model_fingerprint": MFP, "prompts_fingerprint": PFP,
                        **spec.settings("row"), **flat("method", spec.plain_section("method")), "row_schema": 4})
        outputs.append(f"p{i}", key, f"q{i}", [1, 2, 3], ["a", "b", "c"], ["bonus", "spine", "bonus"], [0.5] * 3)
    write_summary(folder, {"method": spec.method.name, "prompts": n, "config_hash": key, "run_dir": str(folder)})
    return folder, spec


def new_key(spec) -> str:
    from goose.core.identity import ModelIdentity
    from goose.storage.run_folder import config_hash

    return config_hash(spec, ModelIdentity("m", MFP, "", "hf", ""), PFP, "")


def migrate(capsys, *paths, code=0):
    from goose.migration.migrate import main

    rc = main([str(p) for p in paths])
    out = capsys.readouterr().out
    assert rc == code, out
    return out


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and p.name != ".lock"}


def read_back(folder: Path):
    from goose.storage.result_files import OutputsFile, ResultsFile

    results, outputs = ResultsFile(folder / "results.csv"), OutputsFile(folder / "outputs.jsonl")
    rows, records = results.rows(), outputs.read()
    assert not results.damaged and not outputs.damaged
    return rows, records


# --- the migrator ---------------------------------------------------------------------------------------------
def test_a_schema_4_folder_is_re_keyed_and_a_second_run_changes_nothing(tmp_path, capsys):
    from omegaconf import OmegaConf

    from goose.running.runner import finished

    old, spec = old_folder(tmp_path, "method=goose")
    (old / "trace.jsonl").write_text('{"prompt_id": "p0"}\n')  # anything else comes along as it is
    key = new_key(spec)
    out = migrate(capsys, tmp_path)
    new = old.with_name(spec.folder_name(key))
    assert "re-keyed 1 folder(s)" in out and f"renamed to {new.name}" in out and "references/" not in out
    assert not old.exists() and new.is_dir()
    assert not [p for p in new.parent.iterdir() if p.name.startswith(".")]  # no copy or old folder left
    rows, records = read_back(new)
    assert [r["config_hash"] for r in rows] == [key, key] and {r["row_schema"] for r in rows} == {"5"}
    assert {r["config_hash"] for r in records.values()} == {key}
    from goose.storage.result_files import OutputsFile

    assert finished(rows, OutputsFile(new / "outputs.jsonl"), key) == {"p0", "p1"}  # a rerun resumes both
    config = OmegaConf.load(new / "config.yaml")
    assert config.identity.config_hash == key and config.identity.row_schema == 5
    assert config.method.drafter._target_ == "goose.methods.goose.GooseDrafter"  # provenance, as recorded
    summary = json.loads((new / "summary.json").read_text())
    assert summary["config_hash"] == key and summary["run_dir"] == str(new)
    assert key in (new / "summary.csv").read_text()
    assert (new / "trace.jsonl").read_text() == '{"prompt_id": "p0"}\n'
    before = snapshot(tmp_path)
    again = migrate(capsys, tmp_path)
    assert again.strip() == "nothing to change: 1 folder(s) already keyed by row schema 5; 0 refused; 0 skipped"
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("method", unit_keeps(["goose", "goose-no-bigram", "spine-only"], {"goose"}))
def test_a_folder_of_a_moved_drafter_class_is_re_keyed_through_its_registered_name(tmp_path, capsys, method):
    """The recorded import path no longer imports (the class moved): the class is the one the method config of
    the same name names now, and the key is verified with the recorded path. An ablation names its drafter only
    through its config's `defaults:` (found by migrating the claims sweep's folders after the move)."""
    old, spec = old_folder(tmp_path, f"method={method}", target="goose.spine_tree.GooseDrafter")
    out = migrate(capsys, tmp_path)
    assert "re-keyed 1 folder(s)" in out
    rows, _ = read_back(old.with_name(spec.folder_name(new_key(spec))))
    assert len(rows) == 2
    assert "0 refused" in migrate(capsys, tmp_path)  # keyed now, and still recognized


def test_references_and_timings_are_left_as_they_are(tmp_path, capsys):
    old_folder(tmp_path, "method=pld")
    ref = tmp_path / "references" / "ab" / "abc.json"
    timing = tmp_path / "references" / "timings" / "ab" / "abc.jsonl"
    for p, text in ((ref, '{"tokens": [1]}'), (timing, '{"wall_s": 1.0}\n')):
        p.parent.mkdir(parents=True)
        p.write_text(text)
    out = migrate(capsys, tmp_path)
    assert "references/ (AR tokens) and references/timings/ (AR timings) left as they are" in out
    assert ref.read_text() == '{"tokens": [1]}' and timing.read_text() == '{"wall_s": 1.0}\n'


def test_two_old_folders_of_one_configuration_are_never_merged(tmp_path, capsys):
    """Before and after a class moved: two schema-4 keys, one schema-5 key. Neither is migrated."""
    a, spec = old_folder(tmp_path, "method=goose")
    b, _ = old_folder(tmp_path, "method=goose", target="goose.elsewhere.GooseDrafter", n=1)
    assert a != b
    before = snapshot(tmp_path)
    out = migrate(capsys, tmp_path, code=1)
    assert sum(x.startswith("refused") for x in out.splitlines()) == 2
    assert "are one configuration under schema 5" in out and "not merged" in out
    assert snapshot(tmp_path) == before
    # one moved away: the other is migrated; the moved one, put back, finds its new name taken by other rows
    shutil.move(b, tmp_path / "aside")
    migrate(capsys, a.parent)
    shutil.move(tmp_path / "aside", b)
    out = migrate(capsys, tmp_path, code=1)
    assert "already holds rows of its schema-5 key" in out and "not merged" in out and b.is_dir()
    rows, _ = read_back(a.with_name(spec.folder_name(new_key(spec))))
    assert len(rows) == 2


def test_a_folder_a_run_is_writing_is_refused(tmp_path, capsys):
    from goose.storage.result_files import RunLock

    old, _ = old_folder(tmp_path, "method=pld")
    before = snapshot(tmp_path)
    with RunLock(old):
        out = migrate(capsys, tmp_path, code=1)
    assert "refused" in out and "is writing" in out and "migrate it once that run has ended" in out
    assert snapshot(tmp_path) == before
    assert "re-keyed 1 folder(s)" in migrate(capsys, tmp_path)
    new = next(p for p in old.parent.iterdir())
    with RunLock(new):  # a run of the new code writing its folder: nothing to migrate, nothing refused
        assert "nothing to change: 1 folder(s) already keyed by row schema 5; 0 refused" in migrate(capsys, tmp_path)


@pytest.mark.parametrize("damage", ["edited row", "damaged outputs", "edited config", "rows of another key"])
def test_a_folder_whose_rows_or_key_do_not_verify_is_refused_and_left_as_it_is(tmp_path, capsys, damage):
    old, _ = old_folder(tmp_path, "method=pld")
    if damage == "edited row":
        text = (old / "results.csv").read_text()
        (old / "results.csv").write_text(text.replace(",1.5,", ",9.5,", 1))
    elif damage == "damaged outputs":
        text = (old / "outputs.jsonl").read_text()
        (old / "outputs.jsonl").write_text(text.replace('"q0"', '"q9"'))
    elif damage == "edited config":
        text = (old / "config.yaml").read_text()
        (old / "config.yaml").write_text(text.replace("max_new_tokens: 64", "max_new_tokens: 65"))
    else:
        from goose.storage.result_files import ResultsFile

        ResultsFile(old / "results.csv").append({**read_back(old)[0][0], "config_hash": "0123456789ab"})
    before = snapshot(tmp_path)
    out = migrate(capsys, tmp_path, code=1)
    line = [x for x in out.splitlines() if x.startswith("refused")]
    assert len(line) == 1, out
    assert {"edited row": "damaged row", "damaged outputs": "damaged outputs line",
            "edited config": "neither schema 4's nor schema 5's",
            "rows of another key": "rows of another configuration"}[damage] in line[0]
    assert snapshot(tmp_path) == before


def test_folders_it_cannot_read_as_schema_4_are_skipped(tmp_path, capsys):
    old, _ = old_folder(tmp_path, "method=pld")
    (old / "config.yaml").unlink()
    ancient = tmp_path / "m" / "humaneval" / "ar" / "B60-0123456789ab"
    ancient.mkdir(parents=True)
    (ancient / "results.csv").write_text("model,prompt_id,config_hash\nm,p0,0123456789ab\n")
    (ancient / "config.yaml").write_text("identity:\n  config_hash: 0123456789ab\n")
    before = snapshot(tmp_path)
    out = migrate(capsys, tmp_path)
    assert "no config.yaml" in out and "rows written before row schema 4" in out and "2 skipped" in out
    assert snapshot(tmp_path) == before


def test_a_pinned_run_dir_keeps_its_name(tmp_path, capsys):
    old, spec = old_folder(tmp_path, "method=pld", name="my-run")
    out = migrate(capsys, tmp_path)
    assert "name kept (a pinned run_dir)" in out
    rows, _ = read_back(old)
    assert {r["config_hash"] for r in rows} == {new_key(spec)}
    assert [p.name for p in tmp_path.iterdir()] == ["my-run"]


class Killed(BaseException):
    """A kill at a chosen point: nothing after it runs, no cleanup either."""


@pytest.mark.parametrize("at", ["building", "after the new folder is in place", "removing the old folder"])
def test_an_interrupted_migration_leaves_whole_folders_and_a_rerun_finishes_it(tmp_path, capsys, monkeypatch, at):
    import goose.migration.migrate as m
    import goose.migration.rekey as rekey

    old, spec = old_folder(tmp_path, "method=goose")
    new = old.with_name(spec.folder_name(new_key(spec)))
    if at == "building":
        monkeypatch.setattr(rekey, "_summaries", lambda plan, tmp: (_ for _ in ()).throw(Killed()))
    elif at == "after the new folder is in place":
        real = rekey.os.rename

        def rename(a, b):
            real(a, b)
            if Path(b) == new:
                raise Killed()

        monkeypatch.setattr(rekey.os, "rename", rename)
    else:
        real = m.shutil.rmtree

        def rmtree(path, *a, **k):
            if Path(path).name.endswith(m.REPLACED) and Path(path).exists():
                raise Killed()
            return real(path, *a, **k)

        monkeypatch.setattr(m.shutil, "rmtree", rmtree)
    with pytest.raises(Killed):
        m.main([str(tmp_path)])
    monkeypatch.undo()
    # every folder a reader sees is whole: the old one, the new one, or both
    visible = [p for p in old.parent.iterdir() if not p.name.startswith(".")]
    assert visible and all(read_back(p)[0] for p in visible)
    assert {p.name for p in visible} == {"building": {old.name}, "after the new folder is in place":
                                         {old.name, new.name}, "removing the old folder": {new.name}}[at]
    out = migrate(capsys, tmp_path)
    assert sorted(p.name for p in old.parent.iterdir()) == [new.name]
    rows, _ = read_back(new)
    assert len(rows) == 2 and {r["config_hash"] for r in rows} == {new_key(spec)}
    if at == "after the new folder is in place":
        assert "already held its re-keyed rows (an interrupted migration): removed the old folder" in out
    else:
        assert "interrupted migration" in out
    assert "nothing to change" in migrate(capsys, tmp_path)


def test_schema_4_rows_upgrade_through_the_row_adapter_and_the_analysis_reads_both(tmp_path, capsys):
    from goose.analysis.load import load_rows
    from goose.storage.row_schema import ROW_SCHEMA, rekeyed, upgrade

    assert ROW_SCHEMA == 5
    row = {"prompt_id": "p0", "config_hash": "aaaaaaaaaaaa", "memory": "", "trial": "2", "row_schema": "4",
           "row_check": "x"}
    assert upgrade(row) == row  # schema 4 lacks no column: its key stays its key until it is migrated
    assert rekeyed(row, "bbbbbbbbbbbb") == {**{k: v for k, v in row.items() if k != "row_check"},
                                            "config_hash": "bbbbbbbbbbbb", "row_schema": "5"}
    with pytest.raises(ValueError):
        rekeyed({"prompt_id": "p0"}, "bbbbbbbbbbbb")  # rows before schema 4 are never re-keyed
    old_folder(tmp_path / "migrated", "method=pld")
    old_folder(tmp_path / "left", "method=goose")
    migrate(capsys, tmp_path / "migrated")
    df = load_rows(tmp_path)
    assert len(df) == 4 and set(df.method) == {"pld", "goose"}
    assert sorted(df.row_schema.astype(int)) == [4, 4, 5, 5]


def test_the_runner_names_the_migrator_for_a_pinned_folder_of_schema_4_rows(tmp_path):
    from goose.errors import GooseError
    from goose.storage.run_folder import check_one_configuration

    with pytest.raises(GooseError, match="python -m goose.migration.migrate"):
        check_one_configuration([{"config_hash": "aaaaaaaaaaaa", "row_schema": "4"}], tmp_path, "bbbbbbbbbbbb")


# --- end to end -----------------------------------------------------------------------------------------------
@pytest.mark.integration
@pytest.mark.parametrize("extra", [[], ["concurrency=2", "speedup_reference=none"]], ids=["c1", "c2"])
def test_a_folder_written_before_the_change_resumes_with_nothing_to_go(tiny_folder, prompt_file, tmp_path,
                                                                       run_goose, monkeypatch, capsys, extra):
    """The acceptance test of #47: the run writes its folder as the code before the change did (schema 4: the
    drafter's import path in the hash), the migrator re-keys it, and the same command then decodes nothing."""
    import goose.running.rows
    import goose.running.runner
    import goose.storage.row_schema
    import goose.storage.run_folder
    from goose.storage.run_folder import legacy_config_hash

    args = ["model=hf", f"model.path={tiny_folder}", "method=goose", "benchmark=jsonl", f"benchmark.path={prompt_file}",
            "max_new_tokens=12", "n_prompts=3", f"results_dir={tmp_path}", *extra]
    with monkeypatch.context() as old_code:
        old_code.setattr(goose.running.runner, "config_hash", lambda spec, model, pfp, dfp, batch=None:
                         legacy_config_hash(spec, model.fingerprint, pfp, dfp, batch,
                                                            target=spec.method.target))
        old_code.setattr(goose.storage.row_schema, "ROW_SCHEMA", 4)
        old_code.setattr(goose.running.rows, "ROW_SCHEMA", 4)
        old_code.setattr(goose.storage.run_folder, "ROW_SCHEMA", 4)
        summary, _ = run_goose(*args)
    old = Path(summary["run_dir"])
    assert old.name.endswith(summary["config_hash"]) and {r["row_schema"] for r in read_back(old)[0]} == {"4"}
    out = migrate(capsys, tmp_path)
    assert "re-keyed 1 folder(s)" in out
    summary, out = run_goose(*args)
    assert "resuming: 3 row(s) already in" in out and "0 prompt(s) to go" in out
    assert Path(summary["run_dir"]).parent == old.parent and not old.exists()
    assert summary["prompts"] == 3 and summary["lossless"] == 3


@pytest.mark.integration
@pytest.mark.parametrize("machine", ["same", "fresh", "other"])
def test_a_rest_run_keyed_by_its_datastores_build_time_is_re_keyed_and_resumes(tiny_folder, prompt_file, tmp_path,
                                                                              run_goose, capsys, monkeypatch, machine):
    """Until 2026-12-07 REST's datastore held its build time in meta.json: the data fingerprint in REST's keys changed
    with every rebuild, and once a datastore is settled (the time moved into a hidden file) runs keyed before are not
    resumed. The migrator finds a build time that explains the recorded key and re-keys the folder under today's
    content; the same command then decodes nothing. `same`: the build the run read, settled since; `fresh`: a
    rebuild of the same corpus on a fresh machine, whose build time the old one is searched for; `other`: a
    datastore of other content, which explains nothing: the folder is left as it is, and the migrator says why."""
    from tiny import byte_tokenizer

    import goose.baselines.rest_datastore as rest
    from goose.core.fingerprints import digest, path_fingerprint
    from goose.errors import GooseError
    from goose.migration.legacy import read_outputs

    corpus, ds = tmp_path / "corpus", tmp_path / "ds"
    corpus.mkdir()
    (corpus / "a.py").write_text("def f0(x):\n    return x + x + x + 0\n" * 6)
    rest.build(byte_tokenizer(), "tiny", str(corpus), ds, None, 10_000)
    (ds / rest.BUILD).unlink()  # as the builds before wrote it: the time in meta.json
    meta = json.loads((ds / "meta.json").read_text())
    (ds / "meta.json").write_text(json.dumps({**meta, "build_s": 4321.7}, indent=2))
    args = ["model=hf", f"model.path={tiny_folder}", "method=rest", f"rest_datastore={ds}", "benchmark=jsonl",
            f"benchmark.path={prompt_file}", "max_new_tokens=12", "n_prompts=2", "budget=60",
            f"results_dir={tmp_path / 'r'}"]
    with monkeypatch.context() as old_code:
        old_code.setattr(rest, "settle", lambda folder: None)  # the code before: nothing settled
        first, _ = run_goose(*args)
    timed = path_fingerprint(ds)
    if machine == "same":
        rest.settle(ds)
    else:
        shutil.rmtree(ds)
        if machine == "other":
            (corpus / "a.py").write_text("def g(y):\n    return y * 2\n" * 6)
        rest.build(byte_tokenizer(), "tiny", str(corpus), ds, None, 10_000)
    assert path_fingerprint(ds) != timed
    if machine == "fresh":  # the folder pinned before the migration: the refusal names the migrator
        with pytest.raises(GooseError, match="datastore: if it was built before 2026-12-07.*goose.migration.migrate"):
            run_goose(*args, f"run_dir={first['run_dir']}")
    out = migrate(capsys, tmp_path / "r")
    if machine == "other":
        assert "left" in out and "keyed by other content of its datastore" in out and "nothing to change" in out
        assert Path(first["run_dir"]).is_dir()
        return
    assert "re-keyed 1 folder(s)" in out and "a build time of 4321.7 s in meta.json" in out, out
    second, out = run_goose(*args)
    assert "resuming: 2 row(s) already in" in out and "0 prompt(s) to go" in out, out
    assert second["config_hash"] != first["config_hash"] and not Path(first["run_dir"]).exists()
    rows, _ = read_back(Path(second["run_dir"]))
    records = read_outputs(Path(second["run_dir"]) / "outputs.jsonl")
    assert len(rows) == 2 and {r["data_fingerprint"] for r in rows} == {digest({"datastore": path_fingerprint(ds)})}
    assert {o["config_hash"] for o in records} == {second["config_hash"]}
    assert "nothing to change" in migrate(capsys, tmp_path / "r")  # a second run changes nothing


def test_a_legacy_loader_path_is_resolved_quietly(tmp_path, prompt_file, capsys, caplog):
    """Rows of the claims sweep name the loader where it was (goose.benchmark_loaders.*): the migration succeeded
    while Hydra printed "Error getting callable at goose.benchmark_loaders... ModuleNotFoundError ... Are you sure";
    and a concurrency > 1 key, computed over the benchmark's prompts, did not verify. The loader is the benchmark
    config's of the same name now, found without a word."""
    loader = "benchmark.loader._target_=goose.benchmark_loaders.jsonl"
    old, spec = old_folder(tmp_path, "method=pld", "benchmark=jsonl", f"benchmark.path={prompt_file}", loader,
                           "concurrency=2", "n_prompts=null", batch=["p0", "p1", "p2", "p3"])
    caplog.clear()
    out = migrate(capsys, tmp_path)
    err = capsys.readouterr().err
    said = out + err + caplog.text
    assert "re-keyed 1 folder(s)" in out and "0 refused" in out, said
    assert "Error getting callable" not in said and "ModuleNotFoundError" not in said and "Are you sure" not in said
    assert not old.exists() and len(read_back(next(old.parent.iterdir()))[0]) == 2


def test_a_dry_run_writes_nothing_not_even_a_lock(tmp_path, capsys):
    """--dry-run said it changed nothing and left a .lock in every folder."""
    from goose.storage.result_files import RunLock

    old, _ = old_folder(tmp_path, "method=pld")
    old_folder(tmp_path, "method=goose")
    before = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")}
    from goose.migration.migrate import main

    assert main(["--dry-run", str(tmp_path)]) == 0
    assert "would re-key 2 folder(s)" in capsys.readouterr().out
    assert not list(tmp_path.rglob(".lock")) and {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*")} == before
    with RunLock(old):  # a run holds one: a dry run still says so (and takes nothing)
        assert main(["--dry-run", str(tmp_path)]) == 1
        assert "is writing" in capsys.readouterr().out
    assert main([str(tmp_path)]) == 0  # the real run takes its locks, as before
    (tmp_path / "empty").mkdir()  # a user's trial: a folder with no runs was "0 folder(s) already keyed"
    assert main(["--dry-run", str(tmp_path / "empty")]) == 0
    assert "no run folders (a folder holding results.csv) under" in capsys.readouterr().out
