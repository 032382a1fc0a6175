"""vLLM's n-gram proposer (goose.baselines.vllm_ngram): its drafts pinned on hand-made streams as vLLM's rule gives
them (where it differs from PLD's and where not), equal to vLLM's own scan on random streams, its defaults, and
lossless on the tiny model alone, in a batch of 1 and 4 and under sampling; its equal-budget variant drafts the same
chain, B - 1 tokens long."""

import random

import pytest
from conftest import drafter_for, lossless_everywhere

from goose.baselines.pld import PromptLookupDrafter
from goose.baselines.vllm_ngram import VllmNgramBudgetDrafter, VllmNgramConfig, VllmNgramDrafter
from goose.engine.draft import Verification


def started(drafter, context):
    drafter.start(context, Verification(path=[0], bonus=context[-1]))
    return drafter


def chain(context, **config) -> list[int]:
    """The draft below the root (checked to be one chain)."""
    d = started(VllmNgramDrafter(**config), context).propose(context)
    assert d.parents == list(range(-1, len(d.tokens) - 1))
    return d.tokens[1:]


def prefix_function(p: list[int]) -> list[int]:
    out, k = [0] * len(p), 0
    for i in range(1, len(p)):
        while k and p[k] != p[i]:
            k = out[k - 1]
        k += p[k] == p[i]
        out[i] = k
    return out


def vllm_scan(tokens: list[int], lo: int, hi: int, k: int) -> list[int]:
    """vLLM's search as it runs (ngram_proposer.py): KMP over the reversed text, the pattern its first `hi` tokens
    (the tail, reversed). Where a prefix of the pattern ends at position i, the tail occurs in the text ending
    just before the reversed position; the longest such prefix wins, among equals the one found last (the
    earliest in the text); then the k tokens after the occurrence, fewer where the text ends."""
    if len(tokens) < lo:
        return []
    r = tokens[::-1]
    pattern = r[:hi]
    fail = prefix_function(pattern)
    best = where = q = 0
    for i in range(1, len(r)):
        while q and (q == len(pattern) or pattern[q] != r[i]):
            q = fail[q - 1]
        if pattern[q] == r[i]:
            q += 1
            if q >= best:
                best, where = q, i
    if best < lo:
        return []
    start = len(tokens) - 1 - where + best
    return tokens[start : start + k]


def earliest_longest(tokens: list[int], lo: int, hi: int, k: int) -> list[int]:
    """The same rule said plainly: n from hi down to lo, the first earlier occurrence of the last n tokens."""
    for n in range(hi, lo - 1, -1):
        for s in range(len(tokens) - n):
            if tokens[s : s + n] == tokens[-n:]:
                return tokens[s + n : s + n + k]
    return []


def test_vllms_own_example():
    """The proposer's docstring: [1, 2, 3, 4, 2, 3] with min 2, max 3, k 4: [4, 2, 3] (the text ends there)."""
    assert chain([1, 2, 3, 4, 2, 3], prompt_lookup_min=2, prompt_lookup_max=3, num_speculative_tokens=4) == [4, 2, 3]


def test_the_longest_tail_wins_then_the_earliest_occurrence():
    longer = [7, 2, 3, 9, 1, 2, 3, 8, 5, 1, 2, 3]  # the tail 3-gram once (at 4), its 2-gram earlier (at 1)
    assert chain(longer, prompt_lookup_min=2, prompt_lookup_max=3, num_speculative_tokens=3) == [8, 5, 1]
    assert chain(longer, prompt_lookup_min=2, prompt_lookup_max=2, num_speculative_tokens=3) == [9, 1, 2]
    twice = [5, 6, 1, 5, 6, 2, 5, 6]  # the tail 2-gram at 0 and at 3: the first (llama.cpp's simple: the last)
    assert chain(twice, prompt_lookup_min=2, prompt_lookup_max=2, num_speculative_tokens=3) == [1, 5, 6]


def test_a_match_longer_than_prompt_lookup_max_counts_as_max():
    text = [1, 2, 9, 7, 1, 2, 4, 7, 1, 2]  # the tail 3-gram "7 1 2" at 3; its 2-gram "1 2" first at 0
    assert chain(text, prompt_lookup_min=1, prompt_lookup_max=3, num_speculative_tokens=3) == [4, 7, 1]
    assert chain(text, prompt_lookup_min=1, prompt_lookup_max=2, num_speculative_tokens=3) == [9, 7, 1]


def test_below_prompt_lookup_min_it_drafts_nothing_where_pld_drafts():
    text = [9, 1, 2, 3, 4, 8, 0, 1, 2, 3, 4]  # the tail 4-gram repeats, the 5-gram does not
    assert chain(text) == []  # vLLM's default: n = 5 only
    assert chain(text, prompt_lookup_min=4, prompt_lookup_max=4, num_speculative_tokens=5) == [8, 0, 1, 2, 3]
    pld = started(PromptLookupDrafter(), text).propose(text).tokens[1:]
    assert pld == [8, 0, 1, 2, 3, 4]  # PLD's 3-gram "2 3 4" at 2, 10 tokens or to the text's end


