"""A KV cache that grows in place: each layer keeps its keys and values in a buffer with room to spare,
writes a step's new entries into it and hands attention a view of the filled part.

Why: Hugging Face's `DynamicLayer` concatenates the whole cache with the new entries at every forward
(a fresh [batch, heads, length, dim] tensor per layer, twice), and after a crop (every rejected draft)
it concatenates from a strided view, the slow path of `torch.cat`. On a CPU that is milliseconds per
forward for SmolLM2 at a few hundred tokens, as much as the extra weights of verifying 8 more tokens.
Here a forward copies only its own T entries; cropping and the engine's compaction move no memory
beyond the accepted nodes. The values attention reads are the same numbers either way.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from goose.engine.packed import Packing
from goose.errors import GooseError

CHUNK = 256  # positions: a buffer grows by at least this much (and at least doubles), so growth is rare



def grown_capacity(need: int, old: int, limit: int | None = None) -> int:
    """Slots for a buffer that must hold `need`: whole chunks, at least doubling `old`, capped at `limit` (the
    model's context) unless one forward needs more."""
    cap = -(-max(need, 2 * old, CHUNK) // CHUNK) * CHUNK
    return max(need, min(cap, limit)) if limit else cap

class GrowingLayer(DynamicLayer):
    """Keys and values in buffers with room to spare, grown by whole chunks up to `limit` positions (the model's
    context, unless one forward needs more): what both engines' layers share. `rows`: the buffers' batch (the
    batch engine's requests), else the first update's."""

    def __init__(self, limit: int | None = None, rows: int | None = None):
        super().__init__()
        self.limit = limit
        self.rows = rows
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True

    @property
    def capacity(self) -> int:
        """Positions the buffer holds before it must grow (0 before the first update)."""
        return 0 if self._k is None else self._k.shape[-2]

    def reserve(self, need: int, like_k: torch.Tensor, like_v: torch.Tensor) -> None:
        """Room for `need` positions per row: new zeroed buffers shaped like `like_k`/`like_v` but for the
        positions, holding what the old ones held."""
        old = self.capacity
        if need <= old:
            return
        cap = grown_capacity(need, old, self.limit)
        rows = like_k.shape[0] if self.rows is None else self.rows
        k = like_k.new_zeros(rows, like_k.shape[1], cap, like_k.shape[-1])
        v = like_v.new_zeros(rows, like_v.shape[1], cap, like_v.shape[-1])
        if old:
            k[..., :old, :].copy_(self._k)
            v[..., :old, :].copy_(self._v)
        self._k, self._v = k, v


class InPlaceLayer(GrowingLayer):
    """A full-attention layer's cache for one request; `keys`/`values` are views of the first `length` positions
    of its buffers (what `DynamicLayer` users read)."""

    def __init__(self, limit: int | None = None):
        super().__init__(limit)
        self.length = 0

    def _view(self) -> None:
        self.keys = self._k[..., : self.length, :]
        self.values = self._v[..., : self.length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, n = self.length, key_states.shape[-2]
        self.reserve(start + n, key_states, value_states)
        self._k[..., start : start + n, :].copy_(key_states)
        self._v[..., start : start + n, :].copy_(value_states)
        self.length = start + n
        self._view()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative count of tokens to remove (got {tokens_to_remove}).")
        if tokens_to_remove == 0 or not self.is_initialized:
            return
        self.length = max(0, self.length + tokens_to_remove)
        self._view()

    def reset(self) -> None:
        self.length = 0
        self._k = self._v = None
        super().reset()

    def offload(self):
        # would move the views, not the buffers, and the engine's compaction writes through the views
        raise NotImplementedError("the in-place cache is not offloaded")

    def prefetch(self):
        raise NotImplementedError("the in-place cache is not offloaded")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("the engine decodes one sequence at a time")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        raise NotImplementedError("the engine decodes one sequence at a time")

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        raise NotImplementedError("the engine decodes one sequence at a time")


class BatchLayer(GrowingLayer):
    """One layer's cache of `rows` requests (goose.engine.batched): a forward writes its n rows' entries at slot
    `end`, the same for every row."""

    def __init__(self, rows: int, limit: int | None = None):
        super().__init__(limit, rows)
        self.end = 0  # E: where the next forward's entries go, for every row
        self.packing: Packing | None = None  # set for a packed forward (goose.engine.packed): where each node goes

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        p = self.packing
        if p is None:
            n, t = key_states.shape[0], key_states.shape[-2]
            self.reserve(self.end + t, key_states, value_states)
            self._k[:n, :, self.end : self.end + t].copy_(key_states)
            self._v[:n, :, self.end : self.end + t].copy_(value_states)
        else:  # [1, heads, N, dim]: node i to row p.rows[i], slot end + p.columns[i]
            n, t = p.n, p.width
            self.reserve(self.end + t, key_states, value_states)
            slots, real = self.end + p.columns, p.offsets[-1]
            self._k[p.rows, :, slots] = key_states[0, :, :real].transpose(0, 1)
            self._v[p.rows, :, slots] = value_states[0, :, :real].transpose(0, 1)
        self.keys = self._k[:n, :, : self.end + t]
        self.values = self._v[:n, :, : self.end + t]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.end

    def put_row(self, row: int, keys: torch.Tensor, values: torch.Tensor) -> None:
        """One request's entries [1, heads, n, dim] (its prefill) into positions 0 .. n - 1 of `row`."""
        self.lazy_initialization(keys, values)
        n = keys.shape[-2]
        self.reserve(max(n, self.end), keys, values)
        self._k[row, :, :n].copy_(keys[0])
        self._v[row, :, :n].copy_(values[0])

    def copy_row(self, src: int, dst: int, n: int) -> None:
        """Row `src`'s first n entries into row `dst` (a finished request's row taken by the last active one)."""
        self._k[dst, :, :n].copy_(self._k[src, :, :n])
        self._v[dst, :, :n].copy_(self._v[src, :, :n])


def move_entries(layers, rows: list[int], src: list[int], dst: list[int]) -> None:
    """Every layer's keys and values at (rows[i], src[i]) copied to (rows[i], dst[i]): one gather per layer, the
    index tensors made once per device. The engines' compaction (accepted nodes to their place in the context);
    reads and writes the layers' `keys`/`values`, so it works on any `DynamicLayer`."""
    index: dict[torch.device, tuple[torch.Tensor, ...]] = {}
    for layer in layers:
        d = layer.keys.device
        if d not in index:
            index[d] = tuple(torch.tensor(x, device=d) for x in (rows, src, dst))
        r, s, t = index[d]
        layer.keys[r, :, t] = layer.keys[r, :, s]
        layer.values[r, :, t] = layer.values[r, :, s]


def new_cache(config, limit: int | None = None) -> DynamicCache:
    """A `DynamicCache` for `config` whose layers grow in place, up to `limit` positions (the model's
    context). Full-attention and sliding-window layers are replaced (a sliding layer keeps every entry too: the
    engines' masks hide those its window no longer sees, goose.engine.layouts); any other kind is refused (the engine
    refuses such models before this)."""
    cache = DynamicCache(config=config)
    odd = sorted({type(layer).__name__ for layer in cache.layers
                  if type(layer) not in (DynamicLayer, DynamicSlidingWindowLayer)})
    if odd:
        raise GooseError(f"the engine's KV cache holds full-attention and sliding-window layers only; this model has "
                         f"{', '.join(odd)}.")
    cache.layers = [InPlaceLayer(limit) for _ in cache.layers]
    if not cache.layers:  # a config without layer types: layers are made on first use
        cache.layer_class_to_replicate = InPlaceLayer
    return cache
