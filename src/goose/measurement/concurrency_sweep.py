"""Does speculation still pay when many requests share a forward? `python -m goose.measurement.bench --concurrency 1 4
16 --methods ar pld goose@auto`: at each concurrency every method decodes all the prompts, that many at a time
(continuous batching: a finished request's row takes the next prompt), the methods taking turns, `--repeats`
times. Per method and concurrency: aggregate tokens/s (the batch's tokens over its wall time), time to first token
(TTFT, from admission) and time per output token (TPOT = (last token - first token) / (new tokens - 1), prefill
excluded, the same at every concurrency; src/goose/measurement/bench_report.py) of the requests (p50, p95; null where no
request gave two tokens), tau, x batched AR at the same concurrency (the ratio within each repeat, then
the median), and every request against unbatched AR: exact, numerics (a near-tie swapped; goose.storage.equality) or
diverged. At concurrency 1 the batch engine is also compared with the single-request engine (AR alone).

budget=auto at concurrency 1 prunes each draft as it does alone (the cost curve); above, the batch picks one
width per step from the cost surface cost(requests, width) (goose.drafting.cost_surface), measured once and cached.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from goose.drafting.contract import Drafter
from goose.drafting.cost_surface import cost_surface
from goose.engine.batched import BatchEngine
from goose.engine.single import Engine
from goose.measurement import bench_report
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.registry import prepare_drafter
from goose.storage.equality import EXACT, NUMERICS, classify, tolerance


@dataclass
class Cell:
    """One method at one concurrency, over every repeat."""

    method: str
    concurrency: int
    tokens_per_s: list[float] = field(default_factory=list)  # per repeat
    x_ar: list[float] = field(default_factory=list)  # per repeat: tokens/s over batched AR's in the same repeat
    tpot_ms: list[float] = field(default_factory=list)  # per request (of two tokens or more) of every repeat
    ttft_ms: list[float] = field(default_factory=list)  # per request of every repeat
    tokens: int = 0  # first repeat
    steps: int = 0
    exact: int = 0
    numerics: int = 0
    diverged: int = 0
    # of the differing ones: (margin here, AR's margin, gap here, AR's gap), goose.storage.equality.Verdict
    margins: list[tuple[float | None, ...]] = field(default_factory=list)
    widths: list[int] = field(default_factory=list)

    def summary(self) -> dict:
        pct = bench_report.percentile
        return {"method": self.method, "concurrency": self.concurrency,
                "tokens_per_s": statistics.median(self.tokens_per_s), "tokens_per_s_min": min(self.tokens_per_s),
                "tokens_per_s_max": max(self.tokens_per_s), "x_ar": statistics.median(self.x_ar),
                "x_ar_per_repeat": list(self.x_ar),
                "tpot_p50_ms": pct(self.tpot_ms, 0.5), "tpot_p95_ms": pct(self.tpot_ms, 0.95),
                "ttft_p50_ms": pct(self.ttft_ms, 0.5), "ttft_p95_ms": pct(self.ttft_ms, 0.95),
                "tau": self.tokens / self.steps,
                "mean_width": statistics.fmean(self.widths) if self.widths else 1.0,
                "exact": self.exact, "numerics": self.numerics, "diverged": self.diverged,
                "margins": self.margins}


def run(args, model, tok, stops, prompts, built: dict, cost_at_one, identity, device, dtype, sampling,
        fp32_model=None, info: dict | None = None) -> list[dict]:
    """Every method of `built` ({label: (drafter, budget)}) at every --concurrency; prints the tables, returns
    one summary per cell (and --json writes them). `fp32_model`: the same model loaded in float32, when `model`
    is in half precision (AR in each dtype are compared too). `info`: what the run ran on
    (bench_report.ran_on), the head of the --json file."""
    N, levels = args.max_new_tokens, sorted(set(args.concurrency))
    single = Engine(model)
    print(f"unbatched AR references of {len(prompts)} prompts ...", flush=True)
    refs = [generate(single, ids, Drafter(), N, stops, sampling) for _, ids in prompts]
    ar_alone = sum(len(r.tokens) for r in refs) / sum(r.wall_s for r in refs)
    half = half_against_fp32(fp32_model, refs, prompts, N, stops, sampling, dtype) if fp32_model is not None \
        else None
    batch = BatchEngine(model, max(levels))
    surface = cost_surface(batch, identity, device, dtype, max(levels)) if any(b.auto for _, b in built.values()) \
        else None
    names = ["ar", *(k for k in built if k != "ar")]
    cells: dict[tuple[str, int], Cell] = {}
    # memory=run state before anything ran: every pass at every concurrency starts from it (a spawned drafter
    # shares the original's state, so without this a level would start from the previous level's prompts).
    empty = {"ar": None, **{n: d.save_memory() if d.capabilities.memory else None for n, (d, _) in built.items()}}
    for c in levels:
        engine = BatchEngine(model, c)
        templates = armed_at(c, built, tok, args.model, cost_at_one, surface)
        initial = empty
        decode_batch(engine, [Request(ids, Drafter(), 8) for _, ids in prompts[:c]], stops, sampling)  # warm-up
        for rep in range(args.repeats):
            k = rep % len(names)
            walls = {}
            for name in names[k:] + names[:k]:
                t = templates[name]
                if initial[name] is not None:
                    t.restore_memory(initial[name])
                reqs = [Request(ids, t.spawn(), N) for _, ids in prompts]
                gens, wall = decode_batch(engine, reqs, stops, sampling, surface if c > 1 else None)
                walls[name] = (sum(len(g.tokens) for g in gens), wall)
                cell = cells.setdefault((name, c), Cell(name, c))
                for ttft, tpot in map(bench_report.latency_ms, gens):
                    cell.ttft_ms += [ttft] if ttft is not None else []
                    cell.tpot_ms += [tpot] if tpot is not None else []
                if rep == 0:
                    against_references(cell, gens, refs, dtype)
            ar_tps = walls["ar"][0] / walls["ar"][1]
            for name, (n_tok, wall) in walls.items():
                cells[(name, c)].tokens_per_s.append(n_tok / wall)
                cells[(name, c)].x_ar.append(n_tok / wall / ar_tps)
            print(f"  concurrency {c}: repeat {rep + 1} done", flush=True)
        print(flush=True)
    out = [cell.summary() for cell in cells.values()]
    report(out, levels, names, len(prompts), ar_alone)
    if args.json:
        head = info or bench_report.ran_on(args, identity, device, dtype, [], len(prompts), None)
        write_json(args, head, model, names, levels, refs, ar_alone, out, half)
    return out


def armed_at(c: int, built: dict, tok, model_name: str, cost_at_one, surface) -> dict:
    """Every method's template at concurrency `c`, AR's included: a fresh drafter per concurrency (nothing learned
    at another carries over), armed as alone at 1 (budget=auto prunes each draft on the cost curve) and for the
    batch above (which picks each request's width per step from the cost surface)."""
    templates = {"ar": Drafter()}
    for name, (d, b) in built.items():
        d = d.spawn()
        if c == 1:
            templates[name] = prepare_drafter(d, b, tok, model_name, cost_at_one)
        else:
            templates[name] = prepare_drafter(d, b, tok, model_name, lambda: surface.curve(1), defer=True)
    return templates


def against_references(cell: Cell, gens, refs, dtype) -> None:
    """A method's first pass at one concurrency against unbatched AR: exact, numerics or diverged per request
    (each non-exact one said), and the tokens, steps and widths its tau and width come from."""
    for g, ref in zip(gens, refs):
        v = classify(g, ref, dtype)
        cell.exact += v.kind == EXACT
        cell.numerics += v.kind == NUMERICS
        cell.diverged += v.kind not in (EXACT, NUMERICS)
        if v.kind != EXACT:
            cell.margins.append((v.margin, v.ar_margin, v.gap, v.ar_gap))
            print(f"    {cell.method} at concurrency {cell.concurrency}: {v.kind} at token {v.index}, margin "
                  f"{v.margin} here, {v.ar_margin} in AR; gap to the other's token {v.gap} here, {v.ar_gap} in AR",
                  flush=True)
        cell.tokens += len(g.tokens)
        cell.steps += g.steps
        cell.widths += g.widths
    print(f"    {cell.method} at concurrency {cell.concurrency}: {sum(len(g.tokens) for g in gens)} tokens, exact "
          f"{cell.exact} / numerics {cell.numerics} / diverged {cell.diverged}", flush=True)


def write_json(args, head: dict, model, names: list[str], levels: list[int], refs, ar_alone: float, out: list[dict],
               half: dict | None) -> None:
    """--json: the run and every cell; --figure: the plot drawn from that file."""
    alone = [bench_report.latency_ms(r) for r in refs]
    bench_report.write(args.json, {
        **head, "max_new_tokens": args.max_new_tokens, "repeats": args.repeats, "concurrency": levels,
        "backend": getattr(model, "goose_backend", "eager"), "methods": names,
        "ar_alone_single_engine_tokens_per_s": ar_alone,
        "ar_alone_single_engine_ttft_p50_ms": bench_report.percentile([a for a, _ in alone], 0.5),
        "ar_alone_single_engine_tpot_p50_ms": bench_report.percentile([t for _, t in alone], 0.5),
        "cells": out, "ar_against_float32": half})
    print(f"wrote {args.json}")
    if args.figure:
        from goose.analysis.concurrency import plot_bench  # start-up time: pandas and matplotlib only for --figure

        plot_bench(json.loads(Path(args.json).read_text())).savefig(args.figure, dpi=120, bbox_inches="tight")
        print(f"wrote {args.figure}")


def half_against_fp32(fp32_model, refs, prompts, N, stops, sampling, dtype) -> dict:
    """How much half precision alone moves the text: unbatched AR in `dtype` against unbatched AR of the same
    model loaded in float32, classified with `dtype`'s tolerance."""
    print("unbatched AR in float32, to compare AR in this dtype with ...", flush=True)
    single = Engine(fp32_model)
    counts = {EXACT: 0, NUMERICS: 0, "diverged": 0}
    for ref, (_, ids) in zip(refs, prompts):
        want = generate(single, ids, Drafter(), N, stops, sampling)
        v = classify(ref, want, dtype)
        counts[v.kind if v.kind in counts else "diverged"] += 1
        if v.kind != EXACT:
            print(f"  {v.kind} at token {v.index}: margin {v.margin} here, {v.ar_margin} in float32; gap to the "
                  f"other's token {v.gap} here, {v.ar_gap} in float32", flush=True)
    name = str(dtype).replace("torch.", "")
    print(f"AR in {name} against AR in float32 over {len(refs)} prompts: exact {counts[EXACT]} / numerics "
          f"{counts[NUMERICS]} / diverged {counts['diverged']} (tolerance {tolerance(dtype):.3g})", flush=True)
    return counts


def report(out: list[dict], levels: list[int], names: list[str], n: int, ar_alone: float) -> None:
    by = {(r["method"], r["concurrency"]): r for r in out}

    def ms(x):
        return "-" if x is None else f"{x:.0f}"

    print(f"| method | concurrency | tokens/s (median, min-max) | x AR (same concurrency) | TPOT p50 / p95 (ms) "
          f"| TTFT p50 / p95 (ms) | tau | nodes/verify | exact / numerics / diverged (of {n}) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in levels:
        for m in names:
            r = by[(m, c)]
            print(f"| {m} | {c} | {r['tokens_per_s']:.1f} ({r['tokens_per_s_min']:.1f}-{r['tokens_per_s_max']:.1f}) | "
                  f"{r['x_ar']:.2f} | {ms(r['tpot_p50_ms'])} / {ms(r['tpot_p95_ms'])} | {ms(r['ttft_p50_ms'])} / "
                  f"{ms(r['ttft_p95_ms'])} | {r['tau']:.2f} | "
                  f"{r['mean_width']:.1f} | {r['exact']} / {r['numerics']} / {r['diverged']} |")
    print("\nx batched AR at the same concurrency (AR = 1):")
    print("| method | " + " | ".join(f"c={c}" for c in levels) + " |\n|---|" + "---|" * len(levels))
    for m in names:
        print(f"| {m} | " + " | ".join(f"{by[(m, c)]['x_ar']:.2f}" for c in levels) + " |")
    ar1 = by[("ar", levels[0])]["tokens_per_s"]
    print("\nbatched AR's aggregate tokens/s over AR at concurrency " + f"{levels[0]}: "
          + ", ".join(f"c={c} {by[('ar', c)]['tokens_per_s'] / ar1:.2f}x" for c in levels))
    if 1 in levels:
        print(f"at concurrency 1 the batch engine's AR runs at {by[('ar', 1)]['tokens_per_s']:.1f} tokens/s, the "
              f"single-request engine's at {ar_alone:.1f} ({by[('ar', 1)]['tokens_per_s'] / ar_alone:.2f}x)")
    differing = [(r["method"], r["concurrency"], m) for r in out for m in r["margins"]]
    if differing:
        print("\nrequests that differ from unbatched AR (method, concurrency: margin here vs AR's; gap to the other's"
              " token here vs AR's):")
        for method, c, (mine, ar, gap, ar_gap, *_) in differing:
            print(f"  {method} c={c}: {mine} vs {ar}; {gap} vs {ar_gap}")


