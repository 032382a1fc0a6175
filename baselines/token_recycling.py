"""Token Recycling: a static tree template filled from an adjacency matrix [vocab, 8].

Every forward overwrites each processed token's row with its top-8 next tokens. The
matrix is kept across prompts by default ("hot start"), as the peers run it.
"""


from goose.tree import BRANCH, HarvestingDrafter, TreeNodes

TR_WIDTHS = (8, 21, 25, 15, 8, 3)  # nodes per depth of the "2.2.2" template: 80 + root


def tree_template(widths=TR_WIDTHS, k: int = 8, decay: float = 0.55) -> list[tuple[int, ...]]:
    """Rank paths of a static tree: at each depth keep the `widths[d]` likeliest children of
    the previous depth's nodes, a child of rank r weighted decay**r (rank 0 = top guess)."""
    paths: list[tuple[int, ...]] = []
    level = [((), 1.0)]
    for w in widths:
        cand = [(p + (r,), s * decay**r) for p, s in level for r in range(k)]
        cand.sort(key=lambda c: (-c[1], c[0]))
        level = sorted(cand[:w])
        paths.extend(p for p, _ in level)
    return paths


class TokenRecyclingDrafter(HarvestingDrafter):
    name = "tr"

    def __init__(self, k: int = 8, widths: tuple[int, ...] = TR_WIDTHS, cold_start: bool = False,
                 prefill_harvest: bool = True):
        super().__init__(k=k, bigram=False, prefill_harvest=prefill_harvest, keep_table=not cold_start)
        self.template = tree_template(tuple(widths), k)

    def propose(self, context):
        root = context[-1]
        self._root_prev = context[-2] if len(context) > 1 else None
        nodes = TreeNodes(root)
        at = {(): 0}
        for path in self.template:
            parent = at.get(path[:-1])
            if parent is None:
                continue
            row = self.table.unigram.get(nodes.tokens[parent])
            if row is None or path[-1] >= len(row[0]):
                continue
            t = row[0][path[-1]]
            if nodes.has_child(parent, t):
                continue
            at[path] = nodes.add(parent, t, BRANCH, row[1][path[-1]])
        self.route = "branch_tree" if len(nodes) > 1 else "ar"
        return self.finish(nodes)
