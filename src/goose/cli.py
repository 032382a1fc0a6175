"""The command line: `goose-run` (or `python run.py`) model=... method=... benchmark=... budget=...

No arguments: the demo (GOOSE vs AR on a few prompts, goose.demo). Otherwise Hydra composes the config
from conf/ and every combination of a multirun (-m) is one run (goose.runner).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path

import hydra
from omegaconf import DictConfig

from goose.errors import GooseError
from goose.help import register as register_help
from goose.paths import CONF
from goose.runner import exit_status, run

register_help()  # --help renders the YAML files' explanations


def sweep_id() -> str:
    """One id per sweep: every job of a multirun (also SLURM jobs, which inherit the environment) shares it,
    so `speedup_reference=cached` can tell a timing of this sweep from an older one."""
    if "GOOSE_SWEEP_ID" not in os.environ:
        made = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        if "-m" in sys.argv or "--multirun" in sys.argv:
            os.environ["GOOSE_SWEEP_ID"] = made
        return made
    return os.environ["GOOSE_SWEEP_ID"]


SWEEP_ID = sweep_id()


@hydra.main(config_path=str(CONF), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    # A user's config folder (hydra.searchpath=[file:///DIR]) may hold the drafter's .py beside method/NAME.yaml.
    for entry in HydraConfig.get().searchpath:
        if entry.startswith("file://"):
            sys.path.append(entry[len("file://"):])
    status = exit_status(lambda: run(cfg, SWEEP_ID))
    if status:  # not on success: a multirun goes on to its next job
        sys.exit(status)


def refused(argv: list[str]) -> str | None:
    """What is wrong with the command line before Hydra sees it: an unknown setting (Hydra would advise
    `+key=value`), or a multirun whose results_dir cannot be written (Hydra writes multirun.yaml there)."""
    from goose.durable import writable_dir
    from goose.spec import unknown_choice, unknown_override

    if (unknown := unknown_override(argv)) is not None:
        return unknown
    if (unknown := unknown_choice(argv)) is not None:
        return unknown
    launcher = [a.split("=", 1)[1] for a in argv if a.startswith(("hydra/launcher=", "+hydra/launcher="))]
    if launcher and "slurm" in launcher[-1] and shutil.which("sbatch") is None:
        return (f"hydra/launcher={launcher[-1]} submits each job with sbatch, which is not on PATH: run this on a "
                "SLURM login node (docs/slurm.md), or drop hydra/launcher to run the sweep here")
    if "-m" in argv or "--multirun" in argv:
        given = [a.split("=", 1)[1] for a in argv if a.startswith("results_dir=")]
        try:
            writable_dir(Path(given[-1] if given else "results"), probe=True)
        except GooseError as e:
            return str(e)
    return None


def main() -> None:
    if (why := refused(sys.argv[1:])) is not None:
        print(f"error: {why}", file=sys.stderr)
        sys.exit(2)
    if len(sys.argv) == 1:
        from goose.demo import main as demo

        sys.exit(exit_status(demo))
    hydra_main()
