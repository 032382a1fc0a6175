"""The run's settings: checks that need no model and no data, the resolved device and dtype, and
the config hash that keys result rows."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from omegaconf import DictConfig, OmegaConf

from goose.benchmarks import check_turns
from goose.errors import GooseError
from goose.fingerprints import digest
from goose.models import resolve_device, resolve_dtype
from goose.sampling import Sampling
from goose.timing import MODES

# Keys that change which prompts run or where output goes, not what a row contains. Paths are
# left out too: the model's and the prompts' contents are hashed instead (fingerprints).
NOT_HASHED = ("n_prompts", "results_dir", "run_dir", "logging", "prompt", "prompt_file", "warmup", "data_dir",
              "trace", "engine")  # engine.backend enters the hash as the resolved `backend` (identity)


def _whole(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def validate(cfg: DictConfig) -> None:
    """Every check that needs no model and no data, so a bad command fails before anything is created."""
    if not _whole(cfg.max_new_tokens, 1):
        raise GooseError(f"max_new_tokens must be an integer >= 1 (got {cfg.max_new_tokens!r}).")
    if cfg.n_prompts is not None and not _whole(cfg.n_prompts, 1):
        raise GooseError(f"n_prompts must be an integer >= 1 or null for all (got {cfg.n_prompts!r}).")
    if not _whole(cfg.repeats, 1):
        raise GooseError(f"repeats must be an integer >= 1: timed generations per prompt (got {cfg.repeats!r}).")
    if not _whole(cfg.warmup, 0):
        raise GooseError(f"warmup must be an integer >= 0: untimed generations first (got {cfg.warmup!r}).")
    if not _whole(cfg.get("trial", 1), 1):
        raise GooseError(f"trial must be an integer >= 1: which full pass over the prompts this run is "
                         f"(got {cfg.trial!r}).")
    check_turns(cfg.benchmark.get("turns"))
    if cfg.speedup_reference not in MODES:
        raise GooseError(f"speedup_reference must be one of {', '.join(MODES)} (got {cfg.speedup_reference!r}).")
    if cfg.prompt is not None and cfg.prompt_file is not None:
        raise GooseError("give prompt=... or prompt_file=..., not both.")
    Sampling.from_config(cfg)  # refuses a bad temperature, top_k, top_p or seed


def resolved_device_dtype(cfg: DictConfig) -> tuple[torch.device, torch.dtype]:
    device = resolve_device(cfg.device if cfg.device != "auto" else cfg.model.get("device", "auto"))
    return device, resolve_dtype(cfg.dtype if cfg.dtype != "auto" else cfg.model.get("dtype", "auto"), device)


def resolved_backend(cfg: DictConfig, device: torch.device, dtype: torch.dtype) -> str:
    """engine.backend, checked against the device and dtype (auto: prepacked for fp32 on CPU, else eager)."""
    from goose.backends import check_backend, default_backend

    engine = cfg.get("engine", {})
    if not isinstance(engine, Mapping):
        raise GooseError(f"engine must be a section (got engine={engine!r}); set engine.backend=eager|prepacked|auto.")
    name = engine.get("backend", "auto")
    name = default_backend(device, dtype) if name == "auto" else name
    check_backend(name, device, dtype)
    return name


SAMPLING_KEYS = ("temperature", "top_k", "top_p")
ROW_SCHEMA = 3  # bumped when a row's columns change, so a resumed run never appends mismatched rows


def config_hash(cfg: DictConfig, identity: dict) -> str:
    """Every key that changes a row, plus what the config points at (model and prompts content,
    resolved device and dtype, backend)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    kept = {k: v for k, v in plain.items() if k not in NOT_HASHED}
    if Sampling.from_config(cfg).greedy:  # top_k and top_p change nothing then: greedy hashes stay as they were
        for k in SAMPLING_KEYS:
            kept.pop(k, None)
    else:  # temperature=1 and temperature=1.0 are one setting
        kept.update(temperature=float(kept["temperature"]), top_p=float(kept["top_p"]))
    if kept.get("trial", 1) == 1:  # trial 1 hashes as runs did before trials existed
        kept.pop("trial", None)
    for section in ("model", "benchmark"):
        # `turns` decides which prompts exist, and the prompts' contents are hashed already (fingerprint)
        kept[section] = {k: v for k, v in kept[section].items() if k not in ("path", "turns")}
    kept.update(identity)
    kept["row_schema"] = ROW_SCHEMA
    return digest(kept, 12)


