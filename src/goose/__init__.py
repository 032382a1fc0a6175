"""goose: training-free speculative decoding (GOOSE and the methods it is measured against) on one
verification engine.

    import goose
    model = goose.load("smollm2-135m")          # a model config, a local GGUF file or folder, or a hub id
    out = goose.generate(model, "def fib(n):", method="goose", budget="auto", max_new_tokens=128)
    print(out.text, out.tau, out.from_source)

The API loads lazily: importing a submodule (goose.engine.single, ...) does not pull it in. goose.baselines,
goose.experiments and goose.analysis (the repository's top-level folders) come from the install (pyproject.toml's
package-dir; docs/map.md); importing goose changes no import machinery.
"""

from __future__ import annotations

API = ("load", "generate", "make_method", "marked", "Model", "Output")
__all__ = list(API)


def __getattr__(name: str):
    if name in API:
        from goose import api  # start-up time: torch and transformers only on first use

        return getattr(api, name)
    raise AttributeError(f"module 'goose' has no attribute {name!r}")

