"""Helpers for tests that run run.py in a subprocess and read what it wrote."""

import contextlib
import csv
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_py(*args, cwd=ROOT):
    env = dict(os.environ, WANDB_MODE="disabled", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def run_here(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    """run.py's main in this process, for a command line refused before any model loads: the exit status, stdout
    and stderr run_py would give, without a new interpreter's ~3 s of imports. What a run may change (the
    environment, sys.path, sys.argv, Hydra's global state, the working folder) is put back. One subprocess test
    per kind of refusal stays (run_py): it shows the real process prints the same."""
    from hydra.core.global_hydra import GlobalHydra

    from goose import cli

    env, path, argv = dict(os.environ), list(sys.path), list(sys.argv)
    out, err, code = io.StringIO(), io.StringIO(), 0
    try:
        os.environ.update(WANDB_MODE="disabled", HF_HUB_OFFLINE="1")
        sys.argv = [str(ROOT / "run.py"), *args]
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            cli.main()
    except SystemExit as e:  # as the interpreter exits: None is 0, an int itself, anything else printed and 1
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        if not isinstance(e.code, int) and e.code is not None:
            err.write(f"{e.code}\n")
    finally:
        os.environ.clear()
        os.environ.update(env)
        sys.path[:], sys.argv = path, argv
        GlobalHydra.instance().clear()
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def run_folder(root, model, bench, method, tag):
    """The one run folder <root>/<model>/<bench>/<method>/<tag>-<config hash>."""
    found = sorted(Path(root, model, bench, method).glob(f"{tag}-*"))
    assert len(found) == 1, found
    return found[0]
