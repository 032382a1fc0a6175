"""The command line: `goose-run` (or `python run.py`) model=... method=... benchmark=... budget=...

No arguments: the demo (GOOSE vs AR on a few prompts, goose.demo). Otherwise Hydra composes the config
from conf/ and every combination of a multirun (-m) is one run (goose.running.runner). What is refused before
Hydra starts (an unknown setting, a launcher that would do nothing, a sweep with a bad job) is goose.preflight.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

import hydra
from omegaconf import DictConfig

from goose.demo import main as demo
from goose.help import register as register_help
from goose.paths import CONF, register_experiments
from goose.preflight import launcher_options_refused, multirun, refused, user_folders
from goose.running.runner import exit_status, run

register_help()  # --help renders the YAML files' explanations


def sweep_id() -> str:
    """One id per sweep: every job of a multirun (also SLURM jobs, which inherit the environment) shares it,
    so `speedup_reference=cached` can tell a timing of this sweep from an older one."""
    if "GOOSE_SWEEP_ID" not in os.environ:
        made = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        if multirun(sys.argv):
            os.environ["GOOSE_SWEEP_ID"] = made
        return made
    return os.environ["GOOSE_SWEEP_ID"]


SWEEP_ID = sweep_id()
register_experiments()  # +experiment=NAME: experiments/NAME.yaml


@hydra.main(config_path=str(CONF), config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    sys.path.extend(user_folders(HydraConfig.get().searchpath))
    status = exit_status(lambda: run(cfg, SWEEP_ID))
    if status:  # not on success: a multirun goes on to its next job
        sys.exit(status)


def drafter_overrides(argv: list[str]) -> list[str]:
    """`method.drafter.KEY=VALUE` (docs/running.md, docs/adding.md) as Hydra takes it whether or not the method's
    YAML names KEY: `++method.drafter.KEY=VALUE` (add or override). A KEY that is no field of the method's Config
    is then refused in one line with the close match, as `+method.drafter.KEY=VALUE` is (goose.running.spec)."""
    return [f"++{a}" if a.startswith("method.drafter.") and "=" in a else a for a in argv]


def main() -> None:
    """goose-run: refuse a bad command line in one line (goose.preflight), else the demo or Hydra's run(s)."""
    argv = sys.argv[1:] = drafter_overrides(sys.argv[1:])
    if (why := launcher_options_refused(argv) or refused(argv)) is not None:
        print(f"error: {why}", file=sys.stderr)
        sys.exit(2)
    if len(sys.argv) == 1:
        sys.exit(exit_status(demo))
    hydra_main()
