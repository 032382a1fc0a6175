"""A tiny random Llama and a byte-level tokenizer, built locally (no download), for tests and demos
of the whole pipeline without real weights."""

from __future__ import annotations

from pathlib import Path

import torch


def tiny_config(vocab_size: int = 260, layers: int = 2, max_positions: int = 1024):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_positions,
        bos_token_id=None, eos_token_id=257, pad_token_id=258, tie_word_embeddings=False,
    )


def tiny_model(seed: int = 0, **kw):
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(tiny_config(**kw)).eval()
    # Larger weights make the argmax less uniform, so drafts are sometimes accepted.
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)
    return model


def tiny_windowed_model(kind: str = "gemma3", seed: int = 0, window: int = 8):
    """A tiny random model whose layers (gemma3: every other one; mistral: all) attend to the last `window`
    positions only: contexts past the window test the engines' windowed masks against the model's own
    generate, whose cache drops the old entries instead."""
    torch.manual_seed(seed)
    common = dict(vocab_size=260, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=1024, sliding_window=window, bos_token_id=None, eos_token_id=257,
                  pad_token_id=258, tie_word_embeddings=False)
    if kind == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        config = Gemma3TextConfig(num_hidden_layers=4, head_dim=16,
                                  layer_types=["sliding_attention", "full_attention"] * 2, **common)
        model = Gemma3ForCausalLM(config)
    else:
        from transformers import MistralConfig, MistralForCausalLM

        model = MistralForCausalLM(MistralConfig(num_hidden_layers=2, **common))
    model.eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return model


def byte_tokenizer():
    """Bytes 0..255 are tokens 0..255; 256 = <s>, 257 = </s>, 258 = <pad>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab.update({"<s>": 256, "</s>": 257, "<pad>": 258})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", bos_token="<s>")


def save_tiny(folder: str | Path, seed: int = 0, **kw) -> Path:
    """Write a tiny model + tokenizer as a Hugging Face folder (usable as model=hf model.path=...)."""
    folder = Path(folder)
    tiny_model(seed, **kw).save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return folder
