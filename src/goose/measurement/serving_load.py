r"""Load on an OpenAI-compatible server from GuideLLM, the vLLM project's load generator, read into the harness's rows.

    python -m goose.measurement.serving_load --target http://127.0.0.1:8000/v1 --label goose-auto \
        --tokenizer smollm2-135m --prompts humaneval --profile poisson --rate 0.5 1 2 --max-requests 12 \
        --max-seconds 60 --max-tokens 64 --out results/serving-load --slo-ttft-ms 2000 --slo-tpot-ms 150

GuideLLM (`make guidellm`) sends the requests over HTTP and times them; this module only writes its scenario (the
profile and rates, the constraints that bound every rate, the prompts, the tokenizer) and runs `guidellm run` once,
then reads its JSON report (OUT/guidellm.json) into rows (OUT/rows.csv, goose.measurement.guidellm_report) and prints
per rate the percentiles, throughput and goodput at the SLO (goose.analysis.serving). `--report FILE` reads a report
already written (by this module or by `guidellm run --output kind=json,...` against any server) without running.

The target is any OpenAI-compatible server (goose-serve, vLLM, SGLang, llama.cpp's server): the same command gives
rows the analysis reads beside ours. Requests are completions of fixed length: each asks for exactly --max-tokens new
tokens (GuideLLM then sends `ignore_eos: true` and `stop: null`) at temperature 0, so every method decodes the same
tokens and a rate's load does not depend on where a model would stop. Tokens are counted with --tokenizer: a goose
model name (its local folder: no network), a folder, or a hub id.

Profiles are GuideLLM's: synchronous (one request at a time), concurrent (--rate: streams), constant and poisson
(--rate: requests per second), sweep (synchronous, throughput, then --sweep-size - 2 rates between). Every rate is
bounded by --max-requests and --max-seconds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from goose.analysis.serving import SLO_TPOT_MS, SLO_TTFT_MS, Slo, printable, read_rows, summarize
from goose.benchmarks.prompts import load_prompts
from goose.errors import GooseError
from goose.measurement.guidellm_report import read_report, write_rows
from goose.models.loading import model_config, model_config_names, model_folder

PROFILES = ("synchronous", "concurrent", "constant", "poisson", "sweep")
SLACK_S = 120  # a run's wall-clock bound beyond its rates' --max-seconds: GuideLLM's start, the last requests' ends


def tokenizer_source(name: str) -> str:
    """What GuideLLM loads the tokenizer from: a goose model's local folder (converted once, as goose loads it), else
    the name as given (a folder or a hub id)."""
    if name in model_config_names():
        return model_folder(model_config(name), dtype="float32")
    return name


def prompts_file(benchmark: str, n: int, out: Path, max_tokens: int) -> Path:
    """The first `n` prompts of a goose benchmark as GuideLLM's JSONL: their text, each answer `max_tokens` long."""
    prompts = load_prompts(benchmark, turns=1)[:n]
    path = out / f"prompts-{benchmark}-{len(prompts)}.jsonl"
    path.write_text("".join(json.dumps({"prompt": p.text, "output_tokens_count": max_tokens}) + "\n"
                            for p in prompts))
    return path


def profile_args(profile: str, rates: list[float], sweep_size: int) -> dict:
    if profile == "synchronous":
        return {"kind": "synchronous"}
    if profile == "concurrent":
        return {"kind": "concurrent", "streams": [int(r) for r in rates]}
    if profile == "sweep":
        return {"kind": "sweep", "sweep_size": sweep_size}
    return {"kind": profile, "rate": rates}


def scenario(args: argparse.Namespace, data: dict, tokenizer: str, report: Path) -> dict:
    """GuideLLM's scenario (its BenchmarkScenario: one spec, every rate a benchmark of it)."""
    backend = {"kind": "openai_http", "target": args.target, "request_format": "/v1/completions",
               "extras": {"body": {"temperature": 0, **json.loads(args.extra_body)}}}
    if args.model:
        backend["model"] = args.model
    if args.api_key:
        backend["api_key"] = args.api_key
    return {"metadata": {"labels": {"method": args.label}},
            "spec": {"backend": backend,
                     "profile": profile_args(args.profile, args.rate, args.sweep_size),
                     "constraints": [{"kind": "max_requests", "count": args.max_requests},
                                     {"kind": "max_duration", "seconds": args.max_seconds}],
                     "tokenizer": {"kind": "huggingface_auto", "model": tokenizer},
                     "data": [data], "seed": {"kind": "static", "value": args.seed},
                     "outputs": [{"kind": "json", "path": str(report)}]}}


def run_guidellm(spec: dict, out: Path, workers: int, timeout_s: float) -> Path:
    """`guidellm run` over the scenario, its console kept in OUT/guidellm.log; the report's path."""
    path = out / "scenario.json"
    path.write_text(json.dumps(spec, indent=1))
    report = Path(spec["spec"]["outputs"][0]["path"])
    report.unlink(missing_ok=True)  # a failed run leaves no earlier report standing in for it
    env = {**os.environ, "GUIDELLM__MAX_WORKER_PROCESSES": str(workers), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "guidellm", "run", "--scenario", str(path), "--disable-console-interactive"]
    with (out / "guidellm.log").open("w") as log:
        try:
            done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise GooseError(f"guidellm ran past {timeout_s:.0f} s (its log: {out / 'guidellm.log'})") from None
    if done.returncode != 0 or not report.is_file():
        tail = (out / "guidellm.log").read_text().strip().splitlines()[-3:]
        raise GooseError(f"guidellm failed (exit {done.returncode}): {' | '.join(tail)} ({out / 'guidellm.log'})")
    return report


