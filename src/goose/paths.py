"""Where things live: the Hydra configs (the repository's conf/ in a checkout or an editable install, else
the copy a wheel ships inside the package, goose/conf; see pyproject.toml) and goose's cache."""

import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent
REPO_ROOT = _HERE.parents[1]  # a checkout: src/goose/ -> the repository
_CANDIDATES = (REPO_ROOT / "conf", _HERE / "conf")
CONF = next((p for p in _CANDIDATES if (p / "config.yaml").is_file()), _CANDIDATES[0])


def config_names(group: str, search_path=()) -> list[str]:
    """Every config of a Hydra group: conf/<group>/*.yaml, then those in the extra search-path folders."""
    return sorted({f.stem for d in (CONF, *map(Path, search_path)) for f in (Path(d) / group).glob("*.yaml")})


def cache_root() -> Path:
    """Converted models, cost profiles, file hashes, REST datastores: $GOOSE_CACHE or ~/.cache/goose."""
    return Path(os.environ.get("GOOSE_CACHE", Path.home() / ".cache" / "goose"))
