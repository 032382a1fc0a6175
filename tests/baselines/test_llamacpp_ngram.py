"""llama.cpp's ngram-simple and ngram-mod (goose.baselines.llamacpp_ngram): drafts pinned on hand-made streams as
llama.cpp's rules give them (the latest occurrence and its quirks; the hashed table, its collisions, chunks,
resets), their defaults, memory=run shared and saved, and lossless on the tiny model alone, in a batch of 1 and 4
and under sampling."""

import random

import pytest
from conftest import drafter_for, lossless_everywhere

from goose.baselines.llamacpp_ngram import NgramModConfig, NgramModDrafter, NgramModPool, NgramSimpleDrafter
from goose.baselines.vllm_ngram import VllmNgramDrafter
from goose.engine.draft import Verification


def started(drafter, context):
    drafter.start(context, Verification(path=[0], bonus=context[-1]))
    return drafter


def chain(drafter, context) -> list[int]:
    """A started drafter's draft below the root (checked to be one chain)."""
    d = drafter.propose(context)
    assert d.parents == list(range(-1, len(d.tokens) - 1))
    return d.tokens[1:]


def simple(context, **config) -> list[int]:
    return chain(started(NgramSimpleDrafter(**config), context), context)


def vllm(context, n: int, k: int) -> list[int]:
    return chain(started(VllmNgramDrafter(prompt_lookup_min=n, prompt_lookup_max=n, num_speculative_tokens=k),
                         context), context)


def simple_scan(context: list[int], n: int, m: int) -> list[int]:
    """common_ngram_simple_draft as it runs: the cached tokens and the sampled one, a scan down from the position
    before the tail's own to 1, the first match decides."""
    tokens, sampled = context[:-1], context[-1]
    cur = len(tokens)
    if cur <= n + m + 1:
        return []
    pattern = tokens[cur - n + 1 :] + [sampled]
    for j in range(cur - n - 1, 0, -1):
        if tokens[j : j + n] == pattern:
            copy = min(m, cur - (j + n))
            return tokens[j + n : j + n + copy] if copy >= n else []
    return []


# --- ngram-simple ----------------------------------------------------------------------------------------------
def test_simple_copies_after_the_latest_occurrence_where_vllm_takes_the_earliest():
    text = [5, 6, 1, 2, 3, 5, 6, 4, 8, 9, 0, 0, 5, 6]
    assert simple(text, size_n=2, size_m=3) == [4, 8, 9]  # "5 6" at 5 (and at 0); size_m tokens
    assert vllm(text, 2, 3) == [1, 2, 3]


def test_simple_never_matches_at_position_zero():
    text = [5, 6, 1, 2, 3, 4, 7, 8, 9, 0, 5, 6]  # "5 6" only at 0: llama.cpp's scan stops at 1
    assert simple(text, size_n=2, size_m=3) == []
    assert vllm(text, 2, 3) == [1, 2, 3]


def test_simple_drops_the_draft_when_the_latest_occurrence_leaves_fewer_than_size_n():
    text = [7, 1, 2, 3, 8, 8, 8, 8, 4, 1, 2, 3, 1, 2, 3]  # "1 2 3" at 9 leaves 2 cached tokens; the one at 1, 4
    assert simple(text, size_n=3, size_m=4) == []  # the earlier occurrence is not tried
    assert vllm(text, 3, 4) == [8, 8, 8, 8]
    assert simple(text[:-3] + [5, 5, 1, 2, 3], size_n=3, size_m=4) == [5, 5, 1, 2]  # now 4 follow the one at 9


def test_simple_needs_more_than_size_n_plus_size_m_plus_one_cached_tokens():
    text = [99] + list(range(49)) + list(range(12))  # the last 12 tokens (0..11) once before, at 1
    assert simple(text) == []  # 62 tokens: 61 cached, not more than 12 + 48 + 1
    assert simple([98, *text]) == list(range(12, 49)) + list(range(11))  # 62 cached: the 48 after the one at 2
    assert simple(list(range(60)) + list(range(12))) == []  # the only occurrence at 0: the scan stops at 1


def test_simple_never_drafts_in_a_loop_shorter_than_size_n():
    loop = [1, 2] * 40  # the latest occurrence sits right behind the tail
    assert simple(loop) == [] and vllm(loop, 5, 5) == [1, 2, 1, 2, 1]


