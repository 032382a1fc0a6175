"""Prompt Lookup Decoding: a chain copied from the earliest earlier match of the tail n-gram."""

from dataclasses import dataclass

from goose.drafting.context_match import ContextMatcher
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.errors import GooseError

NGRAM = Source("ngram")  # copied from an earlier occurrence of the tail n-gram


@dataclass(frozen=True)
class PLDConfig:
    max_ngram: int = 3
    min_ngram: int = 1
    num_tokens: int = 10  # draft length (PLD ignores the budget)

    def __post_init__(self):
        if not 1 <= self.min_ngram <= self.max_ngram or self.num_tokens < 1:
            raise GooseError("pld: need 1 <= min_ngram <= max_ngram and num_tokens >= 1.")


class PromptLookupDrafter(TreeDrafter):
    name = "pld"
    Config = PLDConfig
    sources = (NGRAM,)

    def __init__(self, config: PLDConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        p = self.config
        self.matcher = ContextMatcher(tuple(range(p.max_ngram, p.min_ngram - 1, -1)), p.num_tokens)

    def start(self, context, prefill) -> None:
        super().start(context, prefill)
        self.matcher.reset(context)

    def propose(self, context):
        self.matcher.sync(context)
        nodes = TreeNodes(context[-1])
        m = self.matcher.match()
        for i, t in enumerate(m.chain):
            nodes.add(i, t, NGRAM, held=m.held + i)
        return self.finish(nodes)
