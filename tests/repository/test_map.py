"""docs/map.md cannot go stale: every module of goose (src/goose and the top-level rooms baselines/, experiments/,
analysis/) is listed there, and every path it links to exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "goose"
TOP_LEVEL = {room: ROOT / room for room in ("baselines", "experiments", "analysis")}  # goose.<room>
MAP = ROOT / "docs" / "map.md"
LINK = re.compile(r"\]\(([^)#\s]+)\)")


def linked() -> set[Path]:
    """Every local path docs/map.md links to, resolved from docs/."""
    targets = {t for t in LINK.findall(MAP.read_text()) if "://" not in t}
    return {(MAP.parent / t).resolve() for t in targets}


def modules() -> dict[str, Path]:
    """Every module of goose by its dotted name: src/goose/**, and goose.<room>.* from the top-level rooms."""
    out = {".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
           for p in PACKAGE.rglob("*.py")}
    for room, folder in TOP_LEVEL.items():
        out |= {".".join(("goose", room, *p.relative_to(folder).with_suffix("").parts)).removesuffix(".__init__"): p
                for p in folder.rglob("*.py")}
    return out


def test_the_top_level_rooms_are_goose_subpackages():
    """The install maps them (pyproject.toml's package-dir) to this checkout's folders."""
    import goose.analysis
    import goose.baselines
    import goose.experiments

    for module in (goose.baselines, goose.experiments, goose.analysis):
        room = module.__name__.rpartition(".")[2]
        assert Path(module.__file__).resolve() == TOP_LEVEL[room] / "__init__.py", (
            f"{module.__name__} is {module.__file__}: the active environment installed another checkout; "
            f"`pip install --no-deps -e {ROOT}` (docs/map.md)")


def test_importing_goose_adds_no_import_machinery():
    """`import goose` (and its rooms) leaves sys.meta_path and sys.path_hooks as they were: the namespace is the
    install's, no finder of goose's own (docs/map.md)."""
    import subprocess
    import sys

    code = ("import sys; before = (list(sys.meta_path), list(sys.path_hooks), list(sys.path)); import goose, "
            "goose.baselines, goose.experiments, goose.analysis, goose.core, goose.storage.code_identity; "
            "print((list(sys.meta_path), list(sys.path_hooks), list(sys.path)) == before)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "tests", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "True"


def test_every_module_of_the_package_is_on_the_map():
    listed = {p for p in linked() if p.suffix == ".py"}
    missing = sorted(p.relative_to(ROOT).as_posix() for p in set(map(Path.resolve, modules().values())) - listed)
    assert not missing, f"docs/map.md does not list {missing}: add a line for each"


def test_every_path_on_the_map_exists():
    gone = sorted(str(p.relative_to(ROOT)) for p in linked() if not p.exists())
    assert not gone, f"docs/map.md lists {gone}, which do not exist"


def test_every_room_has_its_section():
    rooms = sorted([p.parent.name for p in PACKAGE.glob("*/__init__.py")] + list(TOP_LEVEL))
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


