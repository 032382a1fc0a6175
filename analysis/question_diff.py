"""Per-question equality of two runs of the same thing: every question compared token by token, missing and
extra questions listed, the first divergence shown as text (never cut at the shorter output) and classed
(goose.storage.equality: exact, numerics or diverged). Questions are matched by id and must be the same question in
both runs (their prompt fingerprints): two runs of different prompts that share ids are not compared.

The two runs must also be of the same model (its fingerprint), sampling (greedy, or the same temperature, top_k,
top_p and seed), length (max_new_tokens), chat template and stop rule (the model's EOS and each question's
new-token limit, max_new_tokens or the context's cap): a run of another model or setting reads other tokens
for that reason, and a class would call it numerics or a bug. Such runs are not compared: one line names
what differs, with both values (exit 2). What the report is for may differ: dtype, backend, device,
concurrency, method, budget, memory. Both runs' settings head the report. Two dtypes are held to the coarser
one's tolerance (goose.storage.equality.coarser). Reading never writes into the run folders.

    python -m goose.analysis.reproduce equality --a RUN_FOLDER --b RUN_FOLDER
    exit 0: equal; 1: not equal; 2: could not compare (the reason is printed)
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from goose.engine.sampling import Sampling
from goose.errors import GooseError
from goose.storage.equality import DIVERGED, NUMERICS, classify, coarser, tolerance
from goose.storage.metrics import first_divergence
from goose.storage.result_files import OutputsFile, ResultsFile
from goose.storage.row_schema import upgrade

CONTEXT = 40  # characters shown before and after a divergence
EQUAL, NOT_EQUAL, CANNOT_COMPARE = 0, 1, 2


class CannotCompare(Exception):
    """The two runs cannot be compared (exit 2): no outputs, damaged outputs, no question in common (runs of two
    benchmarks), different questions, or runs of another model, sampling, length, chat template or stop rule (one
    line naming it)."""


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
        shown = ", ".join(str(p.parent) for p in found[:4]) + (", ..." if len(found) > 4 else "")
        raise CannotCompare(f"{folder} holds {len(found)} runs; name one run folder: {shown}")
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


def _rows(run: Path, records: dict[str, dict]) -> dict[str, dict]:
    """prompt id -> the latest intact row of results.csv of the configuration its outputs were written by
    (read as this row schema reads it); empty without a results.csv."""
    path = run / "results.csv"
    if not path.is_file():
        return {}
    hashes = {r.get("config_hash") for r in records.values()}
    return {r.get("prompt_id"): upgrade(r) for r in ResultsFile(path).rows() if r.get("config_hash") in hashes}


def _flag(v) -> str:
    return "true" if str(v).strip().lower() in ("true", "1") else "false"


def _whole(v) -> str:
    try:
        return str(int(float(v)))
    except (TypeError, ValueError):
        return str(v)


def _sampling(temperature, top_k, top_p, seed) -> str:
    """`greedy`, or the settings that decide a sampled token (a greedy run's top_k, top_p and seed change none)."""
    try:
        s = Sampling(float(temperature), int(float(top_k)), float(top_p), int(float(seed)))
    except (TypeError, ValueError, GooseError):
        return f"temperature={temperature}, top_k={top_k}, top_p={top_p}, seed={seed}"
    return "greedy" if s.greedy else ", ".join(f"{k}={v}" for k, v in s.settings().items())


def _dtype(v) -> str:
    return str(v).replace("torch.", "")


SAMPLING = ("temperature", "top_k", "top_p", "seed")
# name -> (its value in config.yaml, in a row, as text): recorded in both places, each read where it is
RECORDED = {
    "model fingerprint": (lambda c: (c.get("identity") or {}).get("model_fingerprint"),
                          lambda r: r.get("model_fingerprint"), str),
    "sampling": (lambda c: tuple(c.get(k) for k in SAMPLING), lambda r: tuple(r.get(k) for k in SAMPLING),
                 lambda v: _sampling(*v)),
    "max_new_tokens": (lambda c: c.get("max_new_tokens"), lambda r: r.get("max_new_tokens"), _whole),
    "chat template": (lambda c: c.get("chat_template"), lambda r: r.get("chat_template"), _flag),
    "dtype": (lambda c: (c.get("identity") or {}).get("dtype"), lambda r: r.get("dtype"), _dtype),
}
SAME = ("model fingerprint", "sampling", "max_new_tokens", "chat template")  # else another run's tokens


def _known(v) -> bool:
    return v is not None and v != "" and not (isinstance(v, tuple) and any(x is None or x == "" for x in v))


@dataclass
class Run:
    """One side: its folder, outputs, config.yaml and rows, and what they record of how it ran."""

    folder: Path
    records: dict[str, dict]
    config: dict = field(default_factory=dict)
    rows: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def of(cls, folder: Path) -> Run:
        run, records = outputs_of(folder)
        return cls(run, records, _config(run), _rows(run, records))

    def setting(self, name: str) -> str:
        """A RECORDED setting as config.yaml and every row record it: one value, or CannotCompare."""
        at_config, at_row, text = RECORDED[name]
        found = [text(v) for v in [at_config(self.config), *map(at_row, self.rows.values())] if _known(v)]
        if not found:
            raise CannotCompare(f"{self.folder} does not record its {name} (no config.yaml saying it, no row in "
                                "results.csv): whether it ran like the other run is unknown")
        if len(set(found)) > 1:
            raise CannotCompare(f"{self.folder} records more than one {name} ({', '.join(sorted(set(found)))}) in "
                                "its config.yaml and results.csv: rerun it into a fresh folder")
        return found[0]

    def limit(self, q: str) -> str | None:
        """Question q's new-token limit as its row records it (the context's cap, else max_new_tokens)."""
        r = self.rows.get(q)
        if r is None:
            return None
        return _whole(r.get("capped_at") or r.get("max_new_tokens") or self.setting("max_new_tokens"))

    def recorded(self, key: str, default: str = "?") -> str:
        """A label as the summary records it, else the rows (budget, memory: the config's raw value may not
        apply), else `default`."""
        try:
            summary = json.loads((self.folder / "summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        if summary.get(key) not in (None, ""):
            return str(summary[key])
        values = {str(r.get(key)) for r in self.rows.values() if r.get(key) not in (None, "")}
        return values.pop() if len(values) == 1 else default

    def method(self) -> str:
        return self.recorded("method", str((self.config.get("method") or {}).get("name", "?")))

    def benchmark(self) -> str:
        return str((self.config.get("benchmark") or {}).get("name") or self.recorded("benchmark"))

    def header(self) -> dict[str, str]:
        """What the report's header shows of this run."""
        c = self.config
        capped = sum(1 for r in self.rows.values() if r.get("capped_at") not in (None, ""))
        n = self.setting("max_new_tokens")
        return {
            "model (fingerprint)": f"{self.recorded('model', str((c.get('model') or {}).get('name', '?')))} "
                                   f"({self.setting('model fingerprint')})",
            "sampling": self.setting("sampling"),
            "max_new_tokens": n,
            "chat template": self.setting("chat template"),
            "stop rule": f"the model's EOS, or {n} new tokens"
                         + (f" ({capped} question(s) capped by the context)" if capped else ""),
            "dtype": self.setting("dtype"),
            "method": f"{self.method()} (B={self.recorded('budget')}, memory={self.recorded('memory')})",
            "concurrency": _whole(c.get("concurrency", self.recorded("concurrency", "1"))),
            "benchmark": self.benchmark(),
            "backend, device": f"{(c.get('identity') or {}).get('backend') or self.recorded('backend')}, "
                               f"{(c.get('identity') or {}).get('device') or self.recorded('device')}",
        }


def _same_thing(a: Run, b: Run, common: list[str]) -> None:
    """CannotCompare (one line, both values) unless A and B ran the same model, sampling, length, chat template
    and stop rule (the model's EOS, which its fingerprint covers, and each question's new-token limit): their
    tokens would differ for that reason, whatever the numerics."""
    differ = [f"{name} (A: {va}, B: {vb})" for name in SAME if (va := a.setting(name)) != (vb := b.setting(name))]
    limits = [(q, la, lb) for q in common if (la := a.limit(q)) and (lb := b.limit(q)) and la != lb]
    if limits and a.setting("max_new_tokens") == b.setting("max_new_tokens"):
        q, la, lb = limits[0]
        more = f" and {len(limits) - 1} more question(s)" if len(limits) > 1 else ""
        differ.append(f"stop rule ({q}{more} stop at A: {la}, B: {lb} new tokens: the context's cap, capped_at)")
    if differ:
        raise CannotCompare(f"A and B differ in {'; '.join(differ)}: their tokens differ for that reason, "
                            "not by numerics or a bug, so they are not compared (runs compared may differ in dtype, "
                            f"backend, device, concurrency and method only). A: {a.folder}, B: {b.folder}")


def _describe(run: Run) -> str:
    """The run as its rows record it (summary.json, else results.csv: method, budget label, memory), with its
    benchmark, concurrency and dtype; the config's raw budget would say B=60 for a method no budget changes, so
    without either the budget and memory are shown as unknown."""
    h = run.header()
    return (f"{run.folder} ({run.method()}, B={run.recorded('budget')}, memory={run.recorded('memory')}, "
            f"{h['benchmark']}, concurrency {h['concurrency']}, {h['dtype']})")


def _show(pieces: list[str], start: int) -> str:
    text = "".join(pieces[start:])[:CONTEXT]
    return json.dumps(text, ensure_ascii=False) if text else "(ends here)"


def _table(a: Run, b: Run) -> list[str]:
    """Both runs' settings, side by side: those that must agree (model to stop rule), then those the report
    compares across."""
    ha, hb = a.header(), b.header()

    def cell(v: str) -> str:
        return str(v).replace("|", "\\|")

    return ["| | A | B |", "|---|---|---|",
            *(f"| {k} | {cell(ha[k])} | {cell(hb[k])} |" for k in ha), ""]


def compare(a: Path, b: Path) -> tuple[str, int]:
    """(a markdown report, EQUAL or NOT_EQUAL); CannotCompare when the runs are not comparable."""
    side_a, side_b = Run.of(a), Run.of(b)
    run_a, out_a, run_b, out_b = side_a.folder, side_a.records, side_b.folder, side_b.records
    common = [q for q in out_a if q in out_b]
    if not common:
        ba, bb = side_a.benchmark(), side_b.benchmark()
        which = (f"A is of benchmark {ba}, B of benchmark {bb}" if ba != bb else f"both of benchmark {ba}")
        raise CannotCompare(f"A and B have no question in common ({which}; A's {len(out_a)} question(s): "
                            f"{', '.join(list(out_a)[:3])}{', ...' if len(out_a) > 3 else ''}; B's {len(out_b)}: "
                            f"{', '.join(list(out_b)[:3])}{', ...' if len(out_b) > 3 else ''}): nothing to compare. "
                            f"A: {run_a}, B: {run_b}")
    other = [q for q in common if out_a[q]["prompt_fingerprint"] != out_b[q]["prompt_fingerprint"]]
    if other:
        raise CannotCompare(f"{len(other)} of the {len(common)} shared question id(s) are different questions in A "
                            f"and B (their prompts differ: {', '.join(other[:8])}{', ...' if len(other) > 8 else ''}); "
                            f"these runs are of different prompts. A: {run_a}, B: {run_b}")
    _same_thing(side_a, side_b, common)
    only_a = [q for q in out_a if q not in out_b]
    only_b = [q for q in out_b if q not in out_a]
    try:
        dtype = str(coarser(side_a.setting("dtype"), side_b.setting("dtype"))).replace("torch.", "")
    except ValueError as e:
        raise CannotCompare(f"no tolerance for these runs' dtypes: {e}") from None
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
    meaning = {NUMERICS: f"numerics: a near-tie read two ways, within {dtype}'s tolerance ({tolerance(dtype):g})",
               DIVERGED: "diverged: a difference no near-tie explains (a gap beyond the tolerance, or the other's "
                         "token not among a run's best, or one stopped where the other went on): a bug until shown "
                         "otherwise"}
    why = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    why = f" ({'; '.join([why, *(meaning[k] for k in sorted(kinds) if k in meaning)])})" if kinds else ""
    lines = [f"# Equality, question by question\n\nA: {_describe(side_a)}\nB: {_describe(side_b)}\n",
             *_table(side_a, side_b),
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
