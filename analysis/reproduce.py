"""Regenerate paper artifacts from result CSVs into one folder.

    python analysis/reproduce.py table2 [figure1 ...] --results results --out results/artifacts
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "src")]

from analysis.artifacts import ARTIFACTS, load_rows, make  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("artifacts", nargs="+", choices=[*ARTIFACTS, "all"])
    ap.add_argument("--results", default="results")
    ap.add_argument("--out", default="results/artifacts")
    args = ap.parse_args()
    df = load_rows(args.results)
    names = ARTIFACTS if "all" in args.artifacts else args.artifacts
    for name in names:
        for path in make(name, df, Path(args.out)):
            print(f"wrote {path}")
        md = Path(args.out) / f"{name}.md"
        if md.exists():
            print(md.read_text())


if __name__ == "__main__":
    main()
