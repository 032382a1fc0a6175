"""Drafts in the shape SGLang's model-free (NGRAM) speculative path verifies, so a drafter here can feed a serving
engine: per request exactly D tokens in breadth-first order, token 0 the last committed one, padded with token 0
hanging off the root, and a D x D mask whose row i marks node i and its ancestors (SGLang's `NgramCorpus.batch_get`
returns these as flat arrays of a batch: ids [batch * D], masks [batch * D * D]). `to_sglang` keeps a draft's
first D nodes in breadth-first order (ancestor-closed, so any D is a valid tree); `from_sglang` reads one back.
Drafts that are not trees (Lookahead's window) have no such form.

    python -m goose.exports.sglang --method goose@60 --size 8 --after 12

prints one real draft in that form: a method's drafter after `--after` verified steps of the prompt, on a model
config (SmolLM2 by default).
"""

from __future__ import annotations

import argparse
import numbers
import sys

from goose.engine.draft import Draft
from goose.errors import GooseError
from goose.models.loading import load_model, model_config, stop_ids


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
    if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
        raise GooseError(f"SGLang draft size must be an integer >= 1: the root and the draft nodes after it (got "
                         f"{size!r}).")
    return int(size)


def _kind(value) -> str:
    kind = type(value).__name__
    return "None" if value is None else f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def check_tree(draft) -> None:
    """A goose.engine.draft.Draft that is one tree: a parent per token, node 0 the only root (parent -1), every other
    node's parent a node, and every node reachable from the root (no cycle). A GooseError says which is not."""
    if not isinstance(draft, Draft):
        raise GooseError(f"SGLang: a draft must be a goose.engine.draft.Draft (got {_kind(draft)}).")
    if draft.visibility is not None:
        raise GooseError("a draft with its own visibility matrix (not a tree) has no SGLang form.")
    tokens, parents = draft.tokens, draft.parents
    n = len(tokens)
    if len(parents) != n:
        raise GooseError(f"SGLang: a draft needs one parent per token (got {n} tokens and {len(parents)} parents): "
                         "not a tree.")
    if n < 1 or parents[0] != -1:
        raise GooseError("SGLang: node 0 of a draft is the root, with parent -1: not a tree.")
    for i in range(1, n):
        p = parents[i]
        if p == -1:
            raise GooseError(f"SGLang: node {i} has parent -1 too, a second root (a tree has one, node 0): not a tree.")
        if isinstance(p, bool) or not isinstance(p, numbers.Integral) or not 0 <= p < n or p == i:
            raise GooseError(f"SGLang: node {i}'s parent {p!r} is not another node of the draft (0..{n - 1}): "
                             "not a tree.")
    lost = sorted(set(range(n)) - set(bfs_order(parents)))
    if lost:
        raise GooseError(f"SGLang: nodes {lost} cannot be reached from the root (their parents form a cycle): "
                         "not a tree.")


def to_sglang(draft: Draft, size: int) -> tuple[list[int], list[list[int]]]:
    """(tokens [size], mask [size][size]) of a tree draft."""
    size = check_size(size)
    check_tree(draft)
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
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__len__") or not hasattr(tokens, "__iter__"):
        raise GooseError(f"SGLang tokens must be a list of token ids (got {_kind(tokens)}).")
    tokens = list(tokens)
    bad = next((t for t in tokens if isinstance(t, bool) or not isinstance(t, numbers.Integral) or t < 0), "ok")
    if bad != "ok":
        raise GooseError(f"SGLang tokens must be token ids, integers >= 0 (got {bad!r}).")
    tokens = [int(t) for t in tokens]
    n = len(tokens)
    if n < 1:
        raise GooseError("SGLang draft has no tokens: token 0 (the root, the last committed token) is always there.")
    try:
        mask = [list(row) for row in mask]
    except TypeError:
        raise GooseError(f"SGLang mask must be {n} rows of {n} entries for {n} tokens (got {_kind(mask)}"
                         f"{'' if mask is None else ' whose entries are not rows'}); split a flat array of {n * n} "
                         f"into rows of {n} yourself.") from None
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
    size = check_size(size)
    if isinstance(drafts, Draft) or not isinstance(drafts, (list, tuple)):
        raise GooseError(f"SGLang: batch_to_sglang takes a list of goose.engine.draft.Draft (got {_kind(drafts)}).")
    ids, masks = [], []
    for i, d in enumerate(drafts):
        if not isinstance(d, Draft):
            raise GooseError(f"SGLang: batch_to_sglang: drafts[{i}] must be a goose.engine.draft.Draft "
                             f"(got {_kind(d)}).")
        t, m = to_sglang(d, size)
        ids += t
        masks += [v for row in m for v in row]
    return ids, masks


