"""Packed rows: a batched verification where every request verifies its own number of nodes.

A batch forward pads each request's draft to the widest one (goose.engine.batched), but on a CPU a forward's cost
follows the tokens it computes: four requests of 8, 1, 1 and 1 nodes padded to 4 x 8 cost what 32 nodes cost.
So the batch engine runs the model on the real nodes only, one packed sequence of N tokens ([1, N]): embeddings,
norms, projections, MLPs and the output layer never see a padding node. Attention alone needs the rows apart (each
request reads its own cache row): the packing wrapper scatters the N queries into [rows, T] (T the widest draft),
attends as the model's own attention does, and gathers the N outputs back; the cache layer writes each node's key
and value at its row's slot. Padding queries see only their own slot and are dropped.

The wrapper is installed as the model's attention implementation (`install`) and is the model's own implementation
unchanged whenever a forward passes no `goose_packing`, so the single-request engine and the prefill run as before.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

PACKED_PREFIX = "goose_packed_"


@dataclass
class Packing:
    """Where each of a forward's N packed nodes sits: row `rows[i]`, depth-first index `columns[i]` within its
    draft; `flat[i]` = rows[i] * width + columns[i], its place in the padded [n, width] layout."""

    n: int
    width: int
    rows: torch.Tensor
    columns: torch.Tensor
    flat: torch.Tensor
    offsets: list[int]  # offsets[r]: where row r's nodes start in the packed sequence (offsets[n] = N)

    @property
    def size(self) -> int:
        """Tokens the forward computes: N rounded up (`bucket`); the ones past N are filler, never attended."""
        return bucket(self.offsets[-1])

    @classmethod
    def of(cls, lengths: list[int], device: torch.device) -> Packing:
        width = max(lengths)
        rows = [r for r, t in enumerate(lengths) for _ in range(t)]
        columns = [j for t in lengths for j in range(t)]
        offsets = [0, *itertools.accumulate(lengths)]
        r_t = torch.tensor(rows, device=device)
        c_t = torch.tensor(columns, device=device)
        return cls(len(lengths), width, r_t, c_t, r_t * width + c_t, offsets)


def bucket(tokens: int) -> int:
    """`tokens` rounded up to a multiple of 8 above 16 (of 32 above 128): oneDNN builds its kernels per shape, and a
    forward of a size not seen before costs more (measured: docs/results/concurrency.md, "The previous full run",
    item 3), so a batch whose node count changes every step keeps to a few sizes."""
    if tokens <= 16:
        return tokens
    step = 8 if tokens <= 128 else 32
    return -(-tokens // step) * step


def packed_attention(inner):
    """The attention function `inner` (transformers' signature) over packed queries when the forward passes
    `goose_packing`: queries [1, heads, N, dim] -> [n, heads, width, dim] -> inner -> [1, N, heads, dim]."""

    def attend(module, query, key, value, attention_mask, **kwargs):
        packing: Packing | None = kwargs.pop("goose_packing", None)
        if packing is None:
            return inner(module, query, key, value, attention_mask, **kwargs)
        heads, dim, real = query.shape[1], query.shape[-1], packing.offsets[-1]
        padded = query.new_zeros(packing.n * packing.width, heads, dim)
        padded[packing.flat] = query[0, :, :real].transpose(0, 1)
        padded = padded.view(packing.n, packing.width, heads, dim).transpose(1, 2)
        out, _ = inner(module, padded, key, value, attention_mask, **kwargs)  # [n, width, heads, dim]
        packed = out.new_zeros(1, query.shape[2], heads, out.shape[-1])  # filler tokens' outputs stay 0
        packed[0, :real] = out.reshape(packing.n * packing.width, heads, -1)[packing.flat]
        return packed, None

    return attend


def install(model) -> None:
    """Run `model`'s attention through the packing wrapper (once per model object)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: F401 (registers sdpa)
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.llama.modeling_llama import eager_attention_forward

    current = model.config._attn_implementation or "eager"
    if current.startswith(PACKED_PREFIX):
        return
    inner = ALL_ATTENTION_FUNCTIONS.get_interface(current, eager_attention_forward)
    name = PACKED_PREFIX + current
    AttentionInterface.register(name, packed_attention(inner))
    masks = AttentionMaskInterface._global_mapping
    AttentionMaskInterface.register(name, masks.get(current, masks["sdpa"]))
    model.set_attn_implementation(name)
