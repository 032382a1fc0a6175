"""Code identity: which code drafted and verified a row, and whether a run may add rows beside other code's.

`code_fingerprint(cls)` is a digest of the source a drafter's rows depend on: the module of its class (and of
every class it inherits from), the decode loops that call it and verify its drafts (goose.running.loop,
goose.running.batch_loop), and every module they import, transitively (imports inside functions too), kept to
the rooms that decide what is drafted and verified (goose.methods, goose.baselines, goose.drafting, goose.engine,
the two loops) and, for a drafter defined outside goose, the modules of its own folder (its top-level package's,
or its file's). Each file is read as its syntax tree without docstrings, so a comment, a blank line or a
docstring changes nothing and any edit of code does; nothing is imported to find a module. A class without a
source file (a notebook's) is its `inspect.getsource`; without even that the fingerprint is blank: unknown,
recorded as such.

`check_code` is the resume check of goose.running.runner: rows of the same configuration written by other code
are refused (one line naming both choices), unless `conf/code-equivalence.yaml` declares the two fingerprints
equivalent (a refactor shown to give the same tokens and steps) or `accept_other_code=true` keeps them, which
the folder's `code-accepted.jsonl` records. docs/trust.md.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import sysconfig
import textwrap
import time
from pathlib import Path
from types import ModuleType

from goose.core.fingerprints import digest
from goose.errors import GooseError
from goose.paths import CONF
from goose.storage.durable import append_text, read_lines

ROOMS = ("goose.methods", "goose.baselines", "goose.drafting", "goose.engine", "goose.running.loop",
         "goose.running.batch_loop")
LOOPS = ("goose.running.loop", "goose.running.batch_loop")  # always read: they call every drafter
LEDGER = CONF / "code-equivalence.yaml"
ACCEPTED = "code-accepted.jsonl"
_FILES: dict[str, tuple[object, str, frozenset[str]]] = {}  # module -> (its version, normalized dump, imports)


# --- the fingerprint --------------------------------------------------------------------------------------
def normalized(source: str) -> str:
    """`source` as its syntax tree without docstrings, written out field by field (empty fields left out, so
    a field a newer Python adds empty, such as `type_params`, changes nothing)."""
    return _written(_without_docstrings(ast.parse(textwrap.dedent(source))))


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:]
    return tree


def _written(node) -> str:
    if isinstance(node, ast.AST):
        fields = (f"{k}={_written(v)}" for k, v in ast.iter_fields(node) if v is not None and v != [])
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(map(_written, node))}]"
    return repr(node)


def _imports(tree: ast.Module, name: str, package: bool) -> frozenset[str]:
    """Every module name an import statement anywhere in the file may name (`from a import b`: a and a.b)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            try:
                base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                   name if package else name.rpartition(".")[0])
            except (ImportError, ValueError):
                continue
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return frozenset(out)


def _locate(name: str) -> Path | None:
    """The source file of module `name`, found without importing anything."""
    module = sys.modules.get(name)
    if module is not None:
        file = getattr(module, "__file__", None)
        return Path(file) if file and file.endswith(".py") else None
    head, _, _ = name.rpartition(".")
    try:
        if head:
            parent = _locate(head)
            if parent is None or parent.name != "__init__.py":
                return None  # an attribute of a module, not a module
            spec = importlib.machinery.PathFinder.find_spec(name, [str(parent.parent)]) or _mapped(name, parent)
        else:
            spec = importlib.util.find_spec(name)  # a top-level name: found, never imported
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None and spec.has_location else None
    return Path(origin) if origin and origin.endswith(".py") else None


def _mapped(name: str, parent: Path):
    """The spec of a subpackage an install maps outside its parent's folder (goose.baselines in an editable
    install: the checkout's baselines/), asked of the install's own finders; nothing is imported."""
    for finder in sys.meta_path:
        if finder is not importlib.machinery.PathFinder and hasattr(finder, "find_spec"):
            spec = finder.find_spec(name, [str(parent.parent)])
            if spec is not None:
                return spec
    return None


def _read(name: str, path: Path) -> tuple[str, frozenset[str]]:
    """A module's normalized source and imports, once per version of it in this process: an imported module
    is read once (its code is what runs), a file not imported again when it changes."""
    module = sys.modules.get(name)
    if not (isinstance(module, ModuleType) and getattr(module, "__file__", None) == str(path)):
        st = path.stat()
        module = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    cached = _FILES.get(name)
    if cached and (cached[0] is module if isinstance(module, ModuleType) else cached[0] == module):
        return cached[1], cached[2]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imports = _imports(tree, name, path.name == "__init__.py")
    entry = (module, _written(_without_docstrings(tree)), imports)
    _FILES[name] = entry
    return entry[1], entry[2]


def _user_root(module: ModuleType) -> Path | None:
    """The folder of a drafter defined outside goose: its top-level package's, or its own file's; none where that
    is a shared folder of installed packages (site-packages) or the standard library."""
    if module.__name__.split(".")[0] == "goose":
        return None
    top = sys.modules.get(module.__name__.split(".")[0], module)
    file = getattr(top, "__file__", None) or module.__file__
    root = Path(file).resolve().parent
    shared = {Path(p).resolve() for k, p in sysconfig.get_paths().items() if k in ("purelib", "platlib", "stdlib",
                                                                                  "platstdlib")}
    return None if root in shared else root


def _in_scope(name: str, root: Path | None) -> Path | None:
    if name == "goose" or name.startswith("goose."):
        return _locate(name) if any(name == r or name.startswith(f"{r}.") for r in ROOMS) else None
    path = _locate(name) if root is not None else None
    return path if path is not None and path.resolve().is_relative_to(root) else None


