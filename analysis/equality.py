"""Per-question equality of two runs: every question compared token by token, missing and extra
questions listed, the first divergence shown as text (never cut at the shorter output). Questions are
matched by id and must be the same question in both runs (their prompt fingerprints): two runs of
different prompts that share ids are not compared. Reading never writes into the run folders.

    python analysis/reproduce.py equality --a RUN_FOLDER --b RUN_FOLDER
    exit 0: equal; 1: not equal; 2: could not compare (the reason is printed)
"""

from __future__ import annotations

import json
from pathlib import Path

from goose.metrics import first_divergence
from goose.results import OutputsFile

CONTEXT = 40  # characters shown before and after a divergence
EQUAL, NOT_EQUAL, CANNOT_COMPARE = 0, 1, 2


class CannotCompare(Exception):
    """The two runs cannot be compared (exit 2): no outputs, damaged outputs, or different questions."""


def outputs_of(folder: Path) -> tuple[Path, dict[str, dict]]:
    """The outputs.jsonl of a run folder (or of the one run folder below `folder`), read without writing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CannotCompare(f"{folder} is not a folder (give a run folder, one that holds outputs.jsonl)")
    found = [folder / "outputs.jsonl"] if (folder / "outputs.jsonl").is_file() else \
        sorted(folder.rglob("outputs.jsonl"))
    if not found:
        raise CannotCompare(f"no outputs.jsonl in or under {folder} (runs write one per run folder; folders written "
                            "before outputs were kept cannot be compared)")
    if len(found) > 1:
        raise CannotCompare(f"{folder} holds {len(found)} runs; name one run folder:\n  "
                            + "\n  ".join(str(p.parent) for p in found))
    outputs = OutputsFile(found[0])
    records = outputs.read()
    if outputs.damaged:
        raise CannotCompare("damaged outputs line(s): " + "; ".join(map(str, outputs.damaged[:5]))
                            + ". Rerun that run's command: it decodes those questions again.")
    old = [q for q, r in records.items() if not r.get("prompt_fingerprint")]
    if old:
        raise CannotCompare(f"{found[0]} was written before outputs kept the fingerprint of each question "
                            f"({', '.join(old[:5])}...): which prompt each answers is unknown. Rerun it.")
    return found[0].parent, records


def _config(run: Path) -> dict:
    cfg = run / "config.yaml"
    if not cfg.is_file():
        return {}
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(cfg))


def _describe(run: Path) -> str:
    """The run as its rows record it (summary.json: method, budget label, memory), with its benchmark,
    concurrency and dtype; the config's raw budget would say B=60 for a method no budget changes, so without a
    summary the budget and memory are shown as unknown."""
    c = _config(run)
    if not c:
        return str(run)
    try:
        recorded = json.loads((run / "summary.json").read_text())
    except (OSError, ValueError):
        recorded = {}
    method = recorded.get("method", c.get("method", {}).get("name"))
    budget = recorded.get("budget", "?")  # no summary (a run stopped early): the config's raw value may not apply
    memory = recorded.get("memory", "?")
    return (f"{run} ({method}, B={budget}, memory={memory}, {c.get('benchmark', {}).get('name')}, "
            f"concurrency {c.get('concurrency', 1)}, {c.get('identity', {}).get('dtype', '?')})")


def _show(pieces: list[str], start: int) -> str:
    text = "".join(pieces[start:])[:CONTEXT]
    return json.dumps(text, ensure_ascii=False) if text else "(ends here)"


def compare(a: Path, b: Path) -> tuple[str, int]:
    """(a markdown report, EQUAL or NOT_EQUAL); CannotCompare when the runs are not comparable."""
    run_a, out_a = outputs_of(a)
    run_b, out_b = outputs_of(b)
    common = [q for q in out_a if q in out_b]
    other = [q for q in common if out_a[q]["prompt_fingerprint"] != out_b[q]["prompt_fingerprint"]]
    if other:
        raise CannotCompare(f"{len(other)} of the {len(common)} shared question id(s) are different questions in A "
                            f"and B (their prompts differ: {', '.join(other[:8])}{', ...' if len(other) > 8 else ''}); "
                            f"these runs are of different prompts.\n  A: {run_a}\n  B: {run_b}")
    only_a = [q for q in out_a if q not in out_b]
    only_b = [q for q in out_b if q not in out_a]
    from goose.equality import classify

    dtypes = {str(_config(r).get("identity", {}).get("dtype", "float32")) for r in (run_a, run_b)}
    dtype = "float32" if dtypes == {"float32"} else max(dtypes - {"float32"}, default="float32")  # the coarser
    differ, kinds = [], {}
    for q in common:
        a, b = out_a[q], out_b[q]
        ta, tb = a["tokens"], b["tokens"]
        i = first_divergence(ta, tb)
        if i is not None:
            v = classify(b, a, dtype)
            kinds[v.kind] = kinds.get(v.kind, 0) + 1
            pa, pb = a["pieces"], b["pieces"]
            before = "".join(pa[:i])[-CONTEXT:]
            margins = " / ".join("-" if m is None else f"{m:.3g}" for m in (v.ar_margin, v.margin))
            gaps = " / ".join("-" if m is None else f"{m:.3g}" for m in (v.ar_gap, v.gap))
            differ.append((q, len(ta), len(tb), i, v.kind, margins, gaps, json.dumps(before, ensure_ascii=False),
                           _show(pa, i), _show(pb, i)))
    why = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    why = f" ({why}; numerics: a near-tie read two ways, within {dtype}'s tolerance)" if kinds else ""
    lines = [f"# Equality, question by question\n\nA: {_describe(run_a)}\nB: {_describe(run_b)}\n",
             f"- compared {len(common)} question(s) present in both: {len(common) - len(differ)} identical, "
             f"{len(differ)} differ{why}",
             f"- in A only ({len(only_a)}): {', '.join(only_a) or '-'}",
             f"- in B only ({len(only_b)}): {', '.join(only_b) or '-'}"]
    if differ:
        lines += ["", "| question | tokens A | tokens B | first divergence (token) | class | margin A / B | gap to "
                  "the other's token A / B | text before | A from there | B from there |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |" for row in differ]
    same = not differ and not only_a and not only_b
    lines += ["", "EQUAL: every question identical, none missing" if same else "NOT EQUAL"]
    return "\n".join(lines) + "\n", EQUAL if same else NOT_EQUAL
