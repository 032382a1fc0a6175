r"""What a `make reproduce-*` target runs, said before it starts: its sweeps (experiments/), runs, prompts and
new tokens, where its rows and artifacts go, and about how long it takes.

    python -m goose.experiments.sweep_plan --target table1 --profile local --results results/local \
        --out results/local/artifacts --artifacts table1 --sweep table1-local

`--sweep` repeats, each an experiments/ sweep name with the overrides the target adds to it ("spec_bench-local
method=goose budget=auto"). The time is an upper bound's estimate (every answer its full max_new_tokens, every
run decoded afresh; finished rows are skipped, so a resumed sweep takes less): PROFILE=local from the seconds per
decoded token measured on this repository's 2-core machine, PROFILE=paper from the GPU cost model of
goose.experiments.claims_plan.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import sys

from goose.benchmarks.prompts import benchmark_config, load_prompts
from goose.core.sections import close_match
from goose.errors import GooseError
from goose.experiments.claims_plan import DEFAULT_TAU, PARAMS_B, experiment, grid
from goose.paths import EXPERIMENTS

# PROFILE=local: seconds per decoded token (the method's, and AR's where it is timed beside it) plus seconds per
# run (start, model load, references), from `make reproduce-table1 PROFILE=local` on this 2-core machine (#61:
# 30-45 minutes for 9 runs x 10 prompts x 128 tokens, each prompt's AR timed beside it: 23,040 decoded tokens).
LOCAL_S_PER_TOKEN = 0.1
LOCAL_S_PER_RUN = 10.0
# A batched forward of c requests costs 1 + (c - 1) * BATCH_GROWTH one request's on this CPU (16 rows of 8 nodes cost
# 2.66x one node: docs/budget-auto.md); on a GPU, memory-bound, about one forward's.
BATCH_GROWTH = (2.66 - 1) / 15
# PROFILE=paper: claims_plan's cost model, an A100's bandwidth at 60% (nobody here has measured the paper's models).
GPU_BANDWIDTH_GBS, GPU_EFFICIENCY = 2039.0, 0.6


@functools.cache
def prompt_tokens(bench: str, n_prompts: int | None, turns: int | None, max_new: int) -> tuple[int, int]:
    """(prompts, new tokens at most) of a run: its first n prompts (n of each category where the benchmark is
    stratified), each turn its max_new_tokens. Without the benchmark's file here: n prompts of `turns` turns."""
    try:
        spec = benchmark_config(bench)
        prompts = load_prompts(bench, turns=turns)
    except GooseError:
        return n_prompts or 0, (n_prompts or 0) * (turns or 1) * max_new
    if n_prompts is not None:
        if spec.stratified:
            seen: dict[str, int] = {}
            chosen = []
            for p in prompts:
                seen[p.category] = seen.get(p.category, 0) + 1
                if seen[p.category] <= n_prompts:
                    chosen.append(p)
            prompts = chosen
        else:
            prompts = prompts[:n_prompts]
    return len(prompts), sum(1 + len(p.later_turns) for p in prompts) * max_new


def sweep_jobs(sweep: str) -> tuple[str, list[dict]]:
    """A `--sweep` value's experiment and its jobs, the target's overrides applied."""
    from omegaconf import OmegaConf

    name, *overrides = sweep.split()
    path = EXPERIMENTS / f"{name}.yaml"
    if not path.is_file():
        near = close_match(name, [p.stem for p in EXPERIMENTS.glob("*.yaml")])
        raise GooseError(f"no sweep {name} (experiments/{name}.yaml){near}")
    cfg = OmegaConf.to_container(experiment(name), resolve=False)  # max_new_tokens may name the benchmark's
    fixed = {"n_prompts": cfg.get("n_prompts"), "max_new_tokens": cfg.get("max_new_tokens", 128),
             "turns": (cfg.get("benchmark") or {}).get("turns"),
             "speedup_reference": cfg.get("speedup_reference", "interleaved")}
    given = [(key, values) for key, values in (_override(sweep, o) for o in overrides)]
    jobs, seen = [], set()
    for job in grid(name):
        job = {k: _value(v) for k, v in job.items()}  # the swept values as Hydra types them (n_prompts=10: 10)
        for values in itertools.product(*(v for _, v in given)):
            one = {**fixed, **job, **dict(zip((k for k, _ in given), values))}
            key = tuple(sorted((k, str(v)) for k, v in one.items()))
            if key not in seen:
                seen.add(key)
                jobs.append(one)
    return name, jobs


