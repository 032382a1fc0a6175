"""Run folders: one configuration per folder, named for reading, keyed by the config hash."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from goose.errors import GooseError
from goose.models import ModelIdentity
from goose.results import ResultsFile
from goose.sampling import Sampling


@dataclass
class RunIdentity:
    """What one configuration's rows are keyed by."""

    model: ModelIdentity
    prompts_fingerprint: str
    config_hash: str
    device: torch.device
    dtype: torch.dtype
    conditions: dict = field(default_factory=dict)


class Interrupted(Exception):
    """Ctrl-C during a run: the rows written so far are kept."""

    def __init__(self, rows: int, path: Path):
        super().__init__(f"interrupted: {rows} row(s) kept in {path}; rerun the same command to resume")


def default_run_dir(cfg: DictConfig, label: str, chash: str) -> Path:
    """<results_dir>/<model>/<benchmark>/<method>/B<budget>-M<memory>-N<max_new_tokens>[-<sampling>]-<config
    hash> (sampling e.g. T0.7-p0.95-s0; nothing when greedy; -trial2 from the second trial on): readable, and one
    configuration per folder."""
    safe = "".join(c if c.isalnum() or c in "-_.+" else "_" for c in label)
    sampled = Sampling.from_config(cfg).label()
    trial = cfg.get("trial", 1)
    sampled = "-".join(x for x in (sampled, f"trial{trial}" if trial != 1 else "") if x)
    return (Path(cfg.results_dir) / safe / cfg.benchmark.name / cfg.method.name
            / f"B{cfg.budget}-M{cfg.memory}-N{cfg.max_new_tokens}{'-' + sampled if sampled else ''}-{chash}")


def check_one_configuration(results: ResultsFile, run_dir: Path, chash: str) -> None:
    """A run folder holds one configuration: rows of another are never mixed in or reused."""
    other = sorted({r.get("config_hash") for r in results.rows()} - {chash})
    if other:
        raise GooseError(
            f"{run_dir} holds rows of another configuration (config hash {', '.join(map(str, other))}; this one is "
            f"{chash}): a different model, prompts file or setting. Use a new results_dir (or run_dir), or delete "
            "the folder."
        )


def write_config(run_dir: Path, cfg: DictConfig, ident: RunIdentity) -> None:
    """The resolved config and what it pointed at, beside the rows."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["identity"] = {"config_hash": ident.config_hash, "model": ident.model.description,
                         "model_fingerprint": ident.model.fingerprint, "prompts_fingerprint": ident.prompts_fingerprint,
                         "device": str(ident.device), "dtype": str(ident.dtype).replace("torch.", "")}
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(plain)))


def remove_empty(run_dir: Path, stop: Path) -> None:
    """Undo the folder a failed first run created (its lock and config only), and empty parents up to `stop`."""
    for name in (".lock", "config.yaml"):
        (run_dir / name).unlink(missing_ok=True)
    d = run_dir
    stop = stop.resolve()
    while d.resolve() != stop and d.is_dir() and not any(d.iterdir()):
        d.rmdir()
        d = d.parent


