"""Prompt Lookup Decoding (goose.baselines.pld): its drafts pinned on hand-made streams, equal draft for draft to
Hugging Face's own PromptLookupCandidateGenerator on random streams (the rule it reproduces), its settings'
refusals, and lossless on the tiny model alone, in a batch of 1 and 4 and under sampling."""

import random

import pytest
import torch
from conftest import lossless_everywhere
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from goose.baselines.pld import PLDConfig, PromptLookupDrafter
from goose.engine.draft import Verification
from goose.errors import GooseError


def chain(context, **config) -> list[int]:
    """The draft below the root, checked to be one chain."""
    d = PromptLookupDrafter(**config)
    d.start(context, Verification(path=[0], bonus=context[-1]))
    draft = d.propose(context)
    assert draft.parents == list(range(-1, len(draft.tokens) - 1)) and draft.tokens[0] == context[-1]
    return draft.tokens[1:]


def hugging_face(context, max_ngram: int, num_tokens: int) -> list[int]:
    """What transformers' prompt lookup proposes for the same context (its own code, not a copy of its rule)."""
    gen = PromptLookupCandidateGenerator(num_output_tokens=num_tokens, max_matching_ngram_size=max_ngram,
                                         max_length=10**6)
    ids = torch.tensor([context])
    out, _ = gen.get_candidates(ids)
    return out[0, len(context):].tolist()


def test_the_longest_tail_ngram_first_then_its_earliest_occurrence():
    assert chain([1, 2, 3, 9, 9, 1, 2, 3]) == [9, 9, 1, 2, 3]  # the trigram at 0; the copy may reach the tail
    assert chain([1, 2, 3, 9, 9, 1, 2, 3], num_tokens=2) == [9, 9]  # capped at num_tokens
    assert chain([5, 1, 2, 6, 7, 2]) == [6, 7, 2]  # no trigram nor bigram earlier: the unigram 2, at 2
    assert chain([4, 8, 1, 4, 9, 4]) == [8, 1, 4, 9, 4]  # the earliest 4, not the latest
    assert chain([7, 3, 5, 7, 3, 6, 3]) == [5, 7, 3, 6, 3]  # the unigram 3: its first occurrence wins
    assert chain([6, 5, 7, 3, 6, 5]) == [7, 3, 6, 5]  # bigram (6, 5) before any unigram 5
    assert chain([6, 5, 7, 3, 6, 5], min_ngram=3) == []  # below min_ngram nothing is drafted
    assert chain([1, 2, 3]) == [] and chain([4]) == []  # nothing repeats


def test_draft_for_draft_equal_to_hugging_faces_prompt_lookup_on_random_streams():
    rng = random.Random(11)
    for _ in range(300):
        vocab, max_ngram, num = rng.choice((2, 3, 5, 20)), rng.randint(1, 4), rng.randint(1, 12)
        text = [rng.randrange(vocab) for _ in range(rng.randint(2, 40))]
        assert chain(text, max_ngram=max_ngram, num_tokens=num) == hugging_face(text, max_ngram, num), text


def test_its_defaults_are_the_prompt_lookup_repositorys_and_bad_settings_are_refused():
    assert (PLDConfig().max_ngram, PLDConfig().min_ngram, PLDConfig().num_tokens) == (3, 1, 10)
    for bad in (dict(min_ngram=0), dict(min_ngram=4), dict(num_tokens=0)):
        with pytest.raises(GooseError, match="pld: need"):
            PromptLookupDrafter(**bad)


@pytest.mark.integration
def test_lossless_alone_in_batches_of_1_and_4_and_sampled(tiny, prompts):
    assert lossless_everywhere(tiny, prompts, PromptLookupDrafter) > 0, "the tiny model's repeats: PLD lands some"
