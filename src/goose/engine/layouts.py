"""Which attention layouts the engines verify, and the mask each kind of layer gets.

Full-attention layers see every committed token. Sliding-window layers (Gemma 2/3, Mistral, Qwen2 with a
window) see only keys fewer than W positions behind the query; Hugging Face's cache for them drops older
entries, which a tree's rollback could not undo. The engines instead keep every entry in a full in-place
cache and hide the old ones with the mask: the same keys reach the same queries, so a windowed model decodes
what its own generate does, while the cache stays compactable and croppable.
"""

from __future__ import annotations

import torch

from goose.errors import GooseError

SUPPORTED_LAYERS = {"full_attention", "sliding_attention"}


def text_config(config):
    return config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config


def check_supported(config) -> None:
    """Refuse layer kinds whose attention the engines cannot reproduce with a mask over a full cache."""
    text = text_config(config)
    odd = sorted({t for t in getattr(text, "layer_types", None) or () if t not in SUPPORTED_LAYERS})
    if odd:
        raise GooseError(
            f"model type '{text.model_type}' has {', '.join(odd)} layers; tree verification supports "
            f"{' and '.join(sorted(SUPPORTED_LAYERS))} layers only."
        )
    if getattr(text, "attn_logit_softcapping", None) is not None:
        raise GooseError(f"model type '{text.model_type}' soft-caps its attention scores, which the engines' "
                         "attention (sdpa, prepacked) does not do: not supported.")


def head_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """The output layer on `hidden`, soft-capped where the model caps its logits (as its forward does)."""
    logits = model.get_output_embeddings()(hidden)
    cap = getattr(text_config(model.config), "final_logit_softcapping", None)
    return logits if cap is None else torch.tanh(logits / cap) * cap


def sliding_window(config) -> int | None:
    """W if some layers attend to the last W positions only, else None."""
    text = text_config(config)
    window = getattr(text, "sliding_window", None)
    if not window:
        return None
    types = getattr(text, "layer_types", None)
    if types is not None:
        return window if "sliding_attention" in types else None
    return window if getattr(text, "use_sliding_window", True) else None


def layer_masks(config, window: int | None, mask: torch.Tensor, query_pos: torch.Tensor, key_pos: torch.Tensor):
    """The additive mask [n, 1, T, S] as the model's layers take it: itself without a window (`window`: the
    config's `sliding_window`, read once by the engine); else a copy that also hides every key `window` or more
    positions behind its query (query_pos [n, T], key_pos [n, S]), for the sliding layers, by layer kind when
    the model mixes kinds."""
    if window is None:
        return mask
    far = (query_pos.unsqueeze(-1) - key_pos.unsqueeze(-2)) >= window
    windowed = mask.masked_fill(far.unsqueeze(1), torch.finfo(mask.dtype).min)
    if getattr(text_config(config), "layer_types", None) is None:
        return windowed  # every layer slides
    return {"full_attention": mask, "sliding_attention": windowed}
