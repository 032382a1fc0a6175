"""The design card's top-level folders baselines/, experiments/ and analysis/ as the subpackages goose.baselines,
goose.experiments and goose.analysis.

An install maps them into the package (pyproject.toml's package-dir), so nothing lands in site-packages under a
generic name. A checkout run with src/ on sys.path (run.py, pytest, PYTHONPATH=src) has no such mapping: the
finder installed by `install_finder` (from goose/__init__.py) resolves them beside this checkout's src/, so that
two checkouts never mix (an editable install of another checkout would otherwise answer). docs/map.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TOP_LEVEL_ROOMS = ("baselines", "experiments", "analysis")
_PACKAGE = Path(__file__).resolve().parents[1]  # src/goose, or site-packages/goose
_CHECKOUT = _PACKAGE.parents[1]


def top_level_room(name: str) -> Path | None:
    """The folder of `goose.<room>` when it is one of this checkout's top-level folders, else None."""
    head, _, room = name.partition(".")
    folder = _CHECKOUT / room
    if head == "goose" and room in TOP_LEVEL_ROOMS and _PACKAGE.parent.name == "src" \
            and (folder / "__init__.py").is_file() and not (_PACKAGE / room).exists():
        return folder
    return None


class TopLevelRooms:
    """A meta path finder for goose.baselines, goose.experiments and goose.analysis in a checkout."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        folder = top_level_room(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


def install_finder() -> None:
    """First on sys.meta_path in a checkout (once); nothing in an install, whose package holds the rooms."""
    if _PACKAGE.parent.name == "src" and not any(type(f).__name__ == "TopLevelRooms" for f in sys.meta_path):
        sys.meta_path.insert(0, TopLevelRooms())