def code_fingerprint(cls: type) -> str:
    """12 hex digits of the code `cls`'s rows depend on (the module docstring says which); "" when unknown."""
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if module is None or not file or not file.endswith(".py"):
        try:
            own = {f"{cls.__module__}.{cls.__qualname__}": normalized(inspect.getsource(cls))}
        except (OSError, TypeError, SyntaxError):
            return ""
        roots, root = [], None
    else:
        own, roots, root = {}, [(module.__name__, Path(file))], _user_root(module)
    for name in (*LOOPS, *(c.__module__ for c in cls.__mro__[1:])):
        path = _in_scope(name, root)
        if path is not None:
            roots.append((name, path))
    seen: dict[str, str] = {}
    while roots:
        name, path = roots.pop()
        if name in seen:
            continue
        seen[name], imports = _read(name, path)
        roots.extend((n, p) for n in imports if n not in seen and (p := _in_scope(n, root)) is not None)
    return digest(sorted({**seen, **own}.items()), 12)


# --- the ledger and the resume check ----------------------------------------------------------------------
def ledger(path: Path | None = None) -> list[dict]:
    """conf/code-equivalence.yaml's entries, each {from, to, evidence, date}; one line for a malformed one."""
    import yaml

    path = Path(path or LEDGER)
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise GooseError(f"cannot read the code ledger {path}: {str(e).splitlines()[0]}") from None
    entries = data.get("equivalent") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise GooseError(f"the code ledger {path} must hold `equivalent:`, a list of {{from, to, evidence, date}}.")
    out = []
    for i, e in enumerate(entries, 1):
        e = {k: str(v) for k, v in e.items() if v not in (None, "")} if isinstance(e, dict) else {}
        if set(e) != {"from", "to", "evidence", "date"}:
            raise GooseError(f"the code ledger {path}: entry {i} must have exactly from, to (two code fingerprints), "
                             "evidence (the check that showed the same tokens and steps) and date.")
        out.append(e)
    return out


def _accepted(run_dir: Path) -> list[dict]:
    """The folder's earlier acceptances (code-accepted.jsonl): each {from: [...], to, at, rows}; a line that
    does not read back counts for nothing."""
    out = []
    for line in read_lines(run_dir / ACCEPTED):
        try:
            rec = json.loads(line)
            out += [{"from": str(f), "to": str(rec["to"]), "at": str(rec.get("at", ""))} for f in rec["from"]]
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _path(start: str, goal: str, edges: list[dict]) -> list[dict] | None:
    """The entries that join two fingerprints (either way round, through others), or None."""
    trail: dict[str, list[dict]] = {start: []}
    todo = [start]
    while todo:
        here = todo.pop(0)
        if here == goal:
            return trail[here]
        for e in edges:
            for a, b in ((e["from"], e["to"]), (e["to"], e["from"])):
                if a == here and b not in trail:
                    trail[b] = trail[here] + [e]
                    todo.append(b)
    return None


def check_code(rows: list[dict], run_dir: Path, chash: str, current: str, accept: bool) -> str | None:
    """Before anything is decoded: may this code add rows beside the folder's rows of configuration `chash`?
    Rows of other code (another code_fingerprint; blank: written before rows recorded it) are refused in one
    line, unless the ledger (for recorded fingerprints) or the folder's earlier acceptances join each to
    `current`, or `accept` (accept_other_code=true) keeps them, recorded in code-accepted.jsonl. Returns the line
    to print when rows of other code are kept, None when there are none (or this code's fingerprint is unknown)."""
    other: dict[str, int] = {}
    for r in rows:
        fp = str(r.get("code_fingerprint") or "")
        if r.get("config_hash") == chash and fp != current:
            other[fp] = other.get(fp, 0) + 1
    if not other or not current:
        return None
    declared, earlier = ledger(), _accepted(run_dir)
    joined = {fp: _path(fp, current, earlier + declared) for fp in other}  # the ledger holds no blank: a blank
    # fingerprint is joined only through an acceptance
    n, shown = sum(other.values()), ", ".join(fp or "none: written before rows recorded it" for fp in sorted(other))
    if all(p is not None for p in joined.values()):
        cites = "; ".join(f"declared equivalent in {LEDGER.name}: {e['from']} -> {e['to']} ({e['date']}: "
                          f"{e['evidence']})" if "evidence" in e
                          else f"{e['from'] or 'none'} -> {e['to']} accepted {e['at']} in {run_dir / ACCEPTED}"
                          for e in {id(e): e for p in joined.values() for e in p}.values())
        return (f"[goose] {n} row(s) of other code (code fingerprint {shown}) resumed as this code's ({current}): "
                f"{cites}")
    if not accept:
        raise GooseError(
            f"{run_dir} holds {n} row(s) of this configuration written by other code (code fingerprint {shown}; this "
            f"code is {current}): the drafter or the code that decodes and verifies it changed since. Measure this "
            "code afresh with another results_dir=... (or run_dir=...), or keep those rows and add this code's "
            f"beside them with accept_other_code=true (recorded in {ACCEPTED}).")
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    record = {"from": sorted(other), "to": current, "at": at, "rows": n, "config_hash": chash, "pid": os.getpid()}
    append_text(run_dir / ACCEPTED, json.dumps(record) + "\n", sync=True)
    return (f"[goose] accept_other_code=true: {n} row(s) of other code (code fingerprint {shown}) kept beside this "
            f"code's ({current}); recorded in {run_dir / ACCEPTED}")
