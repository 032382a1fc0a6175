"""Many requests in one forward: the engine of goose.engine.single over a batch of rows, each a request with its own
KV cache contents, positions and tree.

Cache layout (padded rows): every layer keeps keys and values in one buffer [rows, heads, capacity, dim]. Row
r's committed entries are positions 0 .. L_r - 1 of its row (L_r: its context but the root). A forward over the
n active rows computes each row's t_r nodes packed (goose.engine.packed: one sequence of sum t_r tokens, attention alone
padded to T = max t_r) and writes them at slots E .. E + t_r - 1 of their row, E = max L_r; the mask lets row
r's nodes see its slots 0 .. L_r - 1 and its own visible nodes only (the slots between L_r and E, left by
shorter rows, stay hidden; a padding query sees its own slot alone and is dropped). Position ids are
L_r + depth, so slot numbers never reach the model. After the walk each row's
accepted nodes move to L_r .. L_r + k - 1 of its own row (one gather per layer for all rows), and E becomes
the new max L_r. A newcomer is prefilled alone into a row of its own; a finished request's row is taken by
the last active one, so the active rows are always 0 .. n - 1 and a forward never carries an idle row.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from goose.engine.base import EngineBase, check_prompt
from goose.engine.draft import Draft, Verification, tree_inputs
from goose.engine.kv_cache import BatchLayer, move_entries, new_cache
from goose.engine.layouts import head_logits, layer_masks, text_config
from goose.engine.logits import decide, finite_rows, non_finite, topk_rows
from goose.engine.packed import Packing, install
from goose.engine.sampling import Sampler
from goose.errors import GooseError, NonFiniteLogits


@torch.inference_mode()
def _prompt_topk(model, hidden: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    return topk_rows(head_logits(model, hidden).float(), k)


class BatchEngine(EngineBase):
    """Up to `rows` requests verified in one forward. Rows 0 .. active - 1 hold requests; `admit` prefills a
    newcomer into row `active`, `verify` takes one draft per active row, `release(row)` frees a row (the last
    active request moves into it)."""

    def __init__(self, model, rows: int, profile: bool = False):
        if rows < 1:
            raise GooseError(f"concurrency must be >= 1 (got {rows}).")
        super().__init__(model, profile)
        self.rows = rows
        self.cache = DynamicCache(config=model.config)
        self.cache.layers = [BatchLayer(rows, self.max_positions)
                             for _ in range(text_config(model.config).num_hidden_layers)]
        install(model)
        self.lengths: list[int] = []  # L_r of each active row

    @property
    def active(self) -> int:
        return len(self.lengths)

    def _set_end(self) -> None:
        end = max(self.lengths, default=0)
        for layer in self.cache.layers:
            layer.end = end

    @torch.inference_mode()
    def reserve(self, slots: int) -> None:
        """Room for `slots` entries per row now (capped at the model's context), so a timed batch never grows its
        buffers midway: growing copies every row's cache, and a method drafting wider trees would pay it where
        AR does not."""
        text = self.model.config.get_text_config(decoder=True)
        heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
        dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        like = torch.empty(1, heads, 1, dim, dtype=self.dtype, device=self.device)
        if self.max_positions is not None:
            slots = min(slots, self.max_positions)
        for layer in self.cache.layers:
            if not layer.is_initialized:
                layer.lazy_initialization(like, like)
            layer.reserve(slots, like, like)

    @torch.inference_mode()
    def admit(self, prompt: list[int], topk: int = 0, sampler: Sampler | None = None) -> tuple[int, Verification]:
        """Prefill `prompt` alone and copy its cache into the next free row: (its row, the prefill's result)."""
        if self.active >= self.rows:
            raise GooseError("every row is taken: release one first.")
        check_prompt(prompt)
        single = new_cache(self.model.config, self.max_positions)
        # The decoder alone, then the output layer on the last position: the bonus as AR's prefill computes it, and
        # the prompt's top-k (the output layer over every position) only when a drafter asks (topk_later).
        out = self.model.get_decoder()(input_ids=torch.tensor([prompt], device=self.device), cache=single,
                                       use_cache=True)
        hidden = out.last_hidden_state[0]
        last = head_logits(self.model, hidden[-1:])
        res = self.first_token(last[0], len(prompt), sampler, finite_rows(last),
                               f"the prefill forward of row {self.active}", self.active)
        if topk:
            res.topk_later = lambda: _prompt_topk(self.model, hidden, topk)
        row, n = self.active, len(prompt)
        for layer, src in zip(self.cache.layers, out.cache.layers):
            layer.put_row(row, src.keys, src.values)
        self.lengths.append(n)
        self._set_end()
        return row, res

    @torch.inference_mode()
    def release(self, row: int) -> int | None:
        """Free `row`; the last active row's request moves into it. Returns the row that moved (None if the
        freed row was the last)."""
        last = self.active - 1
        if row != last:
            n = self.lengths[last]
            for layer in self.cache.layers:
                layer.copy_row(last, row, n)
            self.lengths[row] = n
        self.lengths.pop()
        self._set_end()
        return last if row != last else None

    def rewind(self, lengths: list[int]) -> None:
        """Rows 0 .. len(lengths) - 1 active, row r cut back to its first lengths[r] entries, so the same forward can
        be timed again (goose.drafting.cost_surface). Measurement only: a row past the active ones keeps what its
        buffer holds, so a rewind to more rows brings back the requests a shorter one set aside; nothing checks that
        a row holds lengths[r] entries."""
        self.lengths = list(lengths)
        self._set_end()

    @torch.inference_mode()
    def verify(self, drafts: list[Draft], topk: int = 0, samplers: list[Sampler | None] | None = None,
               width: int | list[int] | None = None) -> list[Verification]:
        """One forward over the drafts of rows 0 .. n - 1 (one each, in row order), each cut to `width` nodes
        (one for all rows, or one per row) when given and to what still fits in the model's context, then each
        row's walk and compaction. Rows are packed (engine.packed): a forward computes the nodes it verifies only."""
        clock = self.clock()
        n = len(drafts)
        if n != self.active:
            raise GooseError(f"{n} drafts for {self.active} active rows.")
        samplers = samplers or [None] * n
        widths = width if isinstance(width, list) else [width] * n
        end, dev = max(self.lengths), self.device
        cut = []
        for L, d, w in zip(self.lengths, drafts, widths):
            fit = len(d) if w is None else min(len(d), w)
            if self.max_positions is not None:
                fit = min(fit, self.max_positions - L)
            cut.append(d.prefix(fit))
        packing = Packing.of([len(d) for d in cut], dev)
        T, off = packing.width, packing.offsets
        filler = [0] * (packing.size - off[-1])  # computed, never attended nor read (goose.engine.packed.bucket)
        ids = torch.tensor([[t for d in cut for t in d.tokens] + filler], device=dev)
        pos = torch.zeros(1, packing.size, dtype=torch.long, device=dev)
        mask = torch.full((n, 1, T, end + T), self.mask_min, dtype=self.dtype, device=dev)
        for r, (L, d) in enumerate(zip(self.lengths, cut)):
            t = len(d)
            visible, depth = tree_inputs(d, dev)
            pos[0, off[r] : off[r + 1]] = depth + L
            mask[r, 0, :t, :L] = 0
            mask[r, 0, :t, end : end + t].masked_fill_(visible, 0)
            pad = torch.arange(t, T, device=dev)
            mask[r, 0, pad, end + pad] = 0  # a padding query sees its own slot alone; its output is dropped
        if self.window is not None:  # key positions: a row's slot s < E holds position s; its nodes sit at L_r + depth
            query = torch.stack([torch.cat([pos[0, off[r] : off[r + 1]],
                                            pos.new_full((T - off[r + 1] + off[r],), L)])
                                 for r, L in enumerate(self.lengths)])
            keys = torch.cat([torch.arange(end, device=dev).expand(n, end), query], dim=-1)
            mask = layer_masks(self.model.config, self.window, mask, query, keys)
        clock.mark()
        if packing.size == off[-1] == n * T:  # every row T nodes, no filler: the plain [n, T] forward, minus the
            out = self.model(input_ids=ids.view(n, T), cache=self.cache, use_cache=True,  # scatters (AR's steps)
                             position_ids=pos.view(n, T), attention_mask=mask)
            logits = out.logits.reshape(n * T, -1)
        else:
            for layer in self.cache.layers:
                layer.packing = packing
            try:
                logits = self.model(input_ids=ids, cache=self.cache, use_cache=True, position_ids=pos,
                                    attention_mask=mask, goose_packing=packing).logits[0]
            finally:
                for layer in self.cache.layers:
                    layer.packing = None
        clock.mark()
        self.verifications += 1
        finite = finite_rows(logits[: off[-1]])  # every node's row, once (filler rows are never read)
        results = []
        for r, (d, s) in enumerate(zip(cut, samplers)):
            try:
                results.append(decide(d, logits[off[r] : off[r + 1]], (pos[0, off[r] : off[r + 1]] + 1).tolist(),
                                      topk, s, finite[off[r] : off[r + 1]]))
            except NonFiniteLogits:
                raise non_finite(f"batched verification {self.verifications}, row {r}", self.dtype, r) from None
        self._compact(end, [res.path for res in results])
        clock.mark()
        if self.profile:
            for res in results:
                res.forward_s, res.overhead_s = clock.split(n)
        return results

    def _compact(self, end: int, paths: list[list[int]]) -> None:
        """Row r's accepted nodes (slots end + path) to L_r .. L_r + k - 1, for every row in one gather per layer."""
        rows, src, dst = [], [], []
        for r, path in enumerate(paths):
            L = self.lengths[r]
            for j, i in enumerate(path):
                if end + i != L + j:  # an entry already in place (the longest row's accepted prefix) stays
                    rows.append(r)
                    src.append(end + i)
                    dst.append(L + j)
            self.lengths[r] = L + len(path)
        if rows:
            move_entries(self.cache.layers, rows, src, dst)
        self._set_end()
