"""The verification engine shared by every method.

Protocol: the KV cache holds every committed token except the last one (the root, or
anchor). A drafter proposes a `Draft` whose node 0 is that root; `Engine.verify` runs ONE
forward over all nodes with an additive 4-D mask and position ids P + depth, walks the
tree greedily (on perturbed logits when sampling: goose.sampling), compacts the accepted
nodes' keys and values in place and crops the rest.
The engine knows nothing about how a draft was made.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from goose.errors import GooseError, NonFiniteLogits
from goose.layouts import check_supported, layer_masks, sliding_window
from goose.sampling import RANKS, Choice, Sampler, choice_of, ranked


@dataclass
class Draft:
    """Nodes to verify in one forward.

    tokens[0] is the root (the last committed token); parents[0] == -1 and every other
    node's parent precedes it. `visibility` (bool [T, T], i may attend j) replaces the
    ancestor relation for drafts that are not trees; `depths` then gives positions.
    Nodes whose parent is -1 (other than the root) are visible context only: the walk
    never enters them.
    """

    tokens: list[int]
    parents: list[int]
    visibility: torch.Tensor | None = None
    depths: list[int] | None = None
    # Optional: gains[k - 1] = the tokens expected if only the first k nodes are verified (a draft ordered
    # most valuable first, budget=auto in a batch); the batch picks each request's width from them.
    gains: list[float] | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def chain(cls, tokens: list[int]) -> Draft:
        return cls(list(tokens), list(range(-1, len(tokens) - 1)))

    def prefix(self, n: int) -> Draft:
        """The first n nodes (a draft again: every node's parent precedes it)."""
        if n >= len(self):
            return self
        vis = None if self.visibility is None else self.visibility[:n, :n]
        return Draft(self.tokens[:n], self.parents[:n], vis, None if self.depths is None else self.depths[:n],
                     None if self.gains is None else self.gains[:n])


@dataclass
class Verification:
    """What one verify (or prefill) forward returns.

    path: accepted node indices, starting with the root (0).
    bonus: the target's argmax after the last accepted node.
    width: the nodes verified: the draft's, or, where the model's context ends, its first `width` nodes
    (the rest never reached the forward: a drafter learns from nodes below `width` only).
    topk_ids / topk_scores: [T, k] top-k of every node's logits (None when k = 0),
    what adjacency drafters harvest, rejected nodes included.
    topk_later: a batch's prefill leaves the prompt's top-k uncomputed: this returns (scores, ids) when a drafter
    first needs them (a request that never drafts never pays for the whole vocabulary at every prompt position).
    """

    path: list[int]
    bonus: int
    topk_ids: torch.Tensor | None = None
    topk_scores: torch.Tensor | None = None
    width: int = 1
    forward_s: float = 0.0
    overhead_s: float = 0.0
    # per committed token (the path's nodes after the root, then the bonus): the top-1 minus top-2 logit of
    # the row that chose it (perturbed under sampling), what tells a near-tie from a clear choice
    margins: list[float] = field(default_factory=list)
    # ... the RANKS best other tokens there, best first, and the chosen token's score minus each one's
    runners_up: list[list[int]] = field(default_factory=list)
    gaps: list[list[float]] = field(default_factory=list)
    topk_later: Callable[[], tuple[torch.Tensor, torch.Tensor]] | None = None

    def record(self, choices: list[Choice]) -> None:
        """Each committed token's margin, runners-up and gaps, from its choice."""
        self.margins = [c.margin for c in choices]
        self.runners_up, self.gaps = [c.runners_up for c in choices], [c.gaps for c in choices]


def ancestor_matrix(parents: list[int], device: torch.device) -> torch.Tensor:
    """Bool [T, T]: entry (i, j) is True when j is i or an ancestor of i.

    Pointer doubling: after k rounds each row holds ancestors within distance 2^k, so a
    depth-100 chain costs 7 tensor ops rather than 100 Python iterations.
    """
    T = len(parents)
    par = torch.tensor(parents, device=device)
    idx = torch.arange(T, device=device)
    jump = torch.where(par < 0, idx, par)
    reach = torch.zeros(T, T, dtype=torch.bool, device=device)
    reach[idx, idx] = True
    reach[idx, jump] = True
    while True:
        nxt = jump[jump]
        reach = reach | reach[jump]
        if torch.equal(nxt, jump):
            return reach
        jump = nxt


def depths_of(parents: list[int]) -> list[int]:
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        p = parents[i]
        depth[i] = depth[p] + 1 if p >= 0 else 0
    return depth


def greedy_walk(parents: list[int], tokens: list[int], pred: list[int]) -> list[int]:
    """From the root, follow the child whose token equals the target's argmax."""
    return walk(parents, tokens, pred.__getitem__)


def walk(parents: list[int], tokens: list[int], choose) -> list[int]:
    """From the root, follow the child whose token equals `choose(node)`, the target's token after
    `node`. Only the nodes on the path are asked, so a costly choice (a sampled one) is made at most
    depth + 1 times."""
    children: dict[int, list[int]] = {}
    for i in range(1, len(parents)):
        children.setdefault(parents[i], []).append(i)
    path = [0]
    node = 0
    while True:
        want = choose(node)
        for c in children.get(node, ()):
            if tokens[c] == want:
                path.append(c)
                node = c
                break
        else:
            return path


TOPK_BLOCK = 64  # columns per block in topk_rows; 64 was fastest for 60 x 49k on 2 CPU cores


def topk_rows(x: torch.Tensor, k: int, block: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of each row of a [T, V] tensor: (values, indices), best first.

    On CPU, `Tensor.topk` over a 49k vocabulary copies every row into (value, index)
    pairs; here one vectorised max per block of `block` columns picks the k blocks with the
    largest maxima, and only those k * block candidates are ranked. The k largest values
    always lie in those blocks: the chosen blocks hold k values >= the smallest chosen
    maximum, and no skipped block holds a value above it. Like `topk`, the order among
    equal values is unspecified (see `greedy_from_topk`). About 5x faster than `topk` for
    60 x 49k on CPU; GPUs keep `topk`.
    """
    block = block or TOPK_BLOCK
    T, V = x.shape
    n = V // block
    if x.device.type != "cpu" or n < 4 * k:
        return x.topk(k, dim=-1)
    blocks = x[:, : n * block].view(T, n, block)
    _, chosen = blocks.amax(-1).topk(k, dim=-1)  # [T, k] block numbers
    cand = blocks.gather(1, chosen.unsqueeze(-1).expand(T, k, block)).view(T, k * block)
    where = (chosen.unsqueeze(-1) * block + torch.arange(block, device=x.device)).view(T, k * block)
    if n * block < V:  # the ragged tail is always a candidate
        cand = torch.cat([cand, x[:, n * block :]], dim=1)
        tail = torch.arange(n * block, V, device=x.device).expand(T, V - n * block)
        where = torch.cat([where, tail], dim=1)
    values, j = cand.topk(k, dim=-1)
    return values, where.gather(1, j)


def finite_rows(logits: torch.Tensor) -> torch.Tensor:
    """Whether each row of logits [T, V] is finite: bool [T] on the logits' device, not yet read. One reduction per
    forward, each row's sum in float32: a NaN or inf anywhere in a row makes its sum NaN or inf (finite logits sum
    far inside float32's range, whatever the model's dtype). The engines read it with the tokens the walk needs
    (`read_tokens`): no host sync of its own on the greedy path."""
    return torch.isfinite(logits.sum(-1, dtype=torch.float32))


def read_tokens(pred: torch.Tensor, finite: torch.Tensor | None) -> list[int]:
    """pred [T] (token ids) on the host, read together with `finite` (finite_rows) in one transfer; raises
    NonFiniteLogits instead of returning tokens chosen from a row with NaN or inf."""
    if finite is None:
        return pred.tolist()
    T = pred.shape[0]
    both = torch.cat([pred, finite.to(pred.dtype)]).tolist()
    if not all(both[T:]):
        raise NonFiniteLogits()
    return both[:T]


def check_finite(finite: torch.Tensor | None) -> None:
    """Raise NonFiniteLogits if a row is not finite (one host read: for the sampled paths, which read the logits
    several times per walked node anyway)."""
    if finite is not None and not bool(finite.all()):
        raise NonFiniteLogits()


def non_finite(where: str, dtype: torch.dtype, row: int | None = None,
               tokens: list[int] | None = None) -> NonFiniteLogits:
    """The one-line error for NaN or inf logits in `where` (the prefill forward, verification N, ...), with the
    fix for the model's dtype."""
    name = str(dtype).removeprefix("torch.")
    if dtype == torch.float16:
        fix = ("float16 overflowed (its largest value is 65504): run in bfloat16 (dtype=bfloat16), as the paper's "
               "code does for Qwen3-8B")
    elif dtype == torch.bfloat16:
        fix = ("bfloat16 has float32's range, so this is no overflow: look for NaN or inf in the weights, or run "
               "dtype=float32 to compare")
    else:
        fix = f"{name} does not overflow here: the weights or the model's code give NaN or inf; check the checkpoint"
    return NonFiniteLogits(f"{where} gave NaN or inf logits in {name}: {fix}.", row, tokens)


def greedy_from_topk(logits: torch.Tensor, ids: torch.Tensor, scores: torch.Tensor,
                     finite: torch.Tensor | None = None) -> list[int]:
    """The argmax of each row, read off its top-k (one pass over the vocabulary instead of two).

    topk's order among exactly equal values is unspecified, so tied rows fall back to argmax,
    whose first-index rule is what greedy decoding uses. With `finite` (finite_rows), a row with NaN or inf
    raises NonFiniteLogits (read in the same transfer as the tokens).
    """
    pred = ids[:, 0]
    if ids.shape[1] > 1:
        tied = scores[:, 0] == scores[:, 1]
        if bool(tied.any()):
            pred = torch.where(tied, logits.argmax(-1), pred)
    return read_tokens(pred, finite)


def greedy_rows(logits: torch.Tensor, topk: int, finite: torch.Tensor | None = None
                ) -> tuple[list[int], torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """Each row's argmax, its top-k (values, ids) when topk > 0, and its RANKS + 1 best (values, ids) (None for
    a single row without top-k: the caller ranks the one row it needs). With `finite` (finite_rows), a row with
    NaN or inf raises NonFiniteLogits before any token is returned.

    A wide argmax is slower on CPU than `topk_rows` with a small k and a tie check, so every
    multi-row verification goes through `topk_rows`.
    """
    if topk == 0 and logits.shape[0] == 1:
        return read_tokens(logits.argmax(-1), finite), None, None, None
    scores, ids = topk_rows(logits.float(), max(topk, RANKS + 1))
    pred = greedy_from_topk(logits, ids, scores, finite)
    best = (scores[:, : RANKS + 1], ids[:, : RANKS + 1])
    if topk == 0:
        return pred, None, None, best
    return pred, scores[:, :topk], ids[:, :topk], best


def tree_inputs(draft: Draft, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(visible [T, T] bool: node i may attend node j, depth [T]) of a draft."""
    if draft.visibility is None:
        visible = ancestor_matrix(draft.parents, device)
        return visible, visible.sum(-1) - 1
    return draft.visibility.to(device), torch.tensor(draft.depths or depths_of(draft.parents), device=device)


def choose_token(row: torch.Tensor, position: int, sampler: Sampler | None,
                 finite: torch.Tensor | None = None) -> Choice:
    """The token one logits row emits at `position` (argmax, or the sampler's draw) and its runners-up. With
    `finite` (finite_rows of the forward's logits), NaN or inf there raises NonFiniteLogits before any choice."""
    if sampler is not None:
        check_finite(finite)
        return sampler.choose(row, position)
    token, = read_tokens(row.argmax().reshape(1), None if finite is None else finite.all().reshape(1))
    return ranked(row.float(), token)


def decide(draft: Draft, logits: torch.Tensor, emitted: list[int], topk: int = 0,
           sampler: Sampler | None = None, finite: torch.Tensor | None = None) -> Verification:
    """The walk over one draft's verified logits [T, V]: greedy, or with a sampler greedy on the perturbed
    logits (node i predicts position emitted[i] and uses that position's noise). topk_ids/topk_scores are the
    unperturbed logits' top-k (what harvesting drafters learn). Logits with NaN or inf in any row raise
    NonFiniteLogits before the walk (`finite`: their finite_rows, when the caller has it)."""
    T = len(draft.tokens)
    res = Verification(path=[0], bonus=0, width=T)
    if finite is None:
        finite = finite_rows(logits)
    if sampler is None:
        pred, res.topk_scores, res.topk_ids, best = greedy_rows(logits, topk, finite)
        res.path = greedy_walk(draft.parents, draft.tokens, pred)
        res.bonus = pred[res.path[-1]]
        if best is None:
            choices = [ranked(logits[0].float(), pred[0])]
        else:
            values, ids = best
            choices = [choice_of(pred[i], values[i], ids[i]) for i in res.path]
        res.record(choices)
        return res
    check_finite(finite)
    if topk:
        res.topk_scores, res.topk_ids = topk_rows(logits.float(), topk)
    picks: dict[int, Choice] = {}

    def choose(node: int) -> int:
        picks[node] = choose_token(logits[node], emitted[node], sampler)
        return picks[node].token

    res.path = walk(draft.parents, draft.tokens, choose)
    res.bonus = picks[res.path[-1]].token
    res.record([picks[i] for i in res.path])
    return res


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Engine:
    """Owns the model and one KV cache; prefill, then verify drafts until done."""

    def __init__(self, model, profile: bool = False):
        from goose.backends import backend_of

        check_supported(model.config)
        self.model = model
        self.backend = backend_of(model)  # how the forward runs (goose.backends); in every reference/timing key
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.mask_min = torch.finfo(self.dtype).min
        self.max_positions = getattr(
            model.config.get_text_config(decoder=True), "max_position_embeddings", None
        )
        self.profile = profile
        self.cache = None
        self.window = sliding_window(model.config)  # W where some layers see the last W positions only
        self.verifications = 0  # since the last prefill: which forward a NaN came from (non_finite)

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
        from goose.kv_cache import new_cache

        if not prompt:
            raise GooseError("empty prompt: nothing to condition on.")
        self.cache = new_cache(self.model.config, self.max_positions)
        self.verifications = 0
        ids = torch.tensor([prompt], device=self.device)
        logits = self._forward(ids, logits_to_keep=0 if topk else 1)
        try:
            choice = choose_token(logits[-1], len(prompt), sampler, finite_rows(logits))
        except NonFiniteLogits:
            raise non_finite("the prefill forward", self.dtype) from None
        res = Verification(path=[0], bonus=choice.token, width=len(prompt))
        res.record([choice])
        if topk:
            res.topk_scores, res.topk_ids = topk_rows(logits.float(), topk)
        return res

    @torch.inference_mode()
    def verify(self, draft: Draft, topk: int = 0, sampler: Sampler | None = None) -> Verification:
        """One forward over the draft, then the walk: greedy on the logits, or, with a sampler, greedy
        on the perturbed logits (node at position p predicts p + 1 and uses that position's noise).
        topk_ids/topk_scores are always the unperturbed logits' top-k (what harvesting drafters learn)."""
        t0 = time.perf_counter() if self.profile else 0.0
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
        if self.profile:
            _sync(dev)
            t1 = time.perf_counter()
        if self.window is not None:  # key positions: the committed tokens', then the nodes'
            keys = torch.cat([torch.arange(P, device=dev).unsqueeze(0), pos], dim=-1)
            mask = layer_masks(self.model.config, self.window, mask, pos, keys)
        logits = self._forward(ids, position_ids=pos, attention_mask=mask)
        if self.profile:
            _sync(dev)
            t2 = time.perf_counter()
        self.verifications += 1
        try:
            res = decide(draft, logits, (pos[0] + 1).tolist(), topk, sampler)
        except NonFiniteLogits:
            raise non_finite(f"verification {self.verifications}", self.dtype) from None
        self._compact(P, T, res.path)
        if self.profile:
            _sync(dev)
            t3 = time.perf_counter()
            res.forward_s = t2 - t1
            res.overhead_s = (t1 - t0) + (t3 - t2)
        return res

    def measure_cost(self, widths: list[int], context_len: int = 256, repeats: int = 3) -> list[float]:
        """Median seconds of one verification of T nodes after a `context_len` prefix, per T."""
        import statistics

        return [statistics.median(t) for t in self.measure_rounds(widths, context_len, repeats)]

    @torch.inference_mode()
    def measure_rounds(self, widths: list[int], context_len: int = 256, repeats: int = 3) -> list[list[float]]:
        """Seconds of one verification of T nodes after a `context_len` prefix: per T, one time per round.

        The widths take turns (one round over all of them, `repeats` times, after a warm-up round), so
        a slow spell of a shared machine lands on every width alike instead of bending the curve."""
        vocab = self.model.config.get_text_config(decoder=True).vocab_size
        g = torch.Generator().manual_seed(0)  # token ids drawn on the host: the same ones on any device
        self.prefill(torch.randint(0, vocab, (context_len,), generator=g, device="cpu").tolist())
        drafts = [Draft.chain(torch.randint(0, vocab, (T,), generator=g, device="cpu").tolist()) for T in widths]
        times: list[list[float]] = [[] for _ in widths]
        for _ in range(repeats + 1):  # the first round warms up
            for i, draft in enumerate(drafts):
                _sync(self.device)
                t0 = time.perf_counter()
                self.verify(draft)
                _sync(self.device)
                times[i].append(time.perf_counter() - t0)
                if self.cache_len > context_len:
                    self.cache.crop(-(self.cache_len - context_len))
        self.cache = None
        return [t[1:] for t in times]

    def _compact(self, P: int, T: int, path: list[int]) -> None:
        """Move the accepted nodes' keys/values to P..P+n-1 and crop the rest: O(n)."""
        n = len(path)
        if path[-1] != n - 1:  # not a prefix of the draft: gather per layer, per device
            start = next(i for i, node in enumerate(path) if node != i)  # nodes before it are in place
            moved = path[start:]
            index: dict[torch.device, torch.Tensor] = {}
            for layer in self.cache.layers:
                dev = layer.keys.device
                if dev not in index:
                    index[dev] = torch.tensor(moved, device=dev) + P
                src = index[dev]
                layer.keys[..., P + start : P + n, :] = layer.keys.index_select(-2, src)
                layer.values[..., P + start : P + n, :] = layer.values.index_select(-2, src)
        if T > n:
            self.cache.crop(-(T - n))
