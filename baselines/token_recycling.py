"""Token Recycling: a static tree template filled from an adjacency matrix [vocab, 8].

Every forward overwrites each processed token's row with its top-8 next tokens. The
matrix is kept across prompts by default (memory=run: the paper's "hot start", as the peers run
it); memory=prompt starts every prompt from an empty matrix.
"""

from dataclasses import dataclass

from goose.drafting.contract import check_memory, memory_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.errors import GooseError

ADJACENCY = Source("adjacency", scored=True)  # a top-k successor from the matrix
TR_WIDTHS = (8, 21, 25, 15, 8, 3)  # nodes per depth of the "2.2.2" template: 80 + root


@dataclass(frozen=True)
class TRConfig:
    k: int = 8
    widths: tuple[int, ...] = TR_WIDTHS  # the template's nodes per depth (TR ignores the budget)
    memory: str = memory_setting("run")  # hot start: one matrix kept across the prompts of a run (the paper's setting)
    prefill_harvest: bool = True

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(self.widths))
        check_memory(self.memory, "tr")
        if self.k < 1 or not self.widths or min(self.widths) < 1:
            raise GooseError("tr: k and every template width must be >= 1.")


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


class TokenRecyclingDrafter(TreeDrafter):
    name = "tr"
    Config = TRConfig
    sources = (ADJACENCY,)

    def __init__(self, config: TRConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.use_adjacency(p.k, False, p.prefill_harvest, p.memory)
        self.template = tree_template(p.widths, p.k)

    def propose(self, context):
        nodes = TreeNodes(context[-1], context[-2] if len(context) > 1 else None)
        unigram = self.harvester.table.unigram
        at = {(): 0}
        for path in self.template:
            parent = at.get(path[:-1])
            if parent is None:
                continue
            row = unigram.get(nodes.tokens[parent])
            if row is None or path[-1] >= len(row[0]):
                continue
            t = row[0][path[-1]]
            if nodes.has_child(parent, t):
                continue
            at[path] = nodes.add(parent, t, ADJACENCY, row[1][path[-1]])
        return self.finish(nodes)
