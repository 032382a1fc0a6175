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
}


def test_each_listed_rule_is_defined_once():
    for rule, (pattern, home) in RULES.items():
        found = sorted(p.relative_to(ROOT).as_posix() for p in SOURCES
                       if re.search(pattern, "\n".join(line for line in p.read_text().splitlines()
                                                       if not line.lstrip().startswith("#"))))
        assert found == [home], f"{rule}: defined in {found}, once in {home} is the rule: use it from there"
