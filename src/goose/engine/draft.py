"""What goes into a verification and what comes out: a `Draft` (a token tree whose node 0 is the root) and its
`Verification`, and the tree arithmetic both engines share (ancestors, depths, the walk, position ids)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from goose.engine.sampling import Choice


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



def tree_inputs(draft: Draft, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(visible [T, T] bool: node i may attend node j, depth [T]) of a draft."""
    if draft.visibility is None:
        visible = ancestor_matrix(draft.parents, device)
        return visible, visible.sum(-1) - 1
    return draft.visibility.to(device), torch.tensor(draft.depths or depths_of(draft.parents), device=device)


