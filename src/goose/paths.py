"""Where the Hydra configs live: the repository's conf/ (a checkout or an editable install), else the
copy a wheel ships inside the package (goose/conf, see pyproject.toml)."""

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_CANDIDATES = (_HERE.parents[1] / "conf", _HERE / "conf")
CONF = next((p for p in _CANDIDATES if (p / "config.yaml").is_file()), _CANDIDATES[0])
