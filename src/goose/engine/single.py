"""The verification engine shared by every method.

Protocol: the KV cache holds every committed token except the last one (the root, or
anchor). A drafter proposes a `Draft` whose node 0 is that root; `Engine.verify` runs ONE
forward over all nodes with an additive 4-D mask and position ids P + depth, walks the
tree greedily (on perturbed logits when sampling: goose.engine.sampling), compacts the accepted
nodes' keys and values in place and crops the rest.
The engine knows nothing about how a draft was made.
"""

from __future__ import annotations

import statistics
import time

import torch

from goose.engine.backends import synchronize
from goose.engine.base import EngineBase, check_prompt
from goose.engine.draft import Draft, Verification, tree_inputs
from goose.engine.kv_cache import move_entries, new_cache
from goose.engine.layouts import layer_masks
from goose.engine.logits import decide, finite_rows, non_finite, topk_rows
from goose.engine.sampling import Sampler
from goose.errors import NonFiniteLogits


class Engine(EngineBase):
    """Owns the model and one KV cache; prefill, then verify drafts until done."""

    def __init__(self, model, profile: bool = False):
        super().__init__(model, profile)
        self.cache = None

    @property
    def cache_len(self) -> int:
        return self.cache.get_seq_length() if self.cache is not None else 0

    def _forward(self, ids: torch.Tensor, **kwargs) -> torch.Tensor:
        out = self.model(input_ids=ids, cache=self.cache, use_cache=True, **kwargs)
        self.cache = out.cache
        return out.logits[0]

    @torch.inference_mode()
    def prefill(self, prompt: list[int], topk: int = 0, sampler: Sampler | None = None) -> Verification:
        """Run the prompt through a fresh cache; the bonus is the first new token (the argmax, or the
        sampler's draw for position len(prompt)).

        With topk > 0 every prompt position's logits are kept for harvesting; otherwise
        only the last position's, as Hugging Face generate does.
        """
        check_prompt(prompt)
        self.cache = new_cache(self.model.config, self.max_positions)
        self.verifications = 0
        ids = torch.tensor([prompt], device=self.device)
        logits = self._forward(ids, logits_to_keep=0 if topk else 1)
        res = self.first_token(logits[-1], len(prompt), sampler, finite_rows(logits), "the prefill forward")
        if topk:
            res.topk_scores, res.topk_ids = topk_rows(logits.float(), topk)
        return res

    @torch.inference_mode()
    def verify(self, draft: Draft, topk: int = 0, sampler: Sampler | None = None) -> Verification:
        """One forward over the draft, then the walk: greedy on the logits, or, with a sampler, greedy
        on the perturbed logits (node at position p predicts p + 1 and uses that position's noise).
        topk_ids/topk_scores are always the unperturbed logits' top-k (what harvesting drafters learn)."""
        clock = self.clock()
        P = self.cache_len
        if self.max_positions is not None and P + len(draft) > self.max_positions:
            draft = draft.prefix(self.max_positions - P)  # the nodes that still fit in the context
        T = len(draft.tokens)
        dev = self.device
        visible, depth = tree_inputs(draft, dev)
        mask = torch.zeros(1, 1, T, P + T, dtype=self.dtype, device=dev)
        mask[0, 0, :, P:].masked_fill_(~visible, self.mask_min)
        ids = torch.tensor([draft.tokens], device=dev)
        pos = (depth + P).unsqueeze(0)
        clock.mark()
        if self.window is not None:  # key positions: the committed tokens', then the nodes'
            keys = torch.cat([torch.arange(P, device=dev).unsqueeze(0), pos], dim=-1)
            mask = layer_masks(self.model.config, self.window, mask, pos, keys)
        logits = self._forward(ids, position_ids=pos, attention_mask=mask)
        clock.mark()
        self.verifications += 1
        try:
            res = decide(draft, logits, (pos[0] + 1).tolist(), topk, sampler)
        except NonFiniteLogits:
            raise non_finite(f"verification {self.verifications}", self.dtype) from None
        self._compact(P, T, res.path)
        clock.mark()
        if self.profile:
            res.forward_s, res.overhead_s = clock.split()
        return res

    def measure_cost(self, widths: list[int], context_len: int = 256, repeats: int = 3) -> list[float]:
        """Median seconds of one verification of T nodes after a `context_len` prefix, per T."""
        return [statistics.median(t) for t in self.measure_rounds(widths, context_len, repeats)]

    @torch.inference_mode()
    def measure_rounds(self, widths: list[int], context_len: int = 256, repeats: int = 3,
                       progress=None) -> list[list[float]]:
        """Seconds of one verification of T nodes after a `context_len` prefix: per T, one time per round.

        The widths take turns (one round over all of them, `repeats` times, after a warm-up round), so
        a slow spell of a shared machine lands on every width alike instead of bending the curve. `progress()`,
        when given, is called after every timed verification (a progress bar's step)."""
        vocab = self.model.config.get_text_config(decoder=True).vocab_size
        g = torch.Generator().manual_seed(0)  # token ids drawn on the host: the same ones on any device
        self.prefill(torch.randint(0, vocab, (context_len,), generator=g, device="cpu").tolist())
        drafts = [Draft.chain(torch.randint(0, vocab, (T,), generator=g, device="cpu").tolist()) for T in widths]
        times: list[list[float]] = [[] for _ in widths]
        for _ in range(repeats + 1):  # the first round warms up
            for i, draft in enumerate(drafts):
                synchronize(self.device)
                t0 = time.perf_counter()
                self.verify(draft)
                synchronize(self.device)
                times[i].append(time.perf_counter() - t0)
                if progress is not None:
                    progress()
                if self.cache_len > context_len:
                    self.cache.crop(-(self.cache_len - context_len))
        self.cache = None
        return [t[1:] for t in times]

    def _compact(self, P: int, T: int, path: list[int]) -> None:
        """Move the accepted nodes' keys/values to P..P+n-1 and crop the rest: O(n)."""
        n = len(path)
        if path[-1] != n - 1:  # not a prefix of the draft: the nodes before the first moved one are in place
            start = next(i for i, node in enumerate(path) if node != i)
            moved = [P + i for i in path[start:]]
            move_entries(self.cache.layers, [0] * len(moved), moved, list(range(P + start, P + n)))
        if T > n:
            self.cache.crop(-(T - n))
