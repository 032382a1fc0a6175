"""`python run.py` without arguments (and `make demo`): what the project is for, in a few minutes.

GOOSE with budget=auto against AR on the first prompts of the default benchmark, in one sweep: each
method's rows go to its own run folder as usual (GOOSE's rows carry the AR timing of their prompt
taken in this sweep), the comparison is printed from those rows, then one answer from GOOSE's run
folder with every drafted token marked by the source that proposed it.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from goose.api import legend, marked
from goose.decode import BONUS
from goose.errors import GooseError
from goose.inputs import benchmark_prompts, turns_of
from goose.methods import compose_config
from goose.results import OutputsFile, ResultsFile
from goose.runner import exit_status, run

SETTINGS = ["n_prompts=5", "max_new_tokens=128", "speedup_reference=cached"]
METHODS = (("ar", "60"), ("goose", "auto"))
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
    sweep = f"demo-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"  # GOOSE reuses AR's timings of it
    summaries, cfg = {}, None
    for method, budget in METHODS:
        cfg = compose_config([f"method={method}", f"budget={budget}", *SETTINGS, *extra])
        print(f"\n== {method} (budget={budget}) on the first {cfg.n_prompts} prompts of {cfg.benchmark.name}",
              flush=True)
        summaries[method] = run(cfg, sweep)
    prompts = benchmark_prompts(cfg)[1]
    ids = [rid for p in prompts for rid, _ in turns_of(p)]
    goose = rows_of(summaries["goose"], ids)
    first = next(iter(goose.values()))
    sampled = f", temperature {cfg.temperature}" if cfg.temperature else ""
    print(f"\nGOOSE (budget=auto) vs AR: {cfg.benchmark.name}, {first['model']}, {cfg.max_new_tokens} new tokens"
          f"{sampled}, {first['device']} {first['dtype']}, engine.backend={first['backend']}, "
          f"{first['threads']} thread(s). tau = tokens per target "
          "forward; speedup = AR wall time / GOOSE wall time on the same prompt; lossless = GOOSE's tokens equal "
          "AR's\n")
    print("\n".join(comparison(goose)))
    older = [p for p, g in goose.items() if g.get("sweep_id") != sweep]
    if older:
        print(f"\n{len(older)} of {len(goose)} GOOSE row(s) were kept from an earlier run (resumed), with the timings "
              "taken then; use another results_dir=... to time everything afresh.")
    print(f"\nrows: {summaries['ar']['run_dir']} (AR), {summaries['goose']['run_dir']} (GOOSE)")
    show_answer(Path(summaries["goose"]["run_dir"]), ids)
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
