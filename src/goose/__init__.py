"""goose: training-free speculative decoding (GOOSE and the methods it is measured against) on one
verification engine.

    import goose
    model = goose.load("smollm2-135m")          # a model config, a local GGUF file or folder, or a hub id
    out = goose.generate(model, "def fib(n):", method="goose", budget="auto", max_new_tokens=128)
    print(out.text, out.tau, out.from_source)

The API loads lazily: importing a submodule (goose.engine.single, ...) does not pull it in.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

API = ("load", "generate", "make_method", "marked", "Model", "Output")
__all__ = list(API)


def __getattr__(name: str):
    if name in API:
        from goose import api

        return getattr(api, name)
    raise AttributeError(f"module 'goose' has no attribute {name!r}")


# The design card's top-level folders baselines/, experiments/ and analysis/ are the subpackages goose.baselines,
# goose.experiments and goose.analysis: an install maps them into the package (pyproject.toml's package-dir), so
# nothing lands in site-packages under a generic name. A checkout run with src/ on sys.path (run.py, pytest,
# PYTHONPATH=src) has no such mapping: this finder resolves them beside this very file, so that two checkouts
# never mix (an editable install of another checkout would otherwise answer). docs/map.md.
TOP_LEVEL_ROOMS = ("baselines", "experiments", "analysis")
_CHECKOUT = Path(__file__).resolve().parents[2]


def top_level_room(name: str) -> Path | None:
    """The folder of `goose.<room>` when it is one of this checkout's top-level folders, else None."""
    head, _, room = name.partition(".")
    folder = _CHECKOUT / room
    if head == "goose" and room in TOP_LEVEL_ROOMS and (folder / "__init__.py").is_file() \
            and not (Path(__file__).parent / room).exists():
        return folder
    return None


class _TopLevelRooms:
    @staticmethod
    def find_spec(name, path=None, target=None):
        folder = top_level_room(name)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(name, folder / "__init__.py",
                                                      submodule_search_locations=[str(folder)])


if Path(__file__).resolve().parent.parent.name == "src" and not any(
        type(f).__name__ == "_TopLevelRooms" for f in sys.meta_path):
    sys.meta_path.insert(0, _TopLevelRooms())
