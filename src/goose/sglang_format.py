"""Drafts in the shape SGLang's model-free (NGRAM) speculative path verifies, so a drafter here can feed a serving
engine: per request exactly D tokens in breadth-first order, token 0 the last committed one, padded with token 0
hanging off the root, and a D x D mask whose row i marks node i and its ancestors (SGLang's `NgramCorpus.batch_get`
returns these as flat arrays of a batch: ids [batch * D], masks [batch * D * D]). `to_sglang` keeps a draft's
first D nodes in breadth-first order (ancestor-closed, so any D is a valid tree); `from_sglang` reads one back.
Drafts that are not trees (Lookahead's window) have no such form.
"""

from __future__ import annotations

from goose.engine import Draft
from goose.errors import GooseError


def bfs_order(parents: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for i in range(1, len(parents)):
        children.setdefault(parents[i], []).append(i)
    order, head = [0], 0
    while head < len(order):
        order.extend(children.get(order[head], []))
        head += 1
    return order


def check_size(size) -> int:
    """SGLang's draft size D: the root (the last committed token) and D - 1 nodes after it."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise GooseError(f"SGLang draft size must be an integer >= 1: the root and the draft nodes after it (got "
                         f"{size!r}).")
    return size


def to_sglang(draft: Draft, size: int) -> tuple[list[int], list[list[int]]]:
    """(tokens [size], mask [size][size]) of a tree draft."""
    check_size(size)
    if draft.visibility is not None:
        raise GooseError("a draft with its own visibility matrix (not a tree) has no SGLang form.")
    order = bfs_order(draft.parents)[:size]
    where = {old: new for new, old in enumerate(order)}
    tokens = [draft.tokens[i] for i in order]
    parents = [-1] + [where[draft.parents[i]] for i in order[1:]]
    while len(tokens) < size:  # SGLang's padding: token 0, a child of the root
        tokens.append(0)
        parents.append(0)
    mask = [[0] * size for _ in range(size)]
    for i in range(size):
        if parents[i] >= 0:
            mask[i][: parents[i] + 1] = mask[parents[i]][: parents[i] + 1]
        mask[i][i] = 1
    return tokens, mask


def from_sglang(tokens: list[int], mask: list[list[int]]) -> Draft:
    """The tree a (tokens, mask) pair describes: each node's parent is its deepest proper ancestor. The mask must
    be a tree's, as `to_sglang` writes it: D x D for D tokens, 0/1, row 0 the root alone, and each later row
    itself plus one path from the root to its parent (which comes before it), nothing after it."""
    n = len(tokens)
    if n < 1:
        raise GooseError("SGLang draft has no tokens: token 0 (the root, the last committed token) is always there.")
    try:
        mask = [list(row) for row in mask]
    except TypeError:
        raise GooseError(f"SGLang mask must be {n} rows of {n} entries for {n} tokens (a flat array is split into rows "
                         "first).") from None
    rows = len(mask)
    bad = next((i for i, row in enumerate(mask) if len(row) != n), None)
    if rows != n or bad is not None:
        k = len(mask[bad]) if bad is not None else 0
        got = f"{rows} rows" if rows != n else f"row {bad} has {k} entr{'y' if k == 1 else 'ies'}"
        raise GooseError(f"SGLang mask must be {n} x {n} for {n} tokens ({got}): not a tree mask.")
    if any(v not in (0, 1) for row in mask for v in row):
        raise GooseError("SGLang mask entries must be 0 or 1: not a tree mask.")
    if mask[0] != [1] + [0] * (n - 1):
        raise GooseError("SGLang mask row 0 must mark the root alone: not a tree mask.")
    parents = [-1]
    for i in range(1, n):
        ancestors = [j for j in range(i) if mask[i][j]]
        if not ancestors or not mask[i][i] or any(mask[i][i + 1:]):
            raise GooseError(f"SGLang mask row {i} marks no ancestor, not itself, or a node after it: not a tree mask.")
        parent = max(ancestors, key=lambda j: sum(mask[j]))
        if mask[i][:i] != mask[parent][:i]:
            raise GooseError(f"SGLang mask row {i}: the nodes it marks before it are not one path from the root "
                             f"(its deepest, node {parent}, and node {parent}'s ancestors): not a tree mask.")
        parents.append(parent)
    return Draft(list(tokens), parents)


def batch_to_sglang(drafts: list[Draft], size: int) -> tuple[list[int], list[int]]:
    """A batch's drafts as SGLang's flat arrays: ids [batch * size], masks [batch * size * size]."""
    check_size(size)
    ids, masks = [], []
    for d in drafts:
        t, m = to_sglang(d, size)
        ids += t
        masks += [v for row in m for v in row]
    return ids, masks
