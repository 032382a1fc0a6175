"""`make reproduce-serving PROFILE=local`: AR (batched), PLD, GOOSE (budget=auto) and the n-gram drafters serving
engines ship (SGLang's, vLLM's, llama.cpp's ngram-mod) served by goose-serve in turn,
each driven by GuideLLM at request rates from light load to saturation, then the rows, the latency-throughput figure
and the results page, and every method's served greedy tokens checked against offline decoding.

    python -m goose.measurement.serving_experiment --profile local --results results/local/serving --out docs/results
    python -m goose.measurement.serving_experiment --profile paper --plan      (the GPU profile's plan, nothing run)

Per method: `goose-serve` in its own process on a free 127.0.0.1 port; GuideLLM's Poisson arrivals at each rate
(goose.measurement.serving_load: every rate bounded in requests and seconds, fixed-length answers at temperature
0); then the profile's prompts once more, all at once with `return_token_ids`, each answer's ids compared with
`goose.running.loop.generate`'s AR tokens for the same prompt ids (greedy: every method's are AR's), and each of
GuideLLM's answers under load compared by text with the checked answer to the same prompt; then SIGTERM (the server
drains). The page says where each method stops paying against AR (goose.analysis.serving.stops_paying).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

from goose.analysis.serving import Slo, figure, printable, read_rows, stops_paying, summarize
from goose.analysis.writers import save_figure
from goose.benchmarks.prompts import load_prompts
from goose.drafting.contract import memory_label
from goose.engine.backends import device_name
from goose.errors import GooseError
from goose.experiments.sweep_plan import duration
from goose.measurement import serving_load
from goose.models.loading import identify_model
from goose.running.decoding import load_engine
from goose.running.loop import generate
from goose.running.registry import compose_config, load_method, make_drafter
from goose.running.runner import checked_spec

REFERENCE = "ar"


@dataclass(frozen=True)
class Profile:
    model: str
    device: str
    concurrency: int
    methods: tuple[tuple[str, tuple[str, ...]], ...]  # (label, goose-serve settings)
    rates: tuple[float, ...]
    max_requests: int
    max_seconds: float
    max_tokens: int
    prompts: str
    n_prompts: int
    slo_ttft_ms: float
    slo_tpot_ms: float
    start_s: float  # a server's start (model load; budget=auto's cost surface when cached)
    tokens_per_s: float  # the batch's output tokens per second at saturation, AR: the estimate's only rate


METHODS = (("ar", ("method=ar",)), ("pld", ("method=pld", "budget=auto")), ("goose", ("method=goose", "budget=auto")),
           # the drafters serving engines ship (#70), at their sources' defaults (a number: their own drafts unpruned)
           ("sglang-ngram", ("method=sglang-ngram", "budget=60")), ("vllm-ngram", ("method=vllm-ngram", "budget=60")),
           ("llamacpp-ngram-mod", ("method=llamacpp-ngram-mod", "budget=60")),
           ("llamacpp-ngram-simple", ("method=llamacpp-ngram-simple", "budget=60")))
PROFILES = {
    # this 2-core CPU: SmolLM2 at 4 rows serves about 40 tokens/s (AR), so 48-token answers saturate near 1 req/s
    "local": Profile("smollm2-135m", "cpu", 4, METHODS, (0.2, 0.5, 1.0, 2.0), 10, 40.0, 48, "humaneval", 10,
                     2000.0, 150.0, 20.0, 40.0),
    # one GPU (not measured here): the paper's first model, 16 rows, rates up to well past a 7B model's saturation
    "paper": Profile("vicuna-7b", "cuda", 16, METHODS, (1.0, 2.0, 4.0, 8.0, 16.0, 32.0), 200, 120.0, 256,
                     "mt_bench", 80, 1000.0, 50.0, 60.0, 1500.0),
}


def estimate_s(p: Profile) -> float:
    """An upper bound's estimate: per method its start, per rate the bound's seconds or the requests' arrivals and
    the queue they leave behind at the AR rate, then the check's prompts; the offline reference once."""
    per_rate = [min(p.max_seconds, p.max_requests / r) + p.max_requests * p.max_tokens / p.tokens_per_s / 2
                for r in p.rates]
    check = p.n_prompts * p.max_tokens / p.tokens_per_s
    guidellm_start = 15.0
    return len(p.methods) * (p.start_s + guidellm_start + sum(per_rate) + check) + check * p.concurrency


def plan(profile: str, results: str, out: str) -> list[str]:
    p = PROFILES[profile]
    methods = ", ".join(f"{label} ({' '.join(s)})" for label, s in p.methods)
    where = "this repository's 2-core machine, idle" if profile == "local" else "one GPU (a rough model, not measured)"
    return [f"== serving with PROFILE={profile}: goose-serve model={p.model} concurrency={p.concurrency} for "
            f"{methods}, each under GuideLLM's Poisson load at {', '.join(f'{r:g}' for r in p.rates)} req/s "
            f"({p.max_requests} requests or {p.max_seconds:g} s per rate, {p.max_tokens}-token answers to "
            f"{p.prompts}'s first {p.n_prompts} prompts), then the lossless check; rows into {results}, the figure "
            f"and serving.md into {out}",
            f"== about {duration(estimate_s(p))} on {where}"]


