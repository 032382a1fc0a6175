"""The speed benchmark's command line (`python -m goose.measurement.bench`, goose-bench): its flags and their
defaults, every check made on them before any model loads (unknown model, benchmark or method names, --benchmarks
with --prompts, --concurrency and --figure combinations, sampling settings), and the removal of an earlier --json or
--figure file before the command line is read. goose.measurement.bench.parse is `parse_flags` with that module's
docstring as --help.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from goose.benchmarks.prompts import benchmark_names
from goose.engine.backends import BACKENDS
from goose.engine.sampling import Sampling
from goose.errors import GooseError
from goose.models.loading import model_config_names
from goose.running.registry import method_names, parse_spec

# Methods from conf/method/ (and --search-path folders), as NAME[@BUDGET][:MEMORY]; each in its default
# memory mode unless one is given. REST reads the offline datastore (`make bench` builds it).
# No budget given is budget=auto where a method prunes (conf/config.yaml): the list states the paper's 60 beside it.
DEFAULT_METHODS = ("ar", "pld@60", "pld@auto", "tr@60", "iso3@60", "lookahead@60", "rest@60", "suffix-chain@60",
                   "suffix@60", "suffix@auto", "goose@16", "goose@32", "goose@60", "goose@auto", "goose-suffix@60",
                   "goose-suffix@auto")
HF_METHODS = ("hf-greedy", "hf-prompt-lookup")
DEFAULT_N_PROMPTS = 10  # of each --benchmarks entry; of a --prompts file: all unless --n-prompts is given
DEFAULT_BENCHMARKS = ("humaneval", "gsm8k", "mt_bench")  # without --prompts


def check_names(ap: argparse.ArgumentParser, args) -> None:
    """Unknown names are an error that lists the valid ones; none is dropped silently."""
    try:
        methods = [parse_spec(m)[0] for m in args.methods or [] if m not in HF_METHODS]
    except GooseError as e:
        ap.error(f"--methods: {e}")
    checks = [("--model", [args.model], model_config_names()), ("--benchmarks", args.benchmarks, benchmark_names()),
              ("--methods", methods, method_names(args.search_path))]
    for flag, given, valid in checks:
        bad = [x for x in given if x not in valid]
        if bad:
            ap.error(f"{flag}: unknown {', '.join(map(repr, bad))}; choose from {', '.join(valid)}"
                     + (" (as NAME[@BUDGET][:MEMORY]), or hf-greedy, hf-prompt-lookup" if flag == "--methods" else ""))
    if args.repeats < 0 or (args.n_prompts is not None and args.n_prompts < 1) or args.max_new_tokens < 1:
        ap.error("--repeats must be >= 0, --n-prompts and --max-new-tokens >= 1")


def check_figure(ap: argparse.ArgumentParser, args) -> None:
    """--figure: what it needs, its own file (not --json's), and a format matplotlib writes, all before any work."""
    missing = [flag for flag, value in (("--concurrency", args.concurrency), ("--json", args.json)) if not value]
    if missing:
        ap.error(f"--figure plots a concurrency sweep: give {' and '.join(missing)} too")
    if Path(args.figure).resolve() == Path(args.json).resolve():
        ap.error(f"--json and --figure name one file ({args.figure}): give each its own path")
    ext = Path(args.figure).suffix.lower().lstrip(".")
    if ext:  # none: matplotlib's default format (savefig.format)
        from matplotlib.figure import Figure

        formats = Figure().canvas.get_supported_filetypes()
        if ext not in formats:
            ap.error(f"--figure {args.figure}: matplotlib cannot write .{ext}; use one of "
                     f"{', '.join('.' + f for f in sorted(formats))}")


OUTPUTS = ("--json", "--figure")  # the files a run writes; an earlier one is removed before the command line is read


def output_paths(argv: list[str]) -> list[str]:
    """The values of --json and --figure in `argv` (as `--json X`, `--json=X`, or an abbreviation argparse takes),
    found before parsing, so that a command line argparse refuses leaves no earlier file standing in for its run."""
    found = []
    for i, a in enumerate(argv):
        if a == "--":
            break
        name, eq, value = a.partition("=")
        if len(name) < 3 or not any(flag.startswith(name) for flag in OUTPUTS):
            continue
        if eq:
            found.append(value)
        elif i + 1 < len(argv):
            found.append(argv[i + 1])
    return [f for f in found if f]


def remove_stale(argv: list[str]) -> None:
    """Remove an earlier file at --json's or --figure's path (a folder or an unremovable file is left for
    bench_report.claim to report, after the command line is checked)."""
    for f in output_paths(argv):
        p = Path(f)
        if p.is_symlink() or p.is_file():
            try:
                p.unlink()
            except OSError:
                pass


def parse_flags(argv: list[str] | None, description: str | None) -> argparse.Namespace:
    """The command line, checked before any model loads; `description` is what --help prints above the flags."""
    ap = argparse.ArgumentParser(prog="python -m goose.measurement.bench", description=description,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--benchmarks", nargs="+", default=None,
                    help=f"benchmark configs to take prompts from (default: {' '.join(DEFAULT_BENCHMARKS)}); not with "
                         "--prompts")
    ap.add_argument("--n-prompts", type=int, default=None,
                    help=f"the first N prompts of each --benchmarks entry (default {DEFAULT_N_PROMPTS}), or of the "
                         "--prompts file (default: all)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats; 0 runs only the profiled pass")
    ap.add_argument("--methods", nargs="*", default=None,
                    help=f"NAME[@BUDGET][:MEMORY] from conf/method/ (default: {' '.join(DEFAULT_METHODS)}); "
                         "hf-greedy and ar always run")
    ap.add_argument("--search-path", action="append", default=[],
                    help="an extra config folder holding method/NAME.yaml (as Hydra's hydra.searchpath)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--model-path", default=None, help="for --model hf/gguf: the local folder or GGUF file")
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    ap.add_argument("--top-k", type=int, default=0, help="sampling: keep the k likeliest tokens (0 = off)")
    ap.add_argument("--top-p", type=float, default=1.0, help="sampling: nucleus mass (1.0 = off)")
    ap.add_argument("--seed", type=int, default=0, help="sampling: the noise seed")
    ap.add_argument("--backends", nargs="+", choices=BACKENDS, default=None,
                    help="how the forward runs (default: eager and prepacked where prepacked applies, else eager; "
                         "with --concurrency: the first given, else auto)")
    ap.add_argument("--concurrency", type=int, nargs="+", default=None,
                    help="requests in flight: each method at each of these concurrencies against batched AR at the "
                         "same one (src/goose/measurement/concurrency_sweep.py)")
    ap.add_argument("--prompts", default=None, help="a JSONL file of your own prompts ({\"prompt\": ..., \"id\": ...} "
                    "per line) instead of --benchmarks")
    ap.add_argument("--json", default=None, help="also write the run to this file, machine-readable: what it ran on "
                    "and everything printed (written when the run ends; an earlier file there is removed at its start)")
    ap.add_argument("--figure", default=None, help="with --concurrency and --json: also plot speedup against "
                    "concurrency (one line per method, batched AR = 1) to this image file")
    args = ap.parse_args(argv)
    if args.prompts is not None and args.benchmarks is not None:
        ap.error(f"--benchmarks {' '.join(args.benchmarks)} and --prompts {args.prompts}: the prompts come from one or "
                 "the other; give --prompts alone for your file's prompts, or --benchmarks alone")
    args.benchmarks = list(DEFAULT_BENCHMARKS) if args.benchmarks is None else args.benchmarks
    if args.model in ("hf", "gguf") and not args.model_path:
        ap.error(f"--model {args.model} needs --model-path: a local model folder (hf) or a .gguf file (gguf)")
    check_names(ap, args)
    if args.concurrency is not None:
        if min(args.concurrency) < 1:
            ap.error("--concurrency: every value must be >= 1")
        hf = [m for m in args.methods or [] if m in HF_METHODS]
        if hf:
            ap.error(f"--concurrency: {', '.join(hf)} decode one request at a time; leave them out")
        if args.repeats < 1:
            ap.error("--concurrency needs --repeats >= 1")
    if args.figure:
        check_figure(ap, args)
    try:
        args.sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
    except GooseError as e:
        ap.error(str(e))
    return args
