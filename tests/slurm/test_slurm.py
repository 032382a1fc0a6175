"""The SLURM path for real (docs/slurm.md): a one-node cluster started here (tests/slurm_cluster.py), a sweep
through `hydra/launcher=slurm` (one array job per combination), its rows equal to the same sweep run locally;
then a cancelled, a requeued and a killed job, and a resubmission that completes with every row once.
Skips with the reason where SLURM is not installed (`make slurm-packages`); CI installs it."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import LocalCluster

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[2]
METHODS = ("ar", "pld", "goose")
# One CPU per job, no GPU: this machine's two cores run two jobs at a time.
LAUNCHER = ["hydra/launcher=slurm", "hydra.launcher.partition=debug", "hydra.launcher.gpus_per_node=null",
            "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=3", "hydra.launcher.timeout_min=30",
            "hydra.launcher.array_parallelism=2"]


@pytest.fixture(scope="module")
def cluster():
    if (why := LocalCluster.missing()) is not None:
        pytest.skip(why)
    with LocalCluster(cpus=2) as c:
        yield c
        _wait_for("the queue to drain", lambda: not c.jobs(), timeout=120)  # a job ends just after its result


def env(cluster: LocalCluster) -> dict[str, str]:
    return {**cluster.env, "OMP_NUM_THREADS": "1"}  # the jobs inherit it (sbatch exports the environment)


def sweep(results: Path, *extra: str) -> list[str]:
    return [sys.executable, "run.py", "-m", f"method={','.join(METHODS)}", "benchmark=humaneval",
            f"results_dir={results}", *extra]


def rows_of(results: Path) -> dict[str, list[dict]]:
    """method -> every CSV row of its run folder, duplicates kept (they are what this test looks for)."""
    out: dict[str, list[dict]] = {}
    for path in sorted(results.glob("*/humaneval/*/*/results.csv")):
        with open(path, newline="") as f:
            out.setdefault(path.parent.parent.name, []).extend(csv.DictReader(f))
    return out


def tokens_of(results: Path) -> dict[tuple[str, str], list[int]]:
    out = {}
    for path in results.glob("*/humaneval/*/*/outputs.jsonl"):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            out[(path.parent.parent.name, r["prompt_id"])] = r["tokens"]
    return out


def complete(results: Path, n: int) -> None:
    rows = rows_of(results)
    assert sorted(rows) == sorted(METHODS), f"run folders: {sorted(rows)}"
    for method, got in rows.items():
        ids = [r["prompt_id"] for r in got]
        assert len(ids) == n and len(set(ids)) == n, f"{method}: rows {ids}"
        assert all(r["lossless"] == "True" for r in got), f"{method}: not lossless"


def test_a_sweep_on_slurm_gives_the_local_sweeps_tokens(cluster, tmp_path):
    args = ["n_prompts=2", "max_new_tokens=16"]
    local = subprocess.run(sweep(tmp_path / "local", *args), cwd=ROOT, env=env(cluster), capture_output=True, text=True)
    assert local.returncode == 0, local.stderr[-2000:]
    on_slurm = subprocess.run(sweep(tmp_path / "slurm", *args, *LAUNCHER), cwd=ROOT, env=env(cluster),
                              capture_output=True, text=True, timeout=900)
    assert on_slurm.returncode == 0, on_slurm.stderr[-3000:] + cluster.log("slurmctld")
    complete(tmp_path / "slurm", 2)
    assert tokens_of(tmp_path / "slurm") == tokens_of(tmp_path / "local")
    # One array of three jobs, every one COMPLETED in the scheduler's accounting. A job's result reaches the
    # launcher a moment before the job ends, and slurmdbd records the end a moment after squeue drops it (CI once
    # read a task RUNNING there): wait for both, then check the states.
    _wait_for("the jobs to end", lambda: not cluster.jobs(), timeout=120)
    tasks = _wait_for("sacct to record every job's end", lambda: ended_in_accounting(cluster), timeout=120)
    assert len(tasks) == 3 and set(tasks.values()) == {"COMPLETED"}, tasks
    assert len({j.split("_")[0] for j in tasks}) == 1, tasks


def accounting(cluster: LocalCluster) -> dict[str, str]:
    """sacct: array task id (12_0) -> state, for every array task the cluster ran."""
    lines = cluster.run("sacct", "-n", "-X", "-P", "-o", "JobID,State").splitlines()
    return {j: s for j, s in (line.split("|") for line in lines) if "_" in j}


ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")


def ended_in_accounting(cluster: LocalCluster, jobs: tuple[str, ...] = ()) -> dict[str, str] | None:
    """sacct's states once every task in it (or each of `jobs`) has ended there, None before: squeue empties a
    moment before slurmdbd records the last state."""
    state = accounting(cluster)
    return state if state and all(state.get(j, "").startswith(ENDED) for j in jobs or state) else None


def _wait_for(what: str, ready, timeout: float = 600):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (got := ready()):
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _running_with_rows(cluster: LocalCluster, results: Path, task: int, method: str):
    """The array task's job id once it runs and has written at least one row."""
    def ready():
        jobs = {j["id"]: j["state"] for j in cluster.jobs()}
        job = next((i for i, s in jobs.items() if i.endswith(f"_{task}") and s == "RUNNING"), None)
        return job if job and len(rows_of(results).get(method, [])) >= 1 else None
    return _wait_for(f"task {task} ({method}) running with a row", ready)


def _job_pids(job: str) -> list[int]:
    """The processes of a SLURM job (its environment names the array job and task)."""
    array, task = job.split("_")
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if f"SLURM_ARRAY_JOB_ID={array}".encode() in env and f"SLURM_ARRAY_TASK_ID={task}".encode() in env \
                and b"submitit" in cmd:
            pids.append(int(proc.name))
    return pids


def test_cancelled_requeued_and_killed_jobs_complete_on_resubmission(cluster, tmp_path):
    results = tmp_path / "faults"
    argv = sweep(results, "n_prompts=4", "max_new_tokens=48", *LAUNCHER)
    first = subprocess.Popen(argv, cwd=ROOT, env=env(cluster), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
    try:
        cancelled = _running_with_rows(cluster, results, 0, "ar")
        cluster.run("scancel", cancelled)
        requeued = _running_with_rows(cluster, results, 1, "pld")
        cluster.run("scontrol", "requeue", requeued)
        killed = _running_with_rows(cluster, results, 2, "goose")
        for pid in _job_pids(killed):
            os.kill(pid, signal.SIGKILL)
        out, _ = first.communicate(timeout=900)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode != 0, "a sweep with a cancelled and a killed job reported success"
    _wait_for("the requeued job to finish", lambda: not cluster.jobs())
    rows = rows_of(results)
    assert len(rows.get("ar", [])) < 4 and len(rows.get("goose", [])) < 4, "the faults came too late to test"
    state = _wait_for("sacct to record the three jobs' end",
                      lambda: ended_in_accounting(cluster, (cancelled, requeued, killed)), timeout=120)
    assert state[cancelled].startswith("CANCELLED") and state[killed] in ("FAILED", "CANCELLED"), state
    assert state[requeued] == "COMPLETED", state  # requeued, it ran again and finished

    again = subprocess.run(argv, cwd=ROOT, env=env(cluster), capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    complete(results, 4)
    # Every row carries an AR timing taken beside it, in the process that wrote it: none is stale.
    assert all(r["speedup_stale"] == "False" for got in rows_of(results).values() for r in got)
