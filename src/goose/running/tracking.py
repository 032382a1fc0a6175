"""Weights & Biases logging of one run: full config, per-prompt metrics, a summary table.

Mode `offline` (default) works without network: runs land in <run_dir>/wandb and
`wandb sync <run_dir>/wandb/offline-run-*` uploads them later. `online` needs a key;
`disabled` logs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

from goose.errors import GooseError
from goose.storage.run_records import run_name


class Tracker:
    def __init__(self, mode: str, project: str, name: str, group: str, config: dict, run_dir: Path,
                 entity: str | None = None):
        self.run, self.name = None, name
        if mode == "disabled":
            return
        if mode not in ("offline", "online"):
            raise GooseError(f"logging.wandb.mode must be offline, online or disabled (got {mode!r}).")
        import wandb

        os.environ.setdefault("WANDB_SILENT", "true")
        self.run = wandb.init(project=project, entity=entity, name=name, group=group, config=config,
                              dir=str(run_dir), mode=mode, reinit="finish_previous")

    def log_prompt(self, index: int, row: dict) -> None:
        if self.run is None:
            return
        self.run.log({k: v for k, v in row.items() if isinstance(v, (int, float))}, step=index)

    def log_table(self, name: str, columns: list[str], data: list[list]) -> None:
        if self.run is None:
            return
        import wandb

        self.run.log({name: wandb.Table(columns=columns, data=data)})

    def log_image(self, name: str, path: Path) -> None:
        if self.run is None:
            return
        import wandb

        self.run.log({name: wandb.Image(str(path))})

    def finish(self, summary: dict, rows: list[dict]) -> None:
        if self.run is None:
            return
        import wandb

        self.run.summary.update({k: v for k, v in summary.items() if isinstance(v, (int, float, str))})
        if rows:
            cols = list(rows[0])
            self.run.log({"prompts": wandb.Table(columns=cols, data=[[str(r.get(c)) for c in cols] for r in rows])})
        self.run.finish()
        self.run = None


def open_tracker(spec, label: str, run_dir: Path) -> Tracker:
    """A configuration's run, at any concurrency: named by goose.storage.run_records.run_name (every part of the
    run folder's name but the hash, so runs that differ only in budget, memory or concurrency are told apart),
    grouped by model and benchmark."""
    w = spec.logging
    return Tracker(w.mode, w.project, run_name(spec, label), f"{label}/{spec.benchmark.name}",
                   {**spec.plain, "method": spec.plain_section("method")}, run_dir, w.entity)
