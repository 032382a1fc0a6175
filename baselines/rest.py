"""REST: retrieval-based drafts from a datastore (a suffix array over a tokenized corpus: rest_datastore).

Query with the last 16 down to 2 tokens; for the longest span that occurs, gather the
continuations (10 tokens) of its occurrences, count every continuation prefix, keep the
top prefixes by count (ties: shorter, then smaller ids) as a trie, verify the trie.

Why not REST's own retriever (PyPI `draftretriever` 0.1.1): on the same 3M-token corpus its
drafts differ from this specification. A 3-token query returned continuations that in the
corpus follow only the query's last 2 tokens; two runs of one query can return different
tries (prefixes with equal counts are cut in hash-map order); a 1-token query panics.
Drafts here are a pure function of the datastore and the context, so runs repeat exactly.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from goose.baselines.rest_datastore import Datastore, build_default, first_use
from goose.drafting.contract import Capabilities, budget_setting, data_setting
from goose.drafting.tree import Source, TreeDrafter, TreeNodes
from goose.errors import GooseError
from goose.models.loading import tokenizer_fingerprint

RETRIEVAL = Source("retrieval")  # a continuation prefix retrieved from the datastore


def draft_trie(conts: list[tuple[int, ...]], nodes: int) -> list[tuple[int, ...]]:
    """The `nodes` most frequent continuation prefixes (ancestor-closed: a prefix counts >= its extensions)."""
    counts: Counter = Counter()
    for c in conts:
        for j in range(1, len(c) + 1):
            counts[c[:j]] += 1
    ranked = sorted(counts, key=lambda p: (-counts[p], len(p), p))
    return ranked[:nodes]


@dataclass(frozen=True)
class RestConfig:
    datastore: str = data_setting()  # a folder written by `python -m goose.baselines.rest_datastore build`
    budget: int = budget_setting(60)  # trie nodes incl. root (set from the top-level budget)
    max_span: int = 16
    min_span: int = 2
    continuation: int = 10
    max_matches: int = 5000

    def __post_init__(self):
        if self.budget < 1 or not 1 <= self.min_span <= self.max_span or min(self.continuation, self.max_matches) < 1:
            raise GooseError("rest: need budget >= 1, 1 <= min_span <= max_span, continuation and max_matches >= 1.")


class RestDrafter(TreeDrafter):
    name = "rest"
    Config = RestConfig
    sources = (RETRIEVAL,)
    capabilities = Capabilities(auto_budget=True, trace=True, tokenizer_bound=True)  # holds a datastore

    def __init__(self, config: RestConfig | None = None, **overrides):
        super().__init__(config, **overrides)
        folder = Path(self.config.datastore).expanduser()
        # The offline default (<cache>/datastores/<model>-stdlib) is built on first use, once the model's
        # tokenizer is known (bind_tokenizer); any other datastore must exist now.
        self.store = None if first_use(folder) else Datastore(folder)

    def bind_tokenizer(self, tokenizer, model_name: str) -> None:
        if self.store is None:
            self.store = Datastore(build_default(Path(self.config.datastore).expanduser(), tokenizer, model_name))
        fingerprint = tokenizer_fingerprint(tokenizer)
        built = self.store.meta.get("tokenizer_fingerprint")
        if built != fingerprint:
            raise GooseError(
                f"REST datastore {self.store.folder} was built with tokenizer {self.store.meta.get('tokenizer')} "
                f"({built}); this model's tokenizer differs ({fingerprint}). Build one for this model into a folder "
                "of its own (python -m goose.baselines.rest_datastore build --model ... --out DIR) and run with "
                "method.drafter.datastore=DIR."
            )

    def share_with(self, other) -> None:
        super().share_with(other)
        other.store = self.store  # one read-only datastore for every request in flight

    def stats(self) -> dict:
        # What the rows were measured with: the datastore's size and, for stdlib, the Python it came from.
        meta = self.store.meta if self.store is not None else {}
        return {**super().stats(), "datastore_tokens": meta.get("tokens", ""),
                "datastore_python": meta.get("python", "")}

    def propose(self, context: list[int]):
        p = self.config
        nodes = TreeNodes(context[-1])
        for span in range(min(p.max_span, len(context)), p.min_span - 1, -1):
            conts = self.store.continuations(context[-span:], p.continuation, p.max_matches)
            if conts:
                where = {(): 0}
                for prefix in sorted(draft_trie(conts, p.budget - 1), key=lambda q: (len(q), q)):
                    where[prefix] = nodes.add(where[prefix[:-1]], prefix[-1], RETRIEVAL)
                break
        return self.finish(nodes)


if __name__ == "__main__":  # the builder's old address: say where it went rather than exit 0 having built nothing
    raise SystemExit("error: the REST datastore builder moved: python -m goose.baselines.rest_datastore build "
                     "--model MODEL [--corpus ...] [--out DIR]")
