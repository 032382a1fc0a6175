"""Where things live: the Hydra configs (the repository's conf/ and experiments/ in a checkout or an editable
install, else the copies a wheel ships inside the package, goose/conf and goose/experiments; see pyproject.toml)
and goose's cache."""

import functools
import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent
REPO_ROOT = _HERE.parents[1]  # a checkout: src/goose/ -> the repository
_CANDIDATES = (REPO_ROOT / "conf", _HERE / "conf")
CONF = next((p for p in _CANDIDATES if (p / "config.yaml").is_file()), _CANDIDATES[0])
EXPERIMENTS = next((p for p in (REPO_ROOT / "experiments", _HERE / "experiments") if (p / "__init__.py").is_file()),
                   REPO_ROOT / "experiments")
CLAIMS_PLAN = "claims-plan.csv"  # a claims results folder's plan: every job its sweeps ask for, and its prompts


@functools.cache
def register_experiments() -> None:
    """Make experiments/*.yaml the Hydra group `experiment` (`+experiment=NAME`), each in the global package as
    its `# @package _global_` header says. The experiments live in their own top-level folder, not in conf/, so
    they are given to Hydra's config store; call this before composing (once per process: cached)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    store = ConfigStore.instance()
    for f in sorted(EXPERIMENTS.glob("*.yaml")):
        store.store(group="experiment", name=f.stem, node=OmegaConf.load(f), package="_global_",
                    provider="goose.experiments")


def config_names(group: str, search_path=()) -> list[str]:
    """Every config of a Hydra group: conf/<group>/*.yaml (experiments/*.yaml for `experiment`), then those in the
    extra search-path folders."""
    own = EXPERIMENTS if group == "experiment" else CONF / group
    return sorted({f.stem for d in (own, *(Path(d) / group for d in search_path)) for f in d.glob("*.yaml")})


def cache_root() -> Path:
    """Converted models, cost profiles, file hashes, REST datastores: $GOOSE_CACHE or ~/.cache/goose."""
    return Path(os.environ.get("GOOSE_CACHE", Path.home() / ".cache" / "goose"))
