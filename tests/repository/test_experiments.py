"""experiments/README.md cannot drift: each target's sweeps exist for both profiles, its artifacts are registered in
the analysis, its sweeps and artifacts are the Makefile's, and its time is the one `make help` states."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rows() -> list[tuple[str, list[str], list[str], str]]:
    text = (ROOT / "experiments" / "README.md").read_text()
    out = []
    for line in text.splitlines():
        m = re.match(r"\| `make reproduce-([\w-]+)` \| (.*?) \| (.*?) \| (.*?) \|$", line)
        if m:
            target, sweeps, artifacts, time = m.groups()
            out.append((target, re.findall(r"[\w-]+", sweeps.split("(")[0]),
                        re.findall(r"\w+", artifacts.split("(")[0]), time))
    return out


def test_every_reproduce_target_is_in_the_table():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^reproduce-([\w-]+):", makefile, re.M)) | set(re.findall(r"^EXPERIMENT_([\w-]+) =",
                                                                                         makefile, re.M))
    targets -= {"all", "%"}
    assert {t for t, *_ in rows()} == targets


def test_each_row_names_what_the_makefile_runs_and_what_exists():
    from goose.analysis.artifacts import ARTIFACTS

    makefile = (ROOT / "Makefile").read_text()
    for target, sweeps, artifacts, _ in rows():
        for sweep in sweeps:
            for profile in ("local", "paper"):
                assert (ROOT / "experiments" / f"{sweep}-{profile}.yaml").is_file(), (target, sweep, profile)
        assert all(a in ARTIFACTS for a in artifacts), (target, artifacts)
        if m := re.search(rf"^EXPERIMENT_{re.escape(target)} = (.*)$", makefile, re.M):
            assert sweeps == [m.group(1).strip()], target
            art = re.search(rf"^ARTIFACT_{re.escape(target)} = (.*)$", makefile, re.M).group(1).split()
            assert artifacts == art, target
        elif target != "claims":  # the explicit targets: every sweep and artifact appears in the recipe
            recipe = re.search(rf"^reproduce-{re.escape(target)}:\n((?:\t.*\n|\s*\n)+)", makefile, re.M).group(1)
            assert all(f"+experiment={s}-$(PROFILE)" in recipe for s in sweeps), target
            assert all(re.search(rf"reproduce .*\b{a}\b", recipe) for a in artifacts), target


def test_each_time_is_the_one_make_help_states():
    out = subprocess.run(["make", "--no-print-directory", "help", "PYTHON=python3"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    for target, _, _, time in rows():
        if target == "claims":
            continue
        said = re.search(rf"^  reproduce-{re.escape(target)}\s+.*?; (about [\d.]+ (?:min|hours))$", out, re.M)
        assert said and said.group(1) == time, (target, time, said and said.group(1))


def test_make_n_of_a_reproduce_target_runs_nothing(tmp_path):
    """`make -n` prints a recipe and runs none of it, except a line that names $(MAKE): make runs that one (for the
    sub-make to print its own), so such a line must be the sub-make alone. The claims recipe's sweep once shared a
    line with `$(MAKE) gemma`, and `make -n reproduce-claims` ran the sweep."""
    spy = tmp_path / "python"
    spy.write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'ran'}\n")
    spy.chmod(0o755)
    makefile = (ROOT / "Makefile").read_text()
    targets = sorted(set(re.findall(r"^(reproduce-[\w-]+):", makefile, re.M)))
    for target in targets:
        for profile in ("local", "paper"):
            subprocess.run(["make", "-n", "--no-print-directory", target, f"PROFILE={profile}", f"PYTHON={spy}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    ran = (tmp_path / "ran").read_text().splitlines() if (tmp_path / "ran").exists() else []
    assert [c for c in ran if not c.startswith("-c ")] == []  # `python -c` probes (is Gemma installed?) may run


def test_every_paper_experiment_states_its_budget():
    """A run that names no budget prunes with budget=auto (conf/config.yaml's budget: null); the paper's experiments
    are at the paper's B, so each states it (itself, through the sweep it builds on, or swept), and no committed run
    folder moves when the default changes."""
    from goose.experiments.claims_plan import experiment

    for yaml in sorted((ROOT / "experiments").glob("*.yaml")):
        cfg = experiment(yaml.stem)
        swept = cfg.get("hydra", {}).get("sweeper", {}).get("params", {})
        assert cfg.get("budget") is not None or "budget" in swept, f"{yaml.name} states no budget: add budget: 60"