def _override(sweep: str, text: str) -> tuple[str, list]:
    """One override of a `--sweep` value as Hydra reads it on run.py's command line: its key and its values,
    typed (`n_prompts=2`: [2]; `method=pld,goose`: ['pld', 'goose'])."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        o = OverridesParser.create().parse_override(text)
    except HydraException:
        o = None
    if o is None or o.value_type is None or not o.key_or_group:
        raise GooseError(f"--sweep {sweep!r}: {text!r} is no KEY=VALUE override (write it as run.py takes it, "
                         "e.g. \"table2-local n_prompts=2 method=pld,goose\")")
    return o.key_or_group, list(o.sweep_iterator()) if o.is_sweep_override() else [o.value()]


def _value(value):
    """A swept value (a string of the sweep's `hydra.sweeper.params`) typed as Hydra types it."""
    return _override("", f"value={value}")[1][0] if isinstance(value, str) else value


def max_new_tokens(job: dict) -> int:
    """A job's max_new_tokens: a number, or the benchmark's paper length (`${benchmark.paper_max_new_tokens}`)."""
    value = job["max_new_tokens"]
    if isinstance(value, str) and "paper_max_new_tokens" in value:
        return benchmark_config(job["benchmark"]).paper_max_new_tokens or 1024
    return int(value)


def estimate(jobs: list[dict], profile: str) -> tuple[int, int, float | None]:
    """(prompts, new tokens, seconds or None) of a sweep's jobs: every job's tokens, and AR's beside them where
    timed (interleaved: beside every prompt of every method; cached: once per prompt of the sweep)."""
    prompts = tokens = decoded = 0
    gpu_s = 0.0
    referenced = set()
    for job in jobs:
        n, t = prompt_tokens(job["benchmark"], job["n_prompts"], job["turns"], max_new_tokens(job))
        prompts, tokens = prompts + n, tokens + t
        ar = 0
        if job["speedup_reference"] == "interleaved" and job.get("method") != "ar":
            ar = t
        elif job["speedup_reference"] == "cached" and (job["model"], job["benchmark"]) not in referenced:
            referenced.add((job["model"], job["benchmark"]))
            ar = t
        c = int(job.get("concurrency", 1))
        decoded += (t + ar) * (1 + (c - 1) * BATCH_GROWTH) / c  # a batch of c requests shares its forwards
        if job["model"] in PARAMS_B:
            forward_s = PARAMS_B[job["model"]] * 2e9 / (GPU_BANDWIDTH_GBS * 1e9 * GPU_EFFICIENCY)
            gpu_s += (t / (1 if job.get("method") == "ar" else DEFAULT_TAU) + ar) * forward_s / c  # memory-bound
        else:
            gpu_s = float("nan")
    if profile == "local":
        return prompts, tokens, decoded * LOCAL_S_PER_TOKEN + len(jobs) * LOCAL_S_PER_RUN
    return prompts, tokens, None if gpu_s != gpu_s else gpu_s


def duration(seconds: float) -> str:
    if seconds < 90 * 60:
        return f"{max(1, round(seconds / 60))} min"
    return f"{seconds / 3600:.1f} hours"


def plan(target: str, profile: str, results: str, out: str, artifacts: list[str], sweeps: list[str]) -> list[str]:
    """The two lines a reproduce target prints first."""
    parts, total, known = [], 0.0, True
    for sweep in sweeps:
        name, jobs = sweep_jobs(sweep)
        prompts, tokens, seconds = estimate(jobs, profile)
        extra = " ".join(sweep.split()[1:])
        parts.append(f"{name}{' ' + extra if extra else ''} ({len(jobs)} runs, {prompts} prompts, "
                     f"{tokens:,} new tokens at most)")
        known = known and seconds is not None
        total += seconds or 0.0
    if profile == "local":
        how_long = (f"about {duration(total)} on this repository's 2-core machine, idle ({LOCAL_S_PER_TOKEN} s per "
                    "decoded token, AR's beside it included; finished rows are skipped, so a resumed sweep takes less)")
    elif known:
        how_long = (f"about {duration(total)} of one GPU (goose.experiments.claims_plan's cost model: every answer its "
                    "full length; finished rows are skipped)")
    else:
        how_long = "hours of one GPU (finished rows are skipped)"
    return [f"== {target} with PROFILE={profile}: the sweep {', then '.join(parts)}; rows into {results}, "
            f"then {' '.join(artifacts)} into {out}",
            f"== {how_long}; stop it at any time and rerun to resume"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m goose.experiments.sweep_plan", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--profile", required=True, choices=["local", "paper"])
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--artifacts", nargs="+", required=True)
    ap.add_argument("--sweep", action="append", required=True)
    args = ap.parse_args(argv)
    try:
        lines = plan(args.target, args.profile, args.results, args.out, args.artifacts, args.sweep)
    except GooseError as e:  # one line, exit 2: a command line this plan cannot take, as argparse's own errors
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
