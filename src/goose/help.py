"""`python run.py --help`: every config group and setting with the one-line explanation its YAML
comments carry, rendered into Hydra's help template (conf/hydra/help/goose.yaml) by a resolver."""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import OmegaConf

from goose.paths import CONF, EXPERIMENTS

GROUPS = ("model", "method", "benchmark", "logging")
KEY = re.compile(r"^(\w+):\s*(.*?)\s*(?:#\s*(.*))?$")
SUBKEY = re.compile(r"^  (\w+):\s*(.*?)\s*(?:#\s*(.*))?$")  # a setting inside a section (engine.backend)
MORE = re.compile(r"^\s+#\s*(.*)$")


def first_comment(path: Path) -> str:
    """The first sentence of the file's leading comment (Hydra directives left out)."""
    text = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if not line.startswith("# @package"):
            text.append(line.lstrip("# ").strip())
    joined = " ".join(text)
    end = joined.find(". ")
    return joined[: end + 1] if end >= 0 else joined


def settings(config: Path) -> list[tuple[str, str, str]]:
    """(key, default, explanation) of each top-level setting in config.yaml, in file order; a comment
    line indented under a key continues its explanation."""
    out: list[tuple[str, str, str]] = []
    section = None
    for line in config.read_text().splitlines():
        m = KEY.match(line)
        sub = SUBKEY.match(line)
        if m and m.group(1) not in ("defaults", "hydra"):
            section = m.group(1) if not m.group(2) else None
            out.append((m.group(1), m.group(2), m.group(3) or ""))
        elif sub and section:
            if out and out[-1][0] == section and not out[-1][2]:
                out.pop()  # the section's own line says nothing: its settings stand for it
            out.append((f"{section}.{sub.group(1)}", sub.group(2), sub.group(3) or ""))
        elif (c := MORE.match(line)) and out and line.startswith(" " * 10):
            key, default, text = out[-1]
            out[-1] = (key, default, f"{text} {c.group(1)}".strip())
        elif m:
            section = None
            out.append(("", "", ""))  # defaults / hydra: blocks end the settings they follow
    return [s for s in out if s[0]]


def _wrap(text: str, indent: int, width: int = 110) -> str:
    """`text` wrapped to `width` columns, its first line to follow an `indent`-wide label."""
    import textwrap

    pad = " " * indent
    return textwrap.fill(text, width, initial_indent=pad, subsequent_indent=pad)[indent:] if text else ""


def _fill(text: str, width: int = 110) -> str:
    """A paragraph of its own, wrapped to `width`, continued two spaces in."""
    import textwrap

    return textwrap.fill(text, width, subsequent_indent="  ", break_on_hyphens=False)


def render(conf: Path = CONF) -> str:
    lines = ["== Config groups (group=option) =="]
    for group in GROUPS:
        lines.append(f"{group}:")
        for p in sorted((conf / group).glob("*.yaml"), key=lambda p: p.stem):
            lines.append(f"  {p.stem:<26}" + _wrap(first_comment(p), 28))
    stems = {p.stem for p in EXPERIMENTS.glob("*.yaml")}
    paired = sorted({s.rsplit("-", 1)[0] for s in stems if s.endswith(("-local", "-paper"))
                     and {f"{s.rsplit('-', 1)[0]}-local", f"{s.rsplit('-', 1)[0]}-paper"} <= stems})
    alone = sorted(s for s in stems if not any(s in (f"{n}-local", f"{n}-paper") for n in paired))
    lines.append(_fill(f"+experiment=NAME-local|NAME-paper (with -m; experiments/README.md): "
                       f"{', '.join(paired)}; and by their own names: {', '.join(alone)}"))
    lines += ["", "== Settings (key=value; default in parentheses) =="]
    for key, default, text in settings(conf / "config.yaml"):
        label = f"  {key} ({default})"
        if len(label) >= 36:  # a long default (an interpolation) on its own line, the explanation below it
            lines += [label, " " * 36 + _wrap(text, 36)]
        else:
            lines.append(f"{label:<36}" + _wrap(text, 36))
    lines += [f"  {'method.drafter.KEY=VALUE':<34}" + _wrap("a method's hyperparameter (its Config dataclass: "
                                                             "names, defaults and checks)", 36),
              f"  {'logging.wandb.mode, .project':<34}" + _wrap("W&B: offline (default), online, disabled; "
                                                                      "WANDB_MODE sets the mode", 36),
              f"  {'hydra.searchpath=[file:///DIR]':<34}" + _wrap("more configs (e.g. DIR/method/mine.yaml and "
                                                                   "its drafter's .py beside it)", 36),
              "", _fill("Environment: GOOSE_CACHE (converted models, datastores, cost curves; default "
                        "~/.cache/goose), GOOSE_DATA_DIR (offline benchmark copies), HF_HUB_OFFLINE=1 (no hub "
                        "access).")]
    return "\n".join(lines).replace("$", "$$")  # Hydra's template is a string.Template


def register() -> None:
    OmegaConf.register_new_resolver("goose_help", render, replace=True)
