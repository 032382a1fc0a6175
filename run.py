"""Entry point: python run.py model=... method=... benchmark=... budget=..."""

import os
import sys
import time
import uuid
from pathlib import Path

import hydra
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from goose.help import register as register_help  # noqa: E402
from goose.runner import exit_status, run  # noqa: E402

# One id per sweep: every job of a multirun (also SLURM jobs, which inherit the environment)
# shares it, so `speedup_reference=cached` can tell a timing of this sweep from an older one.
if "GOOSE_SWEEP_ID" not in os.environ:
    sweep_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    if "-m" in sys.argv or "--multirun" in sys.argv:
        os.environ["GOOSE_SWEEP_ID"] = sweep_id
else:
    sweep_id = os.environ["GOOSE_SWEEP_ID"]


register_help()  # python run.py --help renders the YAML files' explanations


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    # A user's config folder (hydra.searchpath=[file:///DIR]) may hold the drafter's .py beside method/NAME.yaml.
    for entry in HydraConfig.get().searchpath:
        if entry.startswith("file://"):
            sys.path.append(entry[len("file://"):])
    status = exit_status(lambda: run(cfg, sweep_id))
    if status:  # not on success: a multirun goes on to its next job
        sys.exit(status)


if __name__ == "__main__":
    from goose.spec import unknown_override

    if (unknown := unknown_override(sys.argv[1:])) is not None:
        print(f"error: {unknown}", file=sys.stderr)
        sys.exit(2)
    if "-m" in sys.argv or "--multirun" in sys.argv:  # Hydra writes multirun.yaml into results_dir first
        from goose.durable import writable_dir
        from goose.errors import GooseError

        given = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("results_dir=")]
        try:
            writable_dir(Path(given[-1] if given else "results"), probe=True)
        except GooseError as e:
            print(f"error: {e}", file=sys.stderr)
            sys.exit(2)
    if len(sys.argv) == 1:  # no arguments: the demo (GOOSE vs AR on a few prompts), see goose/demo.py
        from goose.demo import main as demo

        sys.exit(exit_status(demo))
    main()