def module_imports() -> dict[str, set[str]]:
    """Each goose module's goose imports made when it loads (module level; imports inside functions run later)."""
    import ast

    names = modules()
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found = set()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        graph[name] = {t for t in found if t in names and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`: the groups of modules that each reach the others."""
    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for b in graph.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    reaches = {m: reach(m) for m in graph}
    groups = {frozenset(m2 for m2 in reaches[m] if m in reaches[m2]) for m in graph if m in reaches[m]}
    return sorted(sorted(g) for g in groups)


def test_no_import_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check sees one
    graph = module_imports()
    assert len(graph) > 80 and graph["goose.running.runner"]  # it read the package
    assert circles(graph) == [], "modules that import each other when they load: make one import the other later"


# Each room's floor: a module imports only its own room and rooms on lower floors (function bodies included).
# `goose` itself (the package's __init__, the lazy `goose.load`/`goose.generate` facade) is the top floor.
FLOORS = (
    ("goose.errors", "goose.paths", "goose.core"),
    ("goose.engine",),
    ("goose.drafting",),
    ("goose.storage",),
    ("goose.models", "goose.benchmarks"),
    ("goose.methods", "goose.baselines"),
    ("goose.running",),
    ("goose.migration", "goose.analysis"),
    ("goose.measurement", "goose.experiments", "goose.exports"),
    ("goose.api", "goose.preflight", "goose.help"),
    ("goose.demo",),
    ("goose.cli", "goose.serving"),
    ("goose",),
)


def floor_of(module: str) -> int:
    rooms = {room: i for i, floor in enumerate(FLOORS) for room in floor}
    parts = module.split(".")
    return next(rooms[".".join(parts[:n])] for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in rooms)


def goose_modules(node, path: Path, name: str) -> list[str]:
    """The goose modules an import statement of module `name` (at `path`) names; [] for any other node."""
    import ast
    import importlib.util

    if isinstance(node, ast.Import):
        found = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = [importlib.util.resolve_name("." * node.level + (node.module or ""), package)]
    else:
        return []
    return [t for t in found if t == "goose" or t.startswith("goose.")]


def every_import(path: Path, name: str) -> list[tuple[str, int]]:
    """Every goose module a file names in an import statement anywhere (function bodies, TYPE_CHECKING blocks)."""
    import ast

    return [(t, node.lineno) for node in ast.walk(ast.parse(path.read_text())) for t in goose_modules(node, path, name)]


def upward_imports() -> list[str]:
    found = []
    for name, path in modules().items():
        own = floor_of(name)
        found += [f"{name}:{line} imports {target}" for target, line in every_import(path, name)
                  if floor_of(target) > own]
    return sorted(found)


def test_every_module_has_a_floor():
    assert all(floor_of(name) is not None for name in modules())


def test_imports_point_down():
    assert floor_of("goose.running.spec") > floor_of("goose.storage.row_schema")  # the check reads the floors
    assert upward_imports() == [], "imports of a higher floor (docs/map.md, core/): move the shared thing down"


# An import of goose inside a function is there for start-up time only, and says so on its (first) line:
# `# start-up time: <why>` (a heavy import, torch or pandas say, kept off the path of a light command such as
# `goose-migrate --help` or `import goose`). Any other belongs with the module's imports at its top (two modules that
# need each other share something that belongs in a third, or in one of them).
LATE_REASON = re.compile(r"#\s*start-up time: \S")


def late_imports() -> list[str]:
    """Every import of a goose module inside a function body whose line does not say why it is there."""
    import ast

    found = []
    for name, path in modules().items():
        text = path.read_text()
        lines = text.splitlines()
        functions = [n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        late = {node.lineno for f in functions for node in ast.walk(f) if goose_modules(node, path, name)}
        found += [f"{path.relative_to(ROOT)}:{line}: {lines[line - 1].strip()}" for line in sorted(late)
                  if not LATE_REASON.search(lines[line - 1])]
    return found


def test_an_import_inside_a_function_says_why():
    assert LATE_REASON.search("    from goose import api  # start-up time: torch only on first use")
    assert not LATE_REASON.search("    from goose.errors import GooseError  # late")  # the check reads the reason
    late = late_imports()
    assert not late, ("imports of goose inside a function, without `# start-up time: <why>` on the line: move them "
                      "to the module's top\n" + "\n".join(late))


def test_an_install_ships_every_room():
    """pyproject.toml lists every subpackage (setuptools installs only those it names)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert packages <= listed, sorted(packages - listed)


def test_the_tests_mirror_the_rooms():
    """Every test file sits in a folder named for a room of the package (or the Python API, the repository, the real
    model, SLURM), and no file is named after an issue or a review pass."""
    tests = ROOT / "tests"
    rooms = {p.parent.name for p in PACKAGE.glob("*/__init__.py")} | set(TOP_LEVEL) | {"api", "cli", "repository",
                                                                                       "real_model", "slurm"}
    files = sorted(tests.rglob("test_*.py"))
    assert len(files) > 40 and not [f for f in files if f.parent == tests], "a test file at tests/'s top"
    assert {f.parent.name for f in files} <= rooms, {f.parent.name for f in files} - rooms
    assert not [f.name for f in files if re.search(r"issue|trust|pass\d|#\d|_\d+\.py$", f.name)]


def test_every_peer_method_has_a_test_file_of_its_own():
    """A method conf/method/ names from goose.baselines is tested in tests/baselines/test_<its module>.py."""
    from omegaconf import OmegaConf

    from goose.paths import CONF

    peers = set()
    for conf in (CONF / "method").glob("*.yaml"):
        target = OmegaConf.select(OmegaConf.load(conf), "drafter._target_", default="") or ""
        if target.startswith("goose.baselines."):
            peers.add(target.split(".")[2])
    assert {"ar", "pld", "token_recycling", "balanced_tree", "sglang_ngram"} <= peers
    missing = sorted(p for p in peers if not (ROOT / "tests" / "baselines" / f"test_{p}.py").exists())
    assert not missing, f"peer modules without tests/baselines/test_<module>.py: {missing}"
