"""Prompt Lookup Decoding: a chain copied from the earliest earlier match of the tail n-gram."""

from goose.context_match import ContextMatcher
from goose.tree import SPINE, HarvestingDrafter, TreeNodes


class PromptLookupDrafter(HarvestingDrafter):
    name = "pld"

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1, num_tokens: int = 10):
        super().__init__(k=0, prefill_harvest=False)
        self.matcher = ContextMatcher(tuple(range(max_ngram, min_ngram - 1, -1)), num_tokens)

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)

    def propose(self, context):
        self.matcher.sync(context)
        self._root_prev = None
        nodes = TreeNodes(context[-1])
        for i, t in enumerate(self.matcher.match().chain):
            nodes.add(i, t, SPINE)
        self.route = "chain" if len(nodes) > 1 else "ar"
        return self.finish(nodes)