def load(args: argparse.Namespace) -> Path:
    """Run the load (or take --report), write the rows; the rows' path."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = Path(args.report) if args.report else None
    if report is None:
        if importlib.util.find_spec("guidellm") is None:
            raise GooseError("GuideLLM is not installed: make guidellm (pip install 'guidellm==0.8.1')")
        if args.data:
            kind = "csv_file" if args.data.endswith(".csv") else "json_file"
            data = {"kind": kind, "path": str(Path(args.data).resolve())}
        elif args.prompts:
            data = {"kind": "json_file", "path": str(prompts_file(args.prompts, args.n_prompts, out, args.max_tokens))}
        else:
            data = {"kind": "synthetic_text", "prompt_tokens": args.synthetic, "output_tokens": args.max_tokens}
        rates = 1 if args.profile == "synchronous" else (args.sweep_size if args.profile == "sweep" else len(args.rate))
        spec = scenario(args, data, tokenizer_source(args.tokenizer), out / "guidellm.json")
        print(f"[goose] GuideLLM: {args.profile}, {rates} rate(s) against {args.target}, each at most "
              f"{args.max_requests} requests or {args.max_seconds:g} s (so at most {rates * args.max_seconds:g} s); "
              f"its progress: {out / 'guidellm.log'}", flush=True)
        report = run_guidellm(spec, out, args.workers, rates * args.max_seconds + SLACK_S)
    rows = read_report(report, args.label)
    return write_rows(rows, out / "rows.csv", append=args.append)


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.measurement.serving_load", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default="http://127.0.0.1:8000/v1", help="the server's base URL")
    ap.add_argument("--label", required=True, help="the method label the rows carry (e.g. goose-auto, vllm-ngram)")
    ap.add_argument("--model", default=None, help="the model name sent (default: the server's first, /v1/models)")
    ap.add_argument("--api-key", default=os.environ.get("GOOSE_API_KEY"), help="Bearer key, if the server asks one")
    ap.add_argument("--tokenizer", default="smollm2-135m", help="goose model name, folder or hub id to count with")
    ap.add_argument("--profile", choices=PROFILES, default="poisson")
    ap.add_argument("--rate", type=float, nargs="+", default=[1.0], help="req/s (constant, poisson); streams "
                    "(concurrent)")
    ap.add_argument("--sweep-size", type=int, default=4, help="benchmarks of a sweep (>= 2)")
    ap.add_argument("--max-requests", type=int, default=16, help="requests per rate at most")
    ap.add_argument("--max-seconds", type=float, default=60.0, help="seconds per rate at most")
    ap.add_argument("--prompts", default="humaneval", help="a goose benchmark's prompts ('' for --synthetic)")
    ap.add_argument("--data", default=None, help="a JSON, JSONL or CSV file of prompts instead (GuideLLM's columns: "
                    "prompt, output_tokens_count)")
    ap.add_argument("--n-prompts", type=int, default=16, help="how many of the benchmark's prompts, cycled")
    ap.add_argument("--synthetic", type=int, default=128, help="GuideLLM's synthetic prompts of this many tokens")
    ap.add_argument("--max-tokens", type=int, default=64, help="new tokens of every answer, exactly")
    ap.add_argument("--extra-body", default="{}", help="JSON merged into every request body")
    ap.add_argument("--seed", type=int, default=0, help="GuideLLM's seed (Poisson arrivals, synthetic prompts)")
    ap.add_argument("--workers", type=int, default=1, help="GuideLLM's worker processes (default 1: a small CPU)")
    ap.add_argument("--out", default="results/serving-load", help="folder: scenario, report, rows.csv")
    ap.add_argument("--append", action="store_true", help="add the rows to OUT/rows.csv instead of replacing it")
    ap.add_argument("--report", default=None, help="read this GuideLLM JSON report; run nothing")
    ap.add_argument("--slo-ttft-ms", type=float, default=SLO_TTFT_MS, help="goodput's TTFT bound")
    ap.add_argument("--slo-tpot-ms", type=float, default=SLO_TPOT_MS, help="goodput's TPOT bound")
    args = ap.parse_args(argv)
    if args.max_requests < 1 or args.max_seconds <= 0 or args.max_tokens < 1 or min(args.rate) <= 0:
        ap.error("--max-requests, --max-seconds, --max-tokens and every --rate must be positive")
    try:
        json.loads(args.extra_body)
    except json.JSONDecodeError as e:
        ap.error(f"--extra-body is not JSON: {e}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        path = load(args)
    except GooseError as e:
        raise SystemExit(f"error: {e}") from None
    slo = Slo(args.slo_ttft_ms / 1000, args.slo_tpot_ms / 1000)
    rows = read_rows(path)
    print(printable(summarize(rows[rows.method == args.label], slo), slo).to_markdown(index=False))
    print(f"\nrows: {path}")


if __name__ == "__main__":
    main()
