"""Regenerate paper artifacts from result CSVs into one folder.

    python -m goose.analysis.reproduce table2 [figure1 ...] --results results --out results/artifacts [--wandb offline]
        [--budget B] [--concurrency N]  (default: the one the rows have; the title says which was read)
    python -m goose.analysis.reproduce equality --a RUN_FOLDER --b RUN_FOLDER
        (exit 0 equal, 1 not, 2 could not compare)
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from goose.analysis.artifacts import ARTIFACTS, artifacts_of, load_rows, make, short_reason
from goose.analysis.claims.page import check_readme, sync_readme
from goose.analysis.question_diff import CANNOT_COMPARE, CannotCompare, compare
from goose.running.tracking import Tracker


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.analysis.reproduce", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifacts", nargs="+", choices=[*ARTIFACTS, "all", "equality"])
    ap.add_argument("--a", help="equality: the first run folder")
    ap.add_argument("--b", help="equality: the second run folder")
    ap.add_argument("--results", nargs="+", default=["results"], help="the results folder(s) the rows are read "
                    "from (several: their rows together)")
    ap.add_argument("--out", default=None, help="where the tables and figures go (default: RESULTS/artifacts)")
    ap.add_argument("--budget", default=None, help="the budget an artifact that reads one budget reads (default: the "
                    "one the rows have; of several, the paper's 60)")
    ap.add_argument("--concurrency", type=int, default=None, help="the concurrency an artifact that reads one "
                    "reads (default: 1, or the only one the rows have)")
    ap.add_argument("--wandb", choices=["offline", "online", "disabled"], default=os.environ.get("WANDB_MODE",
                    "disabled"), help="also log every table and figure written to one W&B run of the analysis "
                    "(offline needs no network: `wandb sync <out>/wandb/offline-run-*` uploads it later)")
    ap.add_argument("--wandb-project", default="goose")
    ap.add_argument("--readme", default=None, help="claims: also put the scorecard's summary table into this file "
                    "(between its <!-- summary --> markers; make reproduce-claims PROFILE=local: README.md)")
    args = ap.parse_args(argv)
    if "equality" in args.artifacts and (args.artifacts != ["equality"] or not (args.a and args.b)):
        ap.error("equality compares two run folders: equality --a DIR --b DIR (and nothing else)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if "equality" in args.artifacts:
        try:
            report, status = compare(Path(args.a), Path(args.b))
        except CannotCompare as e:
            print(f"error: equality could not compare: {e}", file=sys.stderr)
            sys.exit(CANNOT_COMPARE)
        print(report)
        sys.exit(status)
    if args.readme:  # refused before any artifact is written
        if "claims" not in args.artifacts and "all" not in args.artifacts:
            _refuse("--readme takes the claims summary: give it with the claims artifact (reproduce claims --readme F)")
        try:
            check_readme(Path(args.readme))
        except SystemExit as e:
            _refuse(str(e.code))
    df = load_rows(args.results if len(args.results) > 1 else args.results[0])
    names = ARTIFACTS if "all" in args.artifacts else args.artifacts
    out = Path(args.out) if args.out else artifacts_of(args.results[0])
    out.mkdir(parents=True, exist_ok=True)
    tracker = Tracker(args.wandb, args.wandb_project, name=f"analysis-{'-'.join(names)}", group="analysis",
                      config={"results": [str(Path(r).resolve()) for r in args.results], "artifacts": list(names)},
                      run_dir=out)
    written, refused = [], {}
    for name in names:
        taken: list[str] = []
        try:
            made = make(name, df, out, budget=args.budget, concurrency=args.concurrency, taken=taken)
        except SystemExit as e:  # one artifact's refusal: the others are still written, the exit says it
            print(f"error: {e.code}", file=sys.stderr)
            refused[name] = short_reason(str(e.code))
            continue
        written.append(name + (f" ({', '.join(taken)})" if taken else ""))
        for path in made:
            print(f"wrote {path}")
            if path.suffix == ".csv":
                t = pd.read_csv(path)
                tracker.log_table(name, [str(c) for c in t.columns], t.astype(object).where(t.notna(), None)
                                  .values.tolist())
            elif path.suffix == ".png":
                tracker.log_image(name, path)
        md = out / f"{name}.md"
        if md.exists():
            print(md.read_text())
    if args.readme and "claims" in names and "claims" not in refused:
        changed = sync_readme(Path(args.readme), out / "claims.md")
        print(f"{args.readme}: the claims summary {'updated' if changed else 'already agrees'}")
    tracker.finish({}, [])
    if args.wandb != "disabled":
        print(f"logged to W&B ({args.wandb}) under {out / 'wandb'}")
    print(closing(written, refused, out), file=sys.stderr if refused else sys.stdout)
    if refused:
        sys.exit(2)


def closing(written: list[str], refused: dict[str, str], out: Path) -> str:
    """The last line: exactly what was written (into which folder) and what was not, each with its reason."""
    done = f"written to {out}: {', '.join(written)}" if written else "nothing written"
    if not refused:
        return done
    return f"{done}; not written: " + "; ".join(f"{k} ({why})" for k, why in refused.items())


def _refuse(why: str) -> None:
    print(f"error: {why}", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
