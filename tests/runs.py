"""Helpers for tests that run run.py in a subprocess and read what it wrote."""

import csv
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_py(*args, cwd=ROOT):
    env = dict(os.environ, WANDB_MODE="disabled", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def run_folder(root, model, bench, method, tag):
    """The one run folder <root>/<model>/<bench>/<method>/<tag>-<config hash>."""
    found = sorted(Path(root, model, bench, method).glob(f"{tag}-*"))
    assert len(found) == 1, found
    return found[0]
