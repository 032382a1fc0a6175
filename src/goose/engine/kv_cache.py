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

from goose.errors import GooseError

CHUNK = 256  # positions: a buffer grows by at least this much (and at least doubles), so growth is rare



def grown_capacity(need: int, old: int, limit: int | None = None) -> int:
    """Slots for a buffer that must hold `need`: whole chunks, at least doubling `old`, capped at `limit` (the
    model's context) unless one forward needs more."""
    cap = -(-max(need, 2 * old, CHUNK) // CHUNK) * CHUNK
    return max(need, min(cap, limit)) if limit else cap

class InPlaceLayer(DynamicLayer):
    """A full-attention layer's cache in a buffer of `capacity` positions; `keys`/`values` are views of
    the first `length` of them (what `DynamicLayer` users read)."""

    def __init__(self, limit: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit  # the model's context: a buffer never grows past it (unless one forward needs more)
        self.length = 0
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.is_initialized = True

    def _reserve(self, need: int, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        if self._k is not None and need <= self._k.shape[-2]:
            return
        cap = grown_capacity(need, 0 if self._k is None else self._k.shape[-2], self.limit)
        k = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])
        v = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
        if self.length:
            k[..., : self.length, :].copy_(self._k[..., : self.length, :])
            v[..., : self.length, :].copy_(self._v[..., : self.length, :])
        self._k, self._v = k, v

    def _view(self) -> None:
        self.keys = self._k[..., : self.length, :]
        self.values = self._v[..., : self.length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        start, n = self.length, key_states.shape[-2]
        self._reserve(start + n, key_states, value_states)
        self._k[..., start : start + n, :].copy_(key_states)
        self._v[..., start : start + n, :].copy_(value_states)
        self.length = start + n
        self._view()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    @property
    def capacity(self) -> int:
        """Positions the buffer holds before it must grow (0 before the first update)."""
        return 0 if self._k is None else self._k.shape[-2]

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
