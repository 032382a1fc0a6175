"""Rules written once (#71): each listed rule is defined in one module, and a second definition anywhere in the
package, its rooms or run.py fails here, naming where it appeared. Add a rule's line when a rule is made single."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "run.py", *(p for room in ("src/goose", "baselines", "experiments", "analysis")
                               for p in (ROOT / room).rglob("*.py"))]
RULES = {  # what the rule is -> (a pattern only its definition matches, the one file allowed to hold it)
    "the refusal of budget=auto for a method that cannot prune": (r"does not support budget=auto",
                                                                  "src/goose/drafting/contract.py"),
    "the budget a row records for a method no number changes": (r"""["']fixed["']""", "src/goose/storage/metrics.py"),
    "the budget label (auto, the nodes, or fixed)": (r"\.nodes if takes_budget\(", "src/goose/running/registry.py"),
    "a method's default budget": (r"""["']auto["'] if prunes""", "src/goose/running/registry.py"),
    "the length rule (a prompt and the tokens asked after it fit the model's context)": (
        r"\+ ?max_\w*tokens ?[<>]|\b(limit|context|max_positions) - (self\.)?n\b", "src/goose/running/inputs.py"),
    "what a whole number, a number and a flag are (a bool is neither)": (r"isinstance\([^)]*\bbool\b",
                                                                          "src/goose/core/values.py"),
}
# The entry points' rules are checked across the three front doors and the module that holds them; the drafting and
# engine rooms keep their own checks (their source is part of every row's code identity: docs/trust.md).
FRONT_DOORS = {"what a whole number, a number and a flag are (a bool is neither)": [
    "src/goose/core/values.py", "src/goose/running/spec.py", "src/goose/api.py", "src/goose/serving/params.py",
    "src/goose/serving/command.py", "src/goose/cli.py", "src/goose/preflight.py"]}


def test_each_listed_rule_is_defined_once():
    for rule, (pattern, home) in RULES.items():
        scanned = [ROOT / f for f in FRONT_DOORS[rule]] if rule in FRONT_DOORS else SOURCES
        found = sorted(p.relative_to(ROOT).as_posix() for p in scanned
                       if re.search(pattern, "\n".join(line for line in p.read_text().splitlines()
                                                       if not line.lstrip().startswith("#"))))
        assert found == [home], f"{rule}: defined in {found}, once in {home} is the rule: use it from there"
