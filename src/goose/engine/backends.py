"""How the target's forward runs: `eager` (PyTorch and transformers as loaded) or `prepacked` (CPU, fp32:
every linear layer on weights reordered once into oneDNN's blocked layout, and attention over several
query tokens reading the key/value heads as stored).

Why prepacking: on a CPU a forward over a few tokens is bound by reading the weights; `F.linear` reads
them in their plain layout through a generic GEMM, oneDNN's prepacked path reads a layout made for its
kernels, so a one-token forward gets cheaper and verifying 2-16 tokens costs little more than one (see
`make bench`, which measures both cost curves in one run). The reorder is paid once, at load.

Why the attention change: with a mask (every tree verification) and more than one query token,
transformers' SDPA path copies each layer's whole key/value cache into one head per query head
(`repeat_kv`, grouped-query models such as SmolLM2 and Llama 3) before attending, a copy as large as
the cache at every layer and forward. PyTorch's CPU kernel takes the grouped heads as they are
(`enable_gqa`) and computes the same numbers (checked in tests/engine/test_backends.py).

A backend changes the floating-point order of the sums, so its tokens are compared with AR on the same
backend only: the backend is part of every config hash, reference key and timing key.
"""

from __future__ import annotations

import platform

import torch
from torch import nn

from goose.errors import GooseError

BACKENDS = ("eager", "prepacked")
KV_HEADS_ATTENTION = "goose_kv_heads"  # the attention implementation prepacked models run (registered below)


def kv_heads_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None,
                       **kwargs):
    """transformers' SDPA attention, but a masked forward over several query tokens attends to the grouped
    key/value heads in place (`enable_gqa`) instead of repeating them per query head first."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    plain = kwargs.get("position_bias") is None and kwargs.get("softcap") is None and not dropout
    if groups == 1 or attention_mask is None or query.shape[2] == 1 or not plain or query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                           scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(KV_HEADS_ATTENTION, kv_heads_attention)
    AttentionMaskInterface.register(KV_HEADS_ATTENTION, sdpa_mask)  # masks are built as for sdpa


class PrepackedLinear(nn.Module):
    """nn.Linear on a oneDNN-reordered copy of its weight (`torch.ops.mkldnn`, what Inductor's weight
    freezing uses on CPU). Inputs and outputs are ordinary dense tensors."""

    def __init__(self, linear: nn.Linear, keep_weight: bool = False):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("packed", torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), None),
                             persistent=False)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach(), requires_grad=False)
        # The plain weight is dropped (else the layer's memory doubles), but for the output embeddings, which
        # code reads (and tied input embeddings share): not used here.
        self.weight = linear.weight if keep_weight else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN prepacked"


def default_backend(device: torch.device, dtype: torch.dtype) -> str:
    """What engine.backend=auto picks: prepacked where it applies (fp32 on a CPU with oneDNN), else eager."""
    ok = device.type == "cpu" and dtype == torch.float32 and torch.backends.mkldnn.is_available()
    return "prepacked" if ok else "eager"


def check_backend(name: str, device: torch.device, dtype: torch.dtype) -> None:
    if name not in BACKENDS:
        raise GooseError(f"unknown engine.backend '{name}'; choose from {', '.join(BACKENDS)} or auto.")
    if name == "prepacked":
        if device.type != "cpu":
            raise GooseError(f"engine.backend=prepacked is a CPU path (the model is on {device.type}); "
                             "use engine.backend=eager there.")
        if dtype != torch.float32:
            raise GooseError(f"engine.backend=prepacked runs fp32 weights (got {str(dtype).replace('torch.', '')}); "
                             "use dtype=float32 or engine.backend=eager.")
        if not torch.backends.mkldnn.is_available():
            raise GooseError("engine.backend=prepacked needs a torch build with oneDNN (mkldnn); this one has "
                             "none: use engine.backend=eager.")


def apply_backend(model: nn.Module, name: str) -> nn.Module:
    """Switch `model` (in place) to `name` and record it on the model (`goose_backend`), which the engine
    reads. Eager leaves the model as loaded."""
    device = next(model.parameters()).device
    check_backend(name, device, next(model.parameters()).dtype)
    current = backend_of(model)
    if current == name:
        return model
    if current != "eager":
        raise GooseError(f"this model object already runs engine.backend={current}; load it again for {name}.")
    if name == "prepacked":
        output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        with torch.inference_mode(False), torch.no_grad():
            for parent in list(model.modules()):
                for child_name, child in list(parent.named_children()):
                    if type(child) is nn.Linear:
                        setattr(parent, child_name, PrepackedLinear(child, keep_weight=child is output))
        if model.config._attn_implementation == "sdpa":
            _register_attention()
            model.set_attn_implementation(KV_HEADS_ATTENTION)
    model.goose_backend = name
    return model


def backend_of(model: nn.Module) -> str:
    return getattr(model, "goose_backend", "eager")


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA): a timer read after this measures the work, not its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device) -> str:
    """The GPU's name; for a CPU its model and the instruction set ATen's kernels dispatch on (e.g. "AMD EPYC
    (AVX512)"): rounding, and so a top-k tie, can differ between two CPUs' kernels, so rows and AR references say
    which ran them."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{_cpu_model()} ({torch.backends.cpu.get_cpu_capability()})"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:  # Linux; platform.processor() is empty there
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"