PROMPT = "def is_even(n): return n % 2 == 0. def is_odd(n): return"  # GOOSE finds a spine here within 12 steps


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of `python -m goose.exports.sglang`."""
    parser = argparse.ArgumentParser(prog="python -m goose.exports.sglang", description=main.__doc__)
    parser.add_argument("--method", default="goose@60", help="NAME[@BUDGET][:MEMORY], a fixed budget (goose@60)")
    parser.add_argument("--model", default="smollm2-135m", help="a model config (conf/model/)")
    parser.add_argument("--prompt", default=PROMPT, help="the prompt's text (default: two small functions)")
    parser.add_argument("--after", type=int, default=12, help="verified steps before the draft exported (default 12)")
    parser.add_argument("--size", type=int, default=8, help="SGLang's draft size D, root included (default 8)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """One draft of a method in SGLang's form: the prompt prefilled, `--after` steps verified, the next draft
    exported at size `--size` (ids, and the mask row by row)."""
    args = parse(argv)
    try:
        check_size(args.size)
        if args.after < 0:
            raise GooseError(f"--after is a number of verified steps, 0 or more (got {args.after}).")
        draft, committed = draft_after(args.method, args.model, args.prompt, args.after)
        ids, mask = to_sglang(draft, args.size)
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{args.method} on {args.model}, after {committed} committed token(s): a draft of {len(draft)} node(s), "
          f"as SGLang verifies it at D={args.size}")
    print(f"ids: {ids}")
    print("mask (row i: node i and its ancestors):")
    for row in mask:
        print("  " + " ".join(map(str, row)))


def draft_after(method: str, model: str, prompt: str, steps: int) -> tuple[Draft, int]:
    """The draft `method` proposes after `steps` verified steps of `prompt` (greedy), and the tokens committed
    by then."""
    from goose.engine.single import Engine  # start-up time: transformers only when drafting
    from goose.running.loop import Flight  # start-up time: transformers only when drafting
    from goose.running.registry import (  # start-up time: omegaconf only when drafting
        load_method,
        make_drafter,
        prepare_drafter,
    )

    spec, budget = load_method(method, model)
    if budget.auto:
        raise GooseError(f"{method}: give a fixed budget (e.g. {spec.name}@60); budget=auto prunes against this "
                         "machine's costs, SGLang's size is fixed.")
    drafter = make_drafter(spec, budget)
    cfg = model_config(model)
    hf, tok, _, _ = load_model(cfg)
    prepare_drafter(drafter, budget, tok, cfg.name)
    engine = Engine(hf)
    ids = tok(prompt).input_ids
    caps = drafter.capabilities
    flight = Flight(ids, drafter, steps + 64, stop_ids(tok, hf), engine.prefill(ids, topk=caps.topk if
                                                                                caps.harvest_prefill else 0))
    for _ in range(steps):
        if flight.done:
            break
        draft = flight.propose()
        flight.advance(draft, engine.verify(draft, topk=caps.topk))
    return flight.propose(), len(flight.gen.tokens)


if __name__ == "__main__":
    main()