@pytest.mark.parametrize("n,m", [(1, 1), (1, 4), (2, 3), (3, 2), (2, 8)])
def test_simple_drafts_what_llamacpps_scan_drafts_on_random_streams(n, m):
    rng = random.Random(n * 10 + m)
    for _ in range(60):
        text = [rng.randrange(rng.randint(2, 4)) for _ in range(rng.randint(1, 40))]
        d = started(NgramSimpleDrafter(size_n=n, size_m=m), text[:1])
        for end in range(1, len(text) + 1):
            assert chain(d, text[:end]) == simple_scan(text[:end], n, m), (text[:end], n, m)


# --- ngram-mod -------------------------------------------------------------------------------------------------
def mod(context, **config) -> NgramModDrafter:
    return started(NgramModDrafter(**config), context)


def test_the_hash_is_llamacpps_lcg_in_64_bits():
    # h = h * 6364136223846793005 + t over 3, 5, 7 in 64-bit arithmetic is 17489886144745866659; mod 1000003:
    pool = NgramModPool(3, 1000003)
    assert pool.slot([3, 5, 7]) == 840927
    unwrapped = (3 * 6364136223846793005 + 5) * 6364136223846793005 + 7
    assert unwrapped % 1000003 != 840927  # the wrap at 2**64 matters


def test_mod_walks_the_table_token_by_token_between_n_min_and_n_max():
    context = [1, 2, 3, 4, 5, 6, 9, 1, 2]  # the prompt's 2-grams with a next token: up to "6 9" -> 1
    assert chain(mod(context, n_match=2, n_min=0), context) == [3, 4, 5, 6, 9, 1]  # "9 1" is EMPTY
    assert chain(mod(context, n_match=2, n_min=0, n_max=4), context) == [3, 4, 5, 6]
    assert chain(mod(context, n_match=2, n_min=6), context) == [3, 4, 5, 6, 9, 1]
    assert chain(mod(context, n_match=2, n_min=7), context) == []  # shorter than n_min: dropped


def test_mod_walks_on_past_the_end_of_the_text():
    context = [1, 2, 3, 1, 2, 3, 1, 2]
    d = mod(context, n_match=2, n_min=0, n_max=7)
    assert chain(d, context) == [3, 1, 2, 3, 1, 2, 3]
    assert vllm(context, 2, 7) == [3, 1, 2, 3, 1, 2]  # a copy ends where the text does
    assert d.pool.used == 2  # "1 2" and "2 3" written twice: used counts overwrites


def test_mod_keeps_the_last_token_written_where_vllm_copies_the_first():
    context = [1, 2, 3, 1, 2, 7, 0, 1, 2]  # "1 2" -> 3, then "1 2" -> 7
    assert chain(mod(context, n_match=2, n_min=0), context) == [7, 0, 1]
    assert vllm(context, 2, 3) == [3, 1, 2]


def test_mod_does_not_detect_collisions():
    # In 16 slots "0 5" and "1 8" share a slot ((a * 6364136223846793005 + b) mod 16 = (13a + b) mod 16 = 5).
    context = [2, 0, 5, 7, 1, 8]  # "0 5" -> 7 in the prompt; "1 8" was never seen
    assert chain(mod(context, n_match=2, n_min=0, pool_size=16), context) == [7]
    assert chain(mod(context, n_match=2, n_min=0), context) == []
    one = [10, 11, 12, 99]  # one slot: every n-gram reads the one token written, 12
    assert chain(mod(one, n_match=2, n_min=0, n_max=3, pool_size=1), one) == [12, 12, 12]


def test_mod_adds_generated_ngrams_once_more_than_chunk_tokens_are_new():
    prompt = [1, 2, 3, 4, 5]  # the prompt's "1 2" -> 3, "2 3" -> 4 go in at the start (the text up to 2)
    later = [1, 2, 3, 4, 5, 6, 3, 4]  # 7 cached tokens: "3 4" -> 5, "4 5" -> 6, "5 6" -> 3 go in if 2 + chunk < 7
    assert chain(mod(prompt, n_match=2, n_min=0, chunk=4), later) == [5, 6, 3]
    assert chain(mod(prompt, n_match=2, n_min=0, chunk=5), later) == []
    assert chain(mod(prompt, n_match=2, n_min=0), later) == []  # llama.cpp's 32


