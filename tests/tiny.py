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


# --- the paper's architectures, tiny ---------------------------------------------------------------
# Each from its family's own config class, at the tiny scale (2 layers, hidden 64), with the family's
# conventions scaled down: special ids past the 256 bytes where the family's sit past its BPE merges
# (Llama 3's 128000.., Qwen3's 151643..: offset 256 here), Vicuna's at 0/1/2 as in its own vocabulary.
PAPER_ARCHITECTURES = ("vicuna", "llama3", "qwen3")


def tiny_architecture(kind: str, seed: int = 0):
    """A tiny random model of one of the paper's families (eval mode, fp32, output layer scaled up as
    `tiny_model`'s so drafts are sometimes accepted):

    - vicuna: Vicuna v1.3 is a Llama: LlamaConfig, default rope (theta 1e4), multi-head attention (as many
      key/value heads as query heads), untied embeddings, bos 1, eos 2, pad 0 (its unk), vocab 260.
    - llama3: Llama-3-8B-Instruct's layout: LlamaConfig, grouped-query attention (4 query heads, 1 key/value
      head; 8B: 32 and 8), untied embeddings, rope theta 5e5 with Llama 3.1's `llama3` frequency scaling (factor
      8, low 1, high 4; original context 64 of 512 here, 8192 of 131072 there: the scaling only bites on such
      a context, and Llama-3-8B-Instruct itself has none, so this covers it and 3.1), bos 256 (<|begin_of_text|>),
      config eos 265 (<|eot_id|>, 128009) and generation eos [257, 265] (<|end_of_text|>, <|eot_id|>): two stop
      ids, vocab 288.
    - qwen3: Qwen3Config: q/k RMS norms, grouped-query attention (4 / 2), head_dim 32 set apart from hidden /
      heads (16) as the small Qwen3s have it, untied embeddings as Qwen3-8B (the small Qwen3s tie theirs),
      rope theta 1e6, no sliding window, bos 256 (<|endoftext|>), config eos 258 (<|im_end|>) and generation
      eos [258, 256], vocab 288.
    """
    torch.manual_seed(seed)
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  tie_word_embeddings=False)
    if kind == "vicuna":
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(vocab_size=260, num_key_value_heads=4, max_position_embeddings=1024,
                                             bos_token_id=1, eos_token_id=2, pad_token_id=0, **common))
        generation_eos = None
    elif kind == "llama3":
        from transformers import LlamaConfig, LlamaForCausalLM

        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
        model = LlamaForCausalLM(LlamaConfig(vocab_size=288, num_key_value_heads=1, max_position_embeddings=512,
                                             rope_parameters=rope, bos_token_id=256, eos_token_id=265, **common))
        generation_eos = [257, 265]
    elif kind == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM

        model = Qwen3ForCausalLM(Qwen3Config(vocab_size=288, num_key_value_heads=2, head_dim=32,
                                             max_position_embeddings=1024, rope_parameters={"rope_type": "default",
                                             "rope_theta": 1000000.0}, bos_token_id=256, eos_token_id=258,
                                             **common))
        generation_eos = [258, 256]
    else:
        raise ValueError(f"unknown architecture {kind!r}; one of {PAPER_ARCHITECTURES}")
    if generation_eos is not None:  # the hub checkpoints' generation_config.json lists every stop id
        model.generation_config.eos_token_id = generation_eos
    model.eval()
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(8.0)
    return model
