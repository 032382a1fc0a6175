"""docs/map.md cannot go stale: every module under src/goose is listed there, and every path it links to exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "goose"
MAP = ROOT / "docs" / "map.md"
LINK = re.compile(r"\]\(([^)#\s]+)\)")


def linked() -> set[Path]:
    """Every local path docs/map.md links to, resolved from docs/."""
    targets = {t for t in LINK.findall(MAP.read_text()) if "://" not in t}
    return {(MAP.parent / t).resolve() for t in targets}


def test_every_module_of_the_package_is_on_the_map():
    listed = {p for p in linked() if p.suffix == ".py"}
    modules = {p.resolve() for p in PACKAGE.rglob("*.py")}
    missing = sorted(p.relative_to(PACKAGE).as_posix() for p in modules - listed)
    assert not missing, f"docs/map.md does not list {missing}: add a line for each"


def test_every_path_on_the_map_exists():
    gone = sorted(str(p.relative_to(ROOT)) for p in linked() if not p.exists())
    assert not gone, f"docs/map.md lists {gone}, which do not exist"


def test_every_room_has_its_section():
    rooms = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    text = MAP.read_text()
    assert rooms and all(f"## `{room}/`" in text for room in rooms), rooms


def defines(module: Path, name: str) -> bool:
    """`name` (`f`, `Class`, `Class.member`) is defined at the top level of `module`, a member in its class body."""
    import ast

    body = ast.parse(module.read_text()).body
    for part in name.split("."):
        found = [n for n in body if getattr(n, "name", None) == part or any(
            getattr(t, "id", None) == part for t in getattr(n, "targets", [getattr(n, "target", None)]))]
        if not found:
            return False
        body = getattr(found[0], "body", [])
    return True


def test_every_name_the_entry_points_give_is_defined_where_they_say():
    """The "where to look first" bullets name functions and classes beside the modules they link: each name is
    defined in one of the modules its bullet links to."""
    text = MAP.read_text()
    bullets = re.findall(r"^- \*\*.*?(?=^- \*\*|^## )", text, re.M | re.S)
    assert len(bullets) >= 4
    wrong = []
    for bullet in bullets:
        modules = [(MAP.parent / t).resolve() for t in LINK.findall(bullet) if t.endswith(".py")]
        names = [n for n in re.findall(r"(?<!\[)`([A-Za-z_][\w.]*)`", bullet) if not n.endswith(".py")]
        wrong += [n for n in names if not any(defines(m, n) for m in modules)]
    assert not wrong, f"docs/map.md names {wrong}, which the modules its bullets link do not define"
