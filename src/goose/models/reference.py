"""Hugging Face's own `generate`, the outside reference every method is held to: greedy (`hf_greedy`), or greedy on
our perturbed logits when sampling (Hugging Face's loop and cache, goose's noise), and a reference entry with each
token's margin and runners-up (`hf_reference`), which the equality check reads."""

from __future__ import annotations

import torch

from goose.engine.sampling import Sampler, Sampling, ranked


class GumbelNoise:
    """A Hugging Face logits processor that turns greedy `generate` into our sampler: each step's scores
    become the filtered logits plus the noise of the position being emitted (the sequence length)."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        position = input_ids.shape[1]
        return torch.stack([self.sampler.perturbed(row, position) for row in scores])


def hf_greedy(model, ids: list[int], max_new_tokens: int, stops: frozenset[int], sampling: Sampling | None = None,
              **extra) -> list[int]:
    """Hugging Face generate, greedy: the outside reference for our own AR (`extra`: e.g. prompt lookup).
    With `sampling`, greedy on our perturbed logits: Hugging Face's loop and cache, our noise."""
    from transformers import LogitsProcessorList

    sampler = sampling.for_prompt(ids) if sampling is not None else None
    if sampler is not None:
        extra["logits_processor"] = LogitsProcessorList([GumbelNoise(sampler)])
    prompt = torch.tensor([ids], device=model.device)
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),  # else a prompt token equal to the pad id would be masked out
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=sorted(stops) or None,
        pad_token_id=sorted(stops)[0] if stops else 0,
        **extra,
    )
    return out if extra.get("return_dict_in_generate") else out[0, len(ids) :].tolist()


def hf_reference(model, ids: list[int], max_new_tokens: int, stops: frozenset[int],
                 sampling: Sampling | None = None) -> dict:
    """Hugging Face greedy `generate` (on our perturbed logits when sampling) as a reference entry: its tokens
    and, from the scores it chose them by, each token's margin, runners-up and gaps."""
    out = hf_greedy(model, ids, max_new_tokens, stops, sampling, output_scores=True, return_dict_in_generate=True)
    tokens = out.sequences[0, len(ids):].tolist()
    choices = [ranked(s[0].float(), t) for s, t in zip(out.scores, tokens)]
    return {"tokens": tokens, "margins": [round(c.margin, 7) for c in choices],
            "runners_up": [c.runners_up for c in choices], "gaps": [[round(g, 7) for g in c.gaps] for c in choices]}