def test_mod_drafts_nothing_before_the_cached_text_is_n_match_long():
    assert chain(mod([1, 2, 1], n_match=3, n_min=0), [1, 2, 1]) == []  # 2 cached tokens
    assert chain(mod([1, 2, 1, 2], n_match=3, n_min=0), [1, 2, 1, 2]) == []  # 3, none with a next token
    assert chain(mod([1, 2, 1, 2, 1], n_match=3, n_min=0), [1, 2, 1, 2, 1]) == [2]


def test_mod_empties_the_table_when_overwrites_pass_a_quarter_of_it():
    one = {"n_match": 1, "n_min": 0, "pool_size": 4}  # n = 1 in 4 slots: token t hashes to t mod 4
    full = mod([1, 2, 3, 4, 5, 6, 7], **one).pool  # 4 slots filled, then 1 overwritten
    assert len(full.slots) == 4 and full.used == 1  # filling is not counted, and 1/4 is not over a quarter
    assert mod([1, 2, 3, 4, 5, 6, 7, 8], **one).pool.slots == {}  # 2 overwrites: 2/4, emptied


def test_mod_empties_the_table_after_five_low_verifications_in_a_row():
    context = [1, 2, 3, 4, 5, 6, 9, 1, 2]
    d = mod(context, n_match=2, n_min=0)

    def verify(accepted: int):
        draft = d.propose(context)
        assert len(draft.tokens) == 7
        d.accepted(Verification(path=list(range(accepted + 1)), bonus=0, width=7), context)

    for _ in range(4):
        verify(1)  # 1 of 6 accepted: under a quarter
    verify(2)  # 2 of 6: the streak ends
    for _ in range(4):
        verify(0)
    assert d.pool.slots and d.n_low == 4
    verify(0)
    assert d.pool.slots == {} and d.n_low == 0 and d.i_last == 0


def test_mod_defaults_are_llamacpps_and_memory_is_run():
    c = NgramModConfig()
    assert (c.n_match, c.n_min, c.n_max, c.pool_size, c.chunk, c.memory) == (24, 48, 64, 4 * 1024 * 1024, 32, "run")
    for bad in ({"n_match": 0}, {"n_max": 1025}, {"n_min": -1}, {"pool_size": 0}, {"memory": "forever"},
                {"n_max": 0}):  # below n_min: it would never draft
        with pytest.raises(Exception, match="must"):
            NgramModConfig(**bad)
    d, _ = drafter_for("llamacpp-ngram-mod")
    assert d.capabilities.memory and d.capabilities.auto_budget
    assert not drafter_for("llamacpp-ngram-simple")[0].capabilities.memory


def test_mod_under_memory_run_shares_one_table_and_saves_it():
    lesson = [1, 2, 3, 4, 5, 6, 9, 1, 2]
    template = NgramModDrafter(n_match=2, n_min=0)
    first, second = template.spawn(), template.spawn()
    started(first, lesson)
    probe = [7, 7, 1, 2]  # its own prompt says nothing after "1 2"
    assert chain(started(second, probe), probe) == [3, 4, 5, 6, 9, 1]
    saved = second.save_memory()
    started(second, [1, 2, 8, 8, 8])  # "1 2" -> 8 overwrites
    assert chain(second, probe) == [8, 8]
    second.restore_memory(saved)
    assert chain(second, probe) == [3, 4, 5, 6, 9, 1]
    alone = NgramModDrafter(n_match=2, n_min=0, memory="prompt")
    other = alone.spawn()
    started(alone.spawn(), lesson)
    assert chain(started(other, probe), probe) == [] and alone.save_memory() is None


# --- every one lossless ----------------------------------------------------------------------------------------
SETTINGS = {  # the defaults, and settings under which the tiny model's short texts are drafted often
    "simple": (NgramSimpleDrafter, {}), "simple-small": (NgramSimpleDrafter, {"size_n": 2, "size_m": 8}),
    "mod": (NgramModDrafter, {}), "mod-small": (NgramModDrafter, {"n_match": 3, "n_min": 1, "n_max": 8, "chunk": 1}),
}


@pytest.mark.integration
@pytest.mark.parametrize("which", list(SETTINGS))
def test_lossless_alone_in_batches_of_1_and_4_and_sampled(which, tiny, prompts):
    cls, config = SETTINGS[which]
    # one drafter for the prompts in turn: ngram-mod's table carries over (memory=run)
    landed = lossless_everywhere(tiny, prompts, lambda: cls(**config), one_drafter=True)
    assert landed >= 5 or not which.endswith("small")  # drafts are walked, not only verified
