"""Run folders: one configuration per folder, named for reading, keyed by the config hash."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from goose.core.fingerprints import digest, path_fingerprint
from goose.core.identity import ModelIdentity
from goose.errors import GooseError
from goose.storage.durable import replace_text
from goose.storage.row_schema import ROW_SCHEMA, schema_of


@dataclass
class RunIdentity:
    """What one configuration's rows are keyed by."""

    model: ModelIdentity
    prompts_fingerprint: str
    data_fingerprint: str  # the content of the files the method reads ("" if none)
    config_hash: str
    conditions: dict = field(default_factory=dict)
    code_fingerprint: str = ""  # the code that drafts and verifies (goose.storage.code_identity); "" unknown


class Interrupted(Exception):
    """Ctrl-C during a run: the rows written so far are kept."""

    def __init__(self, rows: int, path: Path):
        super().__init__(f"interrupted: {rows} row(s) kept in {path}; rerun the same command to resume")


def data_fingerprint(config) -> str:
    """The content of every file or folder a drafter's Config names with data_setting() (a rebuilt REST
    datastore is another configuration); "" when it names none."""
    from goose.drafting.contract import data_paths  # start-up time: torch only when hashing (goose-migrate)

    paths = data_paths(config)
    return digest({name: path_fingerprint(p) for name, p in sorted(paths.items())}) if paths else ""


def hashed_fields(spec, model_fp: str, prompts_fp: str, data_fp: str, batch: list[str] | None = None) -> dict:
    """What the config hash is a digest of (see `config_hash`)."""
    from goose.drafting.contract import data_paths  # start-up time: torch only when hashing (goose-migrate)

    method = {k: v for k, v in spec.method.values().items() if k not in data_paths(spec.method.config)}
    kept = {**spec.settings("hashed"), "model": spec.model.hashed(), "benchmark": spec.benchmark.hashed(),
            "method": {"name": spec.method.name, "drafter": method}, "model_fingerprint": model_fp,
            "prompts_fingerprint": prompts_fp, "data_fingerprint": data_fp, "row_schema": ROW_SCHEMA,
            **spec.sampling.noise_key()}
    if spec.concurrency > 1:
        kept["batch_prompts"] = list(batch or [])
    return kept


def config_hash(spec, model: ModelIdentity, prompts_fp: str, data_fp: str, batch: list[str] | None = None) -> str:
    """Every setting that changes a row (goose.running.spec declares which), the sections (paths left out: contents
    are fingerprinted instead), what the config points at, and the row schema. The method is its registered
    name and its Config's values (the files it reads by content: `data_fp`), never the drafter class's module
    path (nor a benchmark loader's: the prompts are hashed by content): moving code keeps every results folder.
    At concurrency > 1 a request's
    row depends on the requests decoded beside it (shared memory, budget=auto's widths, its share of a pass):
    `batch`, the ids of the run's prompts in order, is hashed too, so a grown or shrunk run is another
    configuration, never a reuse of rows that would now differ."""
    return digest(hashed_fields(spec, model.fingerprint, prompts_fp, data_fp, batch), 12)


LEGACY_ROW_SCHEMA = 4  # the last schema whose config hash held the drafter's import path


def legacy_config_hash(spec, model_fp: str, prompts_fp: str, data_fp: str, batch: list[str] | None = None, *,
                       target: str) -> str:
    """The config hash as row schema 4 computed it: the same fields, the drafter's import path (`_target_`:
    `target`, as recorded in the folder's config.yaml) inside the method, and row_schema 4. Only the
    migrator (goose.migration.migrate) uses it, to verify a folder's key before re-keying it."""
    kept = hashed_fields(spec, model_fp, prompts_fp, data_fp, batch)
    kept["method"]["drafter"] = {"_target_": target, **kept["method"]["drafter"]}
    kept["benchmark"] = spec.benchmark.hashed(loader=True)
    kept["row_schema"] = LEGACY_ROW_SCHEMA
    return digest(kept, 12)


def default_run_dir(spec, label: str, chash: str) -> Path:
    """<results_dir>/<model>/<benchmark>/<method>/B<budget>-M<memory>-N<max_new_tokens>[-<sampling>][-trialN]-<config
    hash> (goose.running.spec declares each part): readable, and one configuration per folder."""
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in label)
    return Path(spec.results_dir) / safe / spec.benchmark.name / spec.method.name / spec.folder_name(chash)


def check_one_configuration(rows: list[dict], run_dir: Path, chash: str) -> None:
    """A run folder holds one configuration: rows of another are never mixed in or reused."""
    other = sorted({r.get("config_hash") for r in rows} - {chash})
    if other:
        old = any(schema_of(r) == LEGACY_ROW_SCHEMA for r in rows)
        data = not old and any(r.get("data_fingerprint") for r in rows)  # REST's datastore, before its build time left
        raise GooseError(
            f"{run_dir} holds rows of another configuration (config hash {', '.join(map(str, other))}; this one is "
            f"{chash}): a different model, prompts file, datastore or setting. Use a new results_dir (or run_dir), or "
            "delete the folder."
            + (f" Its rows are of row schema {LEGACY_ROW_SCHEMA}, keyed with the drafter's import path: `python -m "
               f"goose.migration.migrate {run_dir}` re-keys them if they are this configuration's." if old else "")
            + (" Its rows read a datastore: if it was built before 2026-12-07 (its build time then keyed the runs), "
               f"`python -m goose.migration.migrate {run_dir}` re-keys them where the datastore here is the same "
               "content." if data else "")
        )


def write_config(run_dir: Path, spec, ident: RunIdentity) -> None:
    """The resolved config and what it pointed at, beside the rows."""
    from omegaconf import OmegaConf

    plain = {**spec.plain, "method": spec.plain_section("method")}
    plain["identity"] = {"config_hash": ident.config_hash, "model": ident.model.description,
                         "model_fingerprint": ident.model.fingerprint, "prompts_fingerprint": ident.prompts_fingerprint,
                         "data_fingerprint": ident.data_fingerprint, "code_fingerprint": ident.code_fingerprint,
                         "device": str(spec.torch_device),
                         "dtype": str(spec.torch_dtype).replace("torch.", ""), "backend": spec.backend,
                         "row_schema": ROW_SCHEMA}
    replace_text(run_dir / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(plain)))


def remove_empty(run_dir: Path, stop: Path) -> None:
    """Undo the folder a failed first run created (its lock and config only), and empty parents up to `stop`."""
    for name in (".lock", "config.yaml"):
        (run_dir / name).unlink(missing_ok=True)
    d = run_dir
    stop = stop.resolve()
    while d.resolve() != stop and d.is_dir() and not any(d.iterdir()):
        d.rmdir()
        d = d.parent