def test_a_context_shorter_than_prompt_lookup_min_drafts_nothing():
    assert chain([3, 3, 3, 3]) == []  # 4 tokens, n = 5
    assert chain([3, 3, 3, 3, 3, 3]) == [3]  # the 5-gram at 0, then one token before the text ends


def test_defaults_and_settings_are_vllms():
    c = VllmNgramConfig()
    assert (c.prompt_lookup_min, c.prompt_lookup_max, c.num_speculative_tokens) == (5, 5, 5)
    assert VllmNgramConfig(prompt_lookup_max=4).prompt_lookup_min == 4  # one given: the other takes its value
    assert VllmNgramConfig(prompt_lookup_min=2).prompt_lookup_max == 2
    for bad in ({"prompt_lookup_min": 0}, {"prompt_lookup_min": 4, "prompt_lookup_max": 3},
                {"num_speculative_tokens": 0}):
        with pytest.raises(ValueError):
            VllmNgramConfig(**bad)
    d, _ = drafter_for("vllm-ngram")
    assert d.config == c and d.name == "vllm-ngram" and not d.capabilities.memory and d.capabilities.auto_budget


@pytest.mark.parametrize("lo,hi,k", [(1, 1, 3), (1, 3, 10), (2, 4, 5), (5, 5, 5), (3, 6, 2)])
def test_drafts_equal_vllms_scan_on_random_streams(lo, hi, k):
    """Grown token by token as decoding grows it (the index is incremental), on streams of 2 to 4 symbols."""
    rng = random.Random(hi * 100 + lo * 10 + k)
    for _ in range(60):
        text = [rng.randrange(rng.randint(2, 4)) for _ in range(rng.randint(1, 40))]
        d = started(VllmNgramDrafter(prompt_lookup_min=lo, prompt_lookup_max=hi, num_speculative_tokens=k), text[:1])
        for end in range(1, len(text) + 1):
            ctx = text[:end]
            got = d.propose(ctx).tokens[1:]
            assert got == vllm_scan(ctx, lo, hi, k) == earliest_longest(ctx, lo, hi, k), (ctx, lo, hi, k)


def test_with_plds_settings_it_drafts_what_pld_drafts():
    """The same occurrence rule as PLD's: the peers differ in their settings (n = 5 only, 5 tokens) alone."""
    rng = random.Random(7)
    for _ in range(100):
        text = [rng.randrange(3) for _ in range(rng.randint(1, 30))]
        vllm = started(VllmNgramDrafter(prompt_lookup_min=1, prompt_lookup_max=3, num_speculative_tokens=10), text)
        assert vllm.propose(text).tokens == started(PromptLookupDrafter(), text).propose(text).tokens


def test_the_budget_sets_the_equal_budget_variants_chain_and_nothing_else():
    d, _ = drafter_for("vllm-ngram-budget@8")
    assert d.name == "vllm-ngram-budget" and d.config.budget == 8 and d.config.chain_length == 7
    assert (d.config.prompt_lookup_min, d.config.prompt_lookup_max) == (5, 5)
    assert drafter_for("vllm-ngram-budget")[0].config.chain_length == 59  # the paper's B = 60, root included
    rng = random.Random(11)
    for _ in range(60):
        text = [rng.randrange(3) for _ in range(rng.randint(1, 40))]
        budget = rng.randint(2, 12)
        mine = started(VllmNgramBudgetDrafter(budget=budget, prompt_lookup_min=1, prompt_lookup_max=3), text)
        theirs = started(VllmNgramDrafter(prompt_lookup_min=1, prompt_lookup_max=3,
                                          num_speculative_tokens=budget - 1), text)
        assert mine.propose(text).tokens == theirs.propose(text).tokens
        assert len(mine.propose(text).tokens) <= budget
    with pytest.raises(ValueError, match=r"needs budget >= 2 \(got budget=1\); budget=1 is AR: method=ar"):
        VllmNgramBudgetDrafter(budget=1)


SMALL = {"prompt_lookup_min": 1, "prompt_lookup_max": 3, "num_speculative_tokens": 10}  # drafts often here


@pytest.mark.integration
@pytest.mark.parametrize("config", [{}, SMALL], ids=["defaults", "small"])
def test_lossless_alone_in_batches_of_1_and_4_and_sampled(config, tiny, prompts):
    assert lossless_everywhere(tiny, prompts, lambda: VllmNgramDrafter(**config)) >= 5  # drafts are walked


@pytest.mark.integration
def test_the_equal_budget_variant_is_lossless_everywhere(tiny, prompts):
    make = lambda: VllmNgramBudgetDrafter(budget=20, prompt_lookup_min=1, prompt_lookup_max=3)  # noqa: E731
    assert lossless_everywhere(tiny, prompts, make) >= 5
