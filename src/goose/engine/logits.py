"""Reading a verification's logits: greedy rows (top-k blocked for big vocabularies), the non-finite check, the
token chosen at each node (greedy or sampled) and the walk down the tree that decides what is accepted."""

from __future__ import annotations

import torch

from goose.engine.draft import Draft, Verification, greedy_walk, walk
from goose.engine.sampling import RANKS, Choice, Sampler, choice_of, ranked
from goose.errors import NonFiniteLogits

TOPK_BLOCK = 64  # columns per block in topk_rows: a CPU tuning knob (a block's top-k, then the top-k of those)


def topk_rows(x: torch.Tensor, k: int, block: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact top-k of each row of a [T, V] tensor: (values, indices), best first.

    On CPU, `Tensor.topk` over a 49k vocabulary copies every row into (value, index)
    pairs; here one vectorised max per block of `block` columns picks the k blocks with the
    largest maxima, and only those k * block candidates are ranked. The k largest values
    always lie in those blocks: the chosen blocks hold k values >= the smallest chosen
    maximum, and no skipped block holds a value above it. Like `topk`, the order among
    equal values is unspecified (see `greedy_from_topk`). Faster than `topk` over a big
    vocabulary on a CPU (docs/results/speed.md, "Numbers behind constants"); GPUs keep `topk`.
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


