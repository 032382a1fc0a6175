"""`python run.py` without arguments (and `make demo`): what the project is for, in a few minutes.

GOOSE with budget=auto against AR on the first prompts of the default benchmark: one run whose every row
times AR and GOOSE back to back on the same prompt (speedup_reference=interleaved, who goes first
alternating), so a machine whose load changes during the demo moves both timings alike. The comparison
is printed from the run's rows, then one answer from its run folder with every drafted token marked by
the source that proposed it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from goose.api import legend, marked
from goose.errors import GooseError
from goose.running.inputs import benchmark_prompts, turns_of
from goose.running.loop import BONUS
from goose.running.registry import compose_config
from goose.running.runner import checked_spec, exit_status, run
from goose.storage.result_files import OutputsFile, ResultsFile

SETTINGS = ["n_prompts=5", "max_new_tokens=128", "speedup_reference=interleaved"]
FIXED = ("method", "budget", "prompt", "prompt_file", "speedup_reference")  # what the demo is about


def rows_of(summary: dict, ids: list[str]) -> dict[str, dict]:
    """The run's rows for `ids` (the prompts asked for now, in order)."""
    rows = {r["prompt_id"]: r for r in ResultsFile(Path(summary["run_dir"]) / "results.csv").rows()
            if r.get("config_hash") == summary["config_hash"]}
    return {i: rows[i] for i in ids if i in rows}


def _f(row: dict, key: str) -> float | None:
    v = row.get(key)
    return float(v) if v not in ("", None) else None


def comparison(goose: dict[str, dict]) -> list[str]:
    """Per prompt and pooled, from GOOSE's rows: AR's tokens/s (the AR timing of that prompt the row's
    speedup divides by), GOOSE's tokens/s, tau, speedup and whether its tokens equal AR's."""
    width = 65
    lines = [f"{'prompt':<16}{'AR tok/s':>10}{'GOOSE tok/s':>13}{'tau':>7}{'speedup':>9}  lossless", "-" * width]
    for p, g in goose.items():
        ar, sp = _f(g, "ar_tokens_per_s"), _f(g, "speedup")
        lines.append(f"{p:<16}{f'{ar:.1f}' if ar else '-':>10}{float(g['tokens_per_s']):>13.1f}"
                     f"{float(g['tau']):>7.2f}{f'{sp:.2f}x' if sp else '-':>9}  "
                     f"{'yes' if str(g['lossless']) == 'True' else 'NO'}")
    rows = list(goose.values())
    tokens = sum(int(g["new_tokens"]) for g in rows)
    timed = [g for g in rows if _f(g, "ar_wall_s")]
    ar_wall = sum(_f(g, "ar_wall_s") for g in timed)
    t_tokens = sum(int(g["new_tokens"]) for g in timed)
    speedup = ar_wall / sum(float(g["wall_s"]) for g in timed) if timed else None
    ok = sum(str(g["lossless"]) == "True" for g in rows)
    lines += ["-" * width,
              f"{'pooled':<16}{f'{t_tokens / ar_wall:.1f}' if timed else '-':>10}"
              f"{tokens / sum(float(g['wall_s']) for g in rows):>13.1f}"
              f"{tokens / sum(int(g['steps']) for g in rows):>7.2f}{f'{speedup:.2f}x' if speedup else '-':>9}"
              f"  {ok}/{len(rows)}"]
    return lines


def main(extra: list[str] | tuple[str, ...] = ()) -> int:
    fixed = [o for o in extra if o.lstrip("+~").split("=")[0] in FIXED]
    if fixed:
        raise GooseError(f"the demo compares GOOSE (budget=auto) with AR; {', '.join(fixed)} is not for it. Run "
                         "`python run.py method=... budget=...` for other methods.")
    cfg = compose_config(["method=goose", "budget=auto", *SETTINGS, *extra])
    print(f"\n== GOOSE (budget=auto) and AR, back to back on each of the first {cfg.n_prompts} prompts of "
          f"{cfg.benchmark.name}", flush=True)
    summary = run(cfg)
    spec = checked_spec(cfg)
    prompts = benchmark_prompts(spec)[1]
    ids = [t.id for p in prompts for t in turns_of(p)]
    goose = rows_of(summary, ids)
    first = next(iter(goose.values()))
    sampled = f", temperature {cfg.temperature}" if cfg.temperature else ""
    print(f"\nGOOSE (budget=auto) vs AR: {cfg.benchmark.name}, {first['model']}, {cfg.max_new_tokens} new tokens"
          f"{sampled}, {first['device']} {first['dtype']}, engine.backend={first['backend']}, "
          f"{first['threads']} thread(s). tau = tokens per target "
          "forward; speedup = AR wall time / GOOSE wall time on the same prompt; lossless = GOOSE's tokens equal "
          "AR's\n")
    print("\n".join(comparison(goose)))
    print(f"\nrows: {summary['run_dir']} (a rerun keeps them: use another results_dir=... to time afresh)")
    show_answer(Path(summary["run_dir"]), ids)
    return 0


def show_answer(run_dir: Path, ids: list[str]) -> None:
    """One of GOOSE's answers, as its run folder kept it, each drafted token marked by source: the one
    drawing on the most sources, then the one where the least used of them (bonus included) shows most."""
    kept = OutputsFile(run_dir / "outputs.jsonl").read()
    records = [kept[i] for i in ids if "origins" in kept.get(i, {})]
    if not records:
        print(f"\n(no stored answer with token origins in {run_dir}: its rows are from a version that did not "
              "keep them; use another results_dir=... to decode afresh)")
        return
    record = max(records, key=lambda r: (len(set(r["origins"])), min(map(r["origins"].count, set(r["origins"])))))
    prompt_id, origins = record["prompt_id"], record["origins"]
    counts = {s: origins.count(s) for s in dict.fromkeys(origins)}
    shown = ", ".join(f"{n} from {s}" for s, n in counts.items())
    print(f"\nGOOSE's answer to {prompt_id} ({len(origins)} tokens: {shown})")
    print(legend([s for s in counts if s != BONUS]) + "\n")
    print(marked(record["pieces"], origins))


if __name__ == "__main__":
    sys.exit(exit_status(lambda: main(sys.argv[1:])))
