"""Every command the docs show, found and checked without running it: a run.py command composes and builds
its run spec (every setting exists, every value is valid), a script's flags parse, a make target exists.
Commands that only run on a GPU machine or with network are checked the same way (the check loads nothing)."""

from __future__ import annotations

import importlib
import itertools
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "experiments" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"```(?:bash|sh|console)?\n(.*?)```", re.S)
INLINE = re.compile(r"`([^`\n]+)`")
STARTS = ("python run.py", "goose-run", "python -m goose.", "goose-reproduce", "goose-bench", "goose-migrate", "make ",
          "jupyter execute", "goose-serve")
ENV = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")  # VAR=value words before a command
NOTEBOOK_ENV = {"GOOSE_RESULTS", "GOOSE_ARTIFACTS"}  # what analysis/figures.ipynb reads
EXECUTE_FLAGS = {"--output", "--inplace", "--allow-errors", "--timeout", "--startup_timeout", "--kernel_name"}
SCRIPTS = {"goose-reproduce": "goose.analysis.reproduce", "goose-bench": "goose.measurement.bench",
           "goose-migrate": "goose.migration.migrate", "goose-serve": "goose.serving.command"}


def commands() -> list[tuple[str, str]]:
    """(where, command) for every command the docs show, in fenced blocks and inline code."""
    found = []
    for doc in DOCS:
        text = doc.read_text()
        blocks = FENCE.findall(text)
        lines = [line for b in blocks for line in b.replace("\\\n", " ").splitlines()]
        inline = [m for m in INLINE.findall(FENCE.sub("", text))]
        for line in [*lines, *inline]:
            line = line.split("  #")[0].split(" # ")[0].strip()
            if ENV.sub("", line).startswith(STARTS):
                found.append((doc.relative_to(ROOT).as_posix(), line))
    return found


def _targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    names = set(re.findall(r"^([A-Za-z0-9_.-]+):", text, re.M))
    names |= {f"reproduce-{k}" for k in re.findall(r"^EXPERIMENT_([A-Za-z0-9_-]+) =", text, re.M)}
    return names


def check_make(words: list[str]) -> None:
    targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
    unknown = [t for t in targets if t not in _targets()]
    assert not unknown, f"no make target {unknown}"


CHECKED: set[tuple[str, ...]] = set()  # run settings already composed without a refusal


def check_run(words: list[str]) -> None:
    from goose.cli import refused
    from goose.errors import GooseError
    from goose.running.registry import compose_config
    from goose.running.spec import DeviceError, RunSpec

    args = [w for w in words if w not in ("-m", "--multirun") and not w.startswith("hydra/launcher=")]
    if "--help" in args or not args:
        return
    assert refused(args) is None, refused(args)
    sweeps = [(a.split("=", 1)[0], a.split("=", 1)[1].split(",")) for a in args
              if "=" in a and "," in a.split("=", 1)[1] and not a.split("=", 1)[1].startswith(("[", "'", '"'))]
    fixed = [a for a in args if a.split("=", 1)[0] not in dict(sweeps)]
    for combo in itertools.product(*[[f"{k}={v}" for v in vs] for k, vs in sweeps]):
        overrides = [a for a in [*fixed, *combo] if not a.startswith("hydra/launcher") and not
                     a.startswith("hydra.launcher")]
        if tuple(overrides) in CHECKED:
            continue  # the same run in another doc: composed once (the config files do not change meanwhile)
        try:
            RunSpec.from_config(compose_config(overrides))
            CHECKED.add(tuple(overrides))
        except DeviceError:
            pass  # a GPU command on this machine: its settings were checked before the device
        except GooseError as e:
            if "needs a path" not in str(e):
                raise


def check_script(words: list[str]) -> None:
    if words[0] == "python" and words[1] == "-m":
        module, argv = words[2], words[3:]
    else:
        module, argv = SCRIPTS[words[0]], words[1:]
    parse = importlib.import_module(module).parse
    try:
        parse(argv)
    except SystemExit as e:
        assert e.code in (0, None), f"{' '.join(words)}: flags refused"


def check_notebook(words: list[str], env: dict[str, str]) -> None:
    """`jupyter execute NOTEBOOK`: the notebook exists, reads the variables set before it, the flags are
    jupyter execute's, and what runs it (nbclient, a kernel) is installed by the documented setup."""
    import importlib.util

    books = [w for w in words[2:] if w.endswith(".ipynb")]
    assert books and all((ROOT / b).is_file() for b in books), f"no notebook {books}"
    flags = [w.split("=")[0] for w in words[2:] if w.startswith("--")]
    assert set(flags) <= EXECUTE_FLAGS, f"jupyter execute has no flag {set(flags) - EXECUTE_FLAGS}"
    assert set(env) <= NOTEBOOK_ENV and all(k in (ROOT / b).read_text() for k in env for b in books), env
    requirements = (ROOT / "requirements.txt").read_text().split()
    assert {"nbclient", "ipykernel"} <= set(requirements), "make install does not install jupyter execute"
    assert importlib.util.find_spec("nbclient.cli") and importlib.util.find_spec("ipykernel")


def split_env(command: str) -> tuple[dict[str, str], list[str]]:
    """The VAR=value words before a command, and the command's words."""
    words = shlex.split(command.replace("$HOME", "/home/u").replace("~/", "/home/u/"))
    env = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def check(command: str) -> None:
    env, words = split_env(command)
    if words[:2] == ["jupyter", "execute"]:
        check_notebook(words, env)
    elif words[0] == "make":
        check_make(words)
    elif words[:2] == ["python", "run.py"]:
        check_run(words[2:])
    elif words[0] == "goose-run":
        check_run(words[1:])
    else:
        check_script(words)
