"""vLLM's n-gram proposer (speculative_config `method: ngram`): a chain of the tokens that followed the earliest
earlier occurrence of the longest tail n-gram, n in prompt_lookup_min..prompt_lookup_max.

- `vllm-ngram`: vLLM's settings, a chain of num_speculative_tokens (5) whatever the budget.
- `vllm-ngram-budget`: the same, its chain B - 1 tokens long from the top-level budget B (equal budget: B nodes
  with the root, as GOOSE's trees count them). A longer chain holds the shorter as its prefix, so this is the
  chain at its most favourable length for tau.

Read in vllm-project/vllm (docs/baselines.md names the commits): vllm/v1/spec_decode/ngram_proposer.py
(`_find_longest_matched_ngram_and_propose_tokens`) and vllm/config/speculative.py (`SpeculativeConfig`). vLLM
finds the occurrence with a KMP scan of the reversed context: at every earlier position the longest run (capped
at prompt_lookup_max) that equals the context's tail, keeping the longest and, among runs that long, the one
earliest in the text. That is the occurrence goose's ContextMatcher returns when asked for the sizes max down to
min, so it is used here; tests/baselines/test_vllm_ngram.py checks the two against a scan written from vLLM's
rule on random token streams.
"""

from __future__ import annotations

from dataclasses import dataclass

from goose.baselines.pld import PromptLookupDrafter
from goose.drafting.context_match import ContextMatcher
from goose.drafting.contract import budget_setting
from goose.drafting.tree import TreeDrafter


@dataclass(frozen=True)
class VllmLookup:
    """vLLM's n-gram sizes. vllm/config/speculative.py, SpeculativeConfig.__post_init__: when neither
    prompt_lookup_min nor prompt_lookup_max is given both are 5, when one is given the other takes its value (left
    None here, resolved the same way)."""

    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None

    def __post_init__(self):
        lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
        if lo is None and hi is None:
            lo = hi = 5
        lo = hi if lo is None else lo
        hi = lo if hi is None else hi
        object.__setattr__(self, "prompt_lookup_min", lo)
        object.__setattr__(self, "prompt_lookup_max", hi)
        # vLLM's own checks (the same file): both >= 1, min <= max, num_speculative_tokens > 0
        if lo < 1 or hi < 1:
            raise ValueError(f"prompt_lookup_min and prompt_lookup_max must be >= 1 (got {lo}, {hi})")
        if lo > hi:
            raise ValueError(f"prompt_lookup_min must be <= prompt_lookup_max (got {lo} > {hi})")
        if self.chain_length < 1:
            raise ValueError(f"num_speculative_tokens must be >= 1 (got {self.chain_length})")

    @property
    def chain_length(self) -> int:
        raise NotImplementedError


@dataclass(frozen=True)
class VllmNgramConfig(VllmLookup):
    """vLLM's settings and their defaults."""

    # num_speculative_tokens has no default in vLLM (it must be given); 5 is the value of vLLM's own n-gram
    # example (docs/features/spec_decode/n_gram.md). vllm-ngram-budget is the budget-B equal of GOOSE's trees.
    num_speculative_tokens: int = 5

    @property
    def chain_length(self) -> int:
        return self.num_speculative_tokens


@dataclass(frozen=True)
class VllmNgramBudgetConfig(VllmLookup):
    """vLLM's n-gram sizes; the chain's length from the top-level budget (B nodes, the root included)."""

    budget: int = budget_setting(60)

    def __post_init__(self):
        if self.budget < 2:  # said in the budget's terms before the chain's own check would say it in its own
            raise ValueError(f"vllm-ngram-budget drafts a chain of budget - 1 tokens, so it needs budget >= 2 (got "
                             f"budget={self.budget}); budget=1 is AR: method=ar")
        super().__post_init__()

    @property
    def chain_length(self) -> int:
        return self.budget - 1


class VllmNgramDrafter(PromptLookupDrafter):
    """One chain per step, num_speculative_tokens long or up to the end of the context: PLD's drafting (the same
    occurrence, the same chain) over vLLM's settings. No budget setting: a numeric budget leaves the chain as vLLM
    drafts it (rows record budget=fixed); budget=auto prunes it. vLLM also cuts the chain to the room left before
    max_model_len; goose's engine verifies only the nodes that fit before the context's end (docs/engine.md), so
    the committed tokens are the same."""

    name = "vllm-ngram"
    Config = VllmNgramConfig

    def __init__(self, config: VllmLookup | None = None, **overrides):
        TreeDrafter.__init__(self, config, **overrides)  # PLD's own __init__ reads PLD's settings
        p = self.config
        sizes = tuple(range(p.prompt_lookup_max, p.prompt_lookup_min - 1, -1))
        self.matcher = ContextMatcher(sizes, p.chain_length)


class VllmNgramBudgetDrafter(VllmNgramDrafter):
    """vLLM's proposer with a chain of budget - 1 tokens (equal budget)."""

    name = "vllm-ngram-budget"
    Config = VllmNgramBudgetConfig
