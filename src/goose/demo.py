"""`python run.py` without arguments (and `make demo`): what the project is for, in a few minutes.

GOOSE with budget=auto against AR on the first prompts of the default benchmark, in one sweep: each
method's rows go to its own run folder as usual (GOOSE's speedups use the AR timings this sweep
took), the comparison is printed from those rows, then one answer with every drafted token marked
by the source that proposed it.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

from goose.api import legend, load_config, make_method, marked
from goose.benchmarks import load_prompts
from goose.decode import BONUS, generate
from goose.inputs import build_input, select
from goose.methods import compose_config
from goose.results import ResultsFile
from goose.runner import run

SETTINGS = ["n_prompts=5", "max_new_tokens=128", "speedup_reference=cached"]
METHODS = (("ar", "60"), ("goose", "auto"))


def rows_of(summary: dict) -> dict[str, dict]:
    rows = ResultsFile(Path(summary["run_dir"]) / "results.csv").rows()
    return {r["prompt_id"]: r for r in rows if r.get("config_hash") == summary["config_hash"]}


def comparison(ar: dict[str, dict], goose: dict[str, dict]) -> list[str]:
    """Per prompt and pooled: tokens/s of both, GOOSE's tau, speedup and losslessness, from the rows."""
    lines = [f"{'prompt':<16}{'AR tok/s':>10}{'GOOSE tok/s':>13}{'tau':>7}{'speedup':>9}  lossless",
             "-" * 65]
    both = [p for p in goose if p in ar]
    for p in both:
        a, g = ar[p], goose[p]
        speed = f"{float(g['speedup']):.2f}x" if g.get("speedup") not in ("", None) else "-"
        lines.append(f"{p:<16}{float(a['tokens_per_s']):>10.1f}{float(g['tokens_per_s']):>13.1f}"
                     f"{float(g['tau']):>7.2f}{speed:>9}  {'yes' if str(g['lossless']) == 'True' else 'NO'}")
    tok = sum(int(goose[p]["new_tokens"]) for p in both)
    ar_wall = sum(float(ar[p]["wall_s"]) for p in both)
    g_wall = sum(float(goose[p]["wall_s"]) for p in both)
    steps = sum(int(goose[p]["steps"]) for p in both)
    timed = [p for p in both if goose[p].get("ar_wall_s") not in ("", None)]
    speedup = (sum(float(goose[p]["ar_wall_s"]) for p in timed) / sum(float(goose[p]["wall_s"]) for p in timed)
               if timed else None)
    ok = sum(str(goose[p]["lossless"]) == "True" for p in both)
    lines += ["-" * 65,
              f"{'pooled':<16}{sum(int(ar[p]['new_tokens']) for p in both) / ar_wall:>10.1f}{tok / g_wall:>13.1f}"
              f"{tok / steps:>7.2f}{f'{speedup:.2f}x' if speedup else '-':>9}  {ok}/{len(both)}"]
    return lines


def main(extra: list[str] | tuple[str, ...] = ()) -> int:
    sweep = f"demo-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"  # GOOSE reuses AR's timings of it
    summaries, cfg = {}, None
    for method, budget in METHODS:
        cfg = compose_config([f"method={method}", f"budget={budget}", *SETTINGS, *extra])
        print(f"\n== {method} (budget={budget}) on the first {cfg.n_prompts} prompts of {cfg.benchmark.name}",
              flush=True)
        summaries[method] = run(cfg, sweep)
    ar, goose = rows_of(summaries["ar"]), rows_of(summaries["goose"])
    first = next(iter(goose.values()))
    print(f"\nGOOSE (budget=auto) vs AR: {cfg.benchmark.name}, {first['model']}, {cfg.max_new_tokens} new tokens, "
          f"{first['device']} {first['dtype']}, {first['threads']} thread(s); tau = tokens per target forward; "
          "speedup = AR wall time / GOOSE wall time, AR timed in this sweep\n")
    print("\n".join(comparison(ar, goose)))
    print(f"\nrows: {summaries['ar']['run_dir']} (AR), {summaries['goose']['run_dir']} (GOOSE)")
    show_answer(cfg)
    return 0


def show_answer(cfg) -> None:
    """Decode the first prompt with GOOSE once more (the same tokens as its row) and print the answer
    with each drafted token marked by its source."""
    model = load_config(cfg.model, cfg.device, cfg.dtype)
    prompt = select(load_prompts(cfg.benchmark.name, cfg.data_dir, cfg.benchmark.get("path")), 1)[0]
    ids = build_input(model.tokenizer, [], prompt.text, cfg.chat_template)
    gen = generate(model.engine, ids, make_method(model, "goose", "auto"), cfg.max_new_tokens, model.stop_ids)
    counts = {s: gen.origins.count(s) for s in dict.fromkeys(gen.origins)}
    shown = ", ".join(f"{n} from {s}" for s, n in counts.items())
    print(f"\nGOOSE's answer to {prompt.id} ({len(gen.tokens)} tokens in {gen.steps} forwards: {shown})")
    print(legend([s for s in counts if s != BONUS]) + "\n")
    print(marked(model.tokenizer, gen.tokens, gen.origins))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