class Server:
    """`goose-serve` in its own process on a free port, its log in a file; stopped by SIGTERM (it drains)."""

    def __init__(self, settings: list[str], log: Path, timeout_s: float = 900):
        self.log = log
        cmd = [sys.executable, "-m", "goose.serving.command", *settings, "--port", "0", "--queue-size", "256"]
        self.proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.time() + timeout_s
        while not (m := re.search(r"\[goose\] serving .*: (http://\S+/v1)", log.read_text())):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise GooseError(f"goose-serve {' '.join(settings)} did not start: {log}")
            time.sleep(0.5)
        self.url = m.group(1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def post(url: str, body: dict, timeout: float = 600) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def served_answers(url: str, prompts: list[str], max_tokens: int, rows: int) -> list[dict]:
    """Every prompt's greedy answer with its ids, asked as GuideLLM asks (fixed length), `rows` at once."""
    body = {"max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, "stop": None, "return_token_ids": True}
    with ThreadPoolExecutor(rows) as pool:
        return list(pool.map(lambda p: post(f"{url}/completions", {**body, "prompt": p}), prompts))


class Offline:
    """AR's greedy tokens from goose.running.loop.generate on the profile's model, loaded once, no stop id (the
    served answers ignore EOS)."""

    def __init__(self, model: str, device: str):
        self.spec = checked_spec(compose_config([f"model={model}", "method=ar", f"device={device}"]))
        self.engine, _, _ = load_engine(self.spec, identify_model(self.spec.model))
        self.drafter = lambda: make_drafter(self.spec.method, self.spec.budget)
        self.cache: dict[tuple[int, ...], list[int]] = {}

    def tokens(self, prompt: list[int], n: int) -> list[int]:
        key = tuple(prompt)
        if key not in self.cache:
            self.cache[key] = generate(self.engine, prompt, self.drafter(), n).tokens
        return self.cache[key]


def under_load_texts(report: Path) -> dict[str, list[str]]:
    """GuideLLM's successful answers by prompt: what the server sent under load."""
    found: dict[str, list[str]] = {}
    for bench in json.loads(report.read_text())["benchmarks"]:
        for r in bench["requests"].get("successful") or []:
            prompt = json.loads(r.get("request_args") or "{}").get("body", {}).get("prompt")
            if prompt is not None and r.get("output") is not None:
                found.setdefault(prompt, []).append(r["output"])
    return found


def lossless(answers: list[dict], prompts: list[str], offline: Offline, max_tokens: int, report: Path) -> dict:
    exact = sum(a["choices"][0]["token_ids"] == offline.tokens(a["prompt_token_ids"], max_tokens) for a in answers)
    checked = {p: a["choices"][0]["text"] for p, a in zip(prompts, answers)}
    loaded = under_load_texts(report)
    same = sum(t == checked[p] for p, ts in loaded.items() if p in checked for t in ts)
    return {"exact": exact, "checked": len(answers), "under_load_same": same,
            "under_load": sum(len(ts) for p, ts in loaded.items() if p in checked)}


def run(profile: str, results: Path, out: Path) -> None:
    p = PROFILES[profile]
    results.mkdir(parents=True, exist_ok=True)
    (results / "rows.csv").unlink(missing_ok=True)
    prompts = [q.text for q in load_prompts(p.prompts, turns=1)[:p.n_prompts]]
    offline = Offline(p.model, p.device)
    checks = {}
    for label, settings in p.methods:
        folder = results / label
        folder.mkdir(exist_ok=True)
        print(f"== {label}: goose-serve {' '.join(settings)}", flush=True)
        server = Server([f"model={p.model}", f"device={p.device}", f"concurrency={p.concurrency}", *settings],
                        folder / "server.log")
        try:
            args = serving_load.parse(["--target", server.url, "--label", label, "--tokenizer", p.model,
                                       "--prompts", p.prompts, "--n-prompts", str(p.n_prompts), "--profile", "poisson",
                                       "--rate", *map(str, p.rates), "--max-requests", str(p.max_requests),
                                       "--max-seconds", str(p.max_seconds), "--max-tokens", str(p.max_tokens),
                                       "--out", str(folder)])
            rows = serving_load.load(args)
            answers = served_answers(server.url, prompts, p.max_tokens, p.concurrency)
        finally:
            server.stop()
        checks[label] = lossless(answers, prompts, offline, p.max_tokens, folder / "guidellm.json")
        with (results / "rows.csv").open("a") as f:
            text = rows.read_text()
            f.write(text if f.tell() == 0 else text.split("\n", 1)[1])
        print(f"   lossless: {checks[label]}", flush=True)
    (results / "lossless.json").write_text(json.dumps(checks, indent=1))
    (results / "measured_on.json").write_text(json.dumps(measured_on(offline), indent=1))
    write_page(p, profile, results, out)


def measured_on(offline: Offline) -> dict:
    """What the page says the rows were measured on: the model's content, the device, torch, the code's commit."""
    ident = identify_model(offline.spec.model)
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                                cwd=Path(__file__).parent, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return {"date": datetime.date.today().isoformat(), "model": f"{ident.label} (fingerprint {ident.fingerprint[:12]})",
            "device": device_name(offline.engine.device), "cores": os.cpu_count(), "machine": platform.machine(),
            "torch": torch.__version__, "commit": commit or "not a git checkout"}


def write_page(p: Profile, profile: str, results: Path, out: Path) -> None:
    """serving.md, the figure and the rows they are made of (serving.csv, named on the page by its sha256) from
    what `run` left in `results`."""
    checks = json.loads((results / "lossless.json").read_text())
    on = json.loads((results / "measured_on.json").read_text())
    slo = Slo(p.slo_ttft_ms / 1000, p.slo_tpot_ms / 1000)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results / "rows.csv", out / "serving.csv")
    digest = hashlib.sha256((out / "serving.csv").read_bytes()).hexdigest()[:12]
    summary = summarize(read_rows(out / "serving.csv"), slo)
    summary.to_csv(results / "summary.csv", index=False)
    save_figure(figure(summary, slo), out, "serving")
    table = printable(summary, slo).drop(columns=["profile"])
    keep = [c for c in table.columns if not re.match(r"(itl|e2e|ttft|tpot) p90", c)]
    lossless_lines = [f"- {m}: {c['exact']}/{c['checked']} answers' token ids equal offline AR's; under load, "
                      f"{c['under_load_same']}/{c['under_load']} of GuideLLM's answers equal the checked text"
                      for m, c in checks.items()]
    page = [f"# Serving under load: {p.model}, AR against PLD, GOOSE (budget=auto) and the serving engines' "
            "n-gram drafters", "",
            f"Measured: {on['date']}, `make reproduce-serving PROFILE={profile}`, code {on['commit']}. On: "
            f"{on['model']}, {on['device']} ({on['cores']} cores, {on['machine']}), torch {on['torch']}; goose-serve "
            f"concurrency={p.concurrency}; GuideLLM's Poisson arrivals, {p.max_requests} requests or "
            f"{p.max_seconds:g} s per rate, {p.max_tokens}-token answers (ignore_eos, temperature 0) to "
            f"{p.prompts}'s first {p.n_prompts} prompts. Rows: `serving.csv` beside this page (sha256 {digest}, a copy "
            f"of `{results / 'rows.csv'}`); definitions: docs/serving.md (\"GuideLLM's numbers and ours\").", "",
            table[keep].to_markdown(index=False), "", *_kept_across(p), "## Where each method stops paying", "",
            *[f"- {line}" for line in stops_paying(summary, REFERENCE)], "", "## Lossless", "", *lossless_lines, "",
            "![latency against throughput](serving.png)", ""]
    (out / "serving.md").write_text("\n".join(page))
    print("\n".join(page), flush=True)


def _kept_across(p: Profile) -> list[str]:
    """A sentence on the methods that keep what they saw across requests (memory=run): GuideLLM sends the same
    prompts at every rate, so from the second rate on such a method has seen every answer."""
    kept = []
    for label, settings in p.methods:
        given = dict(s.split("=", 1) for s in settings)
        method, _ = load_method(given["method"], p.model)
        if given.get("memory", memory_label(method.config)) == "run":
            kept.append(label)
    if not kept:
        return []
    return [f"Kept across requests (memory=run, as their engines keep them): {', '.join(kept)}. GuideLLM sends the "
            f"same {p.n_prompts} prompts at every rate, so from the second rate on these have seen every answer and "
            "can draft it whole; a stream of new prompts would not give them that. Methods that draft from the "
            "request alone are not helped.", ""]


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.measurement.serving_experiment", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="local")
    ap.add_argument("--results", default=None, help="rows, reports, logs (default results/PROFILE/serving)")
    ap.add_argument("--out", default=None, help="serving.md and the figure (default docs/results for local)")
    ap.add_argument("--plan", action="store_true", help="print the plan and its estimate; run nothing")
    ap.add_argument("--page", action="store_true",
                    help="only write the page, figure and serving.csv again from the rows already in --results")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    results = Path(args.results or f"results/{args.profile}/serving")
    out = Path(args.out or ("docs/results" if args.profile == "local" else results / "artifacts"))
    print("\n".join(plan(args.profile, str(results), str(out))), flush=True)
    if args.plan:
        return
    try:
        if args.page:
            if not (results / "measured_on.json").exists():
                raise GooseError(f"{results} holds no finished run (measured_on.json): run without --page first")
            write_page(PROFILES[args.profile], args.profile, results, out)
            return
        run(args.profile, results, out)
    except GooseError as e:
        raise SystemExit(f"error: {e}") from None


if __name__ == "__main__":
    main()
