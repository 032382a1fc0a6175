"""SGLang's NGRAM (method=sglang-ngram): drafts pinned on hand-made token streams (worked out from SGLang 0.5.23's
rules), goose's Python reimplementation against SGLang's own compiled matcher draft for draft, the feeding rule
(the tail each step drafted from, inserted after verification; never the prompt), and losslessness on the tiny
model greedy, batched and sampled."""

import random

import pytest
from conftest import drafter_for, hf_greedy, many_prompts

import goose.drafting.sglang_native as native
from goose.baselines.sglang_ngram import SGLangNgramDrafter
from goose.drafting.contract import Drafter
from goose.drafting.sglang_layout import HashOrder, unpadded
from goose.drafting.sglang_trie import PyCorpus
from goose.engine.batched import BatchEngine
from goose.engine.draft import Verification
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.errors import MissingLibrary
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.registry import build_drafters


def _native_reason() -> str:
    try:
        native.library()
    except MissingLibrary as e:
        return str(e)
    return ""


NATIVE_MISSING = _native_reason()
needs_native = pytest.mark.skipif(bool(NATIVE_MISSING), reason=f"SGLang's matcher cannot be had: {NATIVE_MISSING}")
IMPLS = [pytest.param("sglang", marks=needs_native), "python"]


def corpus(impl, size, match_type="BFS", depth=4, max_breadth=10, capacity=1000):
    kind = native.NativeCorpus if impl == "sglang" else PyCorpus
    return kind(size, match_type, 1, max_breadth, depth, capacity)


def drafted(c, tail, state=0):
    return unpadded(*c.match(state, tail, len(tail)))


@pytest.mark.parametrize("impl", IMPLS)
def test_bfs_takes_fewer_children_the_longer_the_match(impl):
    """Depth 4: breadth runs from 10 (a 0-token match) down to 1 (3 tokens) in steps of (10 - 1) / 3. After
    "1 2 3 4" and "1 2 3 5", the tail "9 1 2 3" matches "1 2 3" (breadth 1: its most recent child, 5), "2 3"
    (breadth 4: 5 again, then 4) and "3" (nothing new): two children of the root. Laid out as SGLang's hash map
    iterates them (13 buckets: 4 inserted after 5 goes first), padded with token 0 under the root to 8 nodes."""
    c = corpus(impl, 8)
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 3, 5])
    assert c.match(0, [9, 1, 2, 3], 4) == ([3, 4, 5, 0, 0, 0, 0, 0], [-1, 0, 0, 0, 0, 0, 0, 0])
    assert drafted(c, [9, 1, 2, 3], state=1) == ([3, 4, 5], [-1, 0, 0])
    # One draft token: the longest match's most recent continuation only.
    one = corpus(impl, 2)
    one.insert([1, 2, 3, 4])
    one.insert([1, 2, 3, 5])
    assert drafted(one, [9, 1, 2, 3]) == ([3, 5], [-1, 0])


@pytest.mark.parametrize("impl", IMPLS)
def test_a_chain_follows_the_trie_to_its_depth(impl):
    """"7 8 9 10" inserted; the tail "6 7" matches "7" only: its path, 8 9 10, is the draft (a chain)."""
    c = corpus(impl, 8)
    c.insert([7, 8, 9, 10])
    assert drafted(c, [6, 7]) == ([7, 8, 9, 10], [-1, 0, 1, 2])


@pytest.mark.parametrize("impl", IMPLS)
def test_bfs_drafts_the_most_recent_and_prob_the_most_frequent(impl):
    """After "1 2 3" twice, then "1 2 4": BFS's one draft token is 4 (most recent), PROB's 3 (2 visits of 3).
    With room for both, PROB takes 3 (share 2/3) then 4 (1/3); laid out 4 first (the hash map's order)."""
    streams = ([1, 2, 3], [1, 2, 3], [1, 2, 4])
    for match_type, want in (("BFS", [2, 4]), ("PROB", [2, 3])):
        c = corpus(impl, 2, match_type)
        for s in streams:
            c.insert(s)
        assert drafted(c, [1, 2]) == (want, [-1, 0]), match_type
    c = corpus(impl, 4, "PROB")
    for s in streams:
        c.insert(s)
    assert c.match(0, [1, 2], 2) == ([2, 4, 3, 0], [-1, 0, 0, 0])


@pytest.mark.parametrize("impl", IMPLS)
def test_the_prompt_is_not_inserted_and_each_verified_tail_is(impl):
    """SGLang inserts no prompt: the first draft of a fresh trie is the root alone, although "1 2" was followed
    by 3. After the verification, the tail drafted from is in the trie; the match state, advanced by the new
    token 3, matches "3" (the longer suffixes were not in the trie when their tokens came): the chain 1 2."""
    d = SGLangNgramDrafter(impl=impl)
    ctx = [1, 2, 3, 1, 2]
    d.start(ctx, Verification(path=[0], bonus=2))
    assert d.propose(ctx).tokens == [2]
    d.accepted(Verification(path=[0], bonus=3), ctx + [3])
    assert d.store.history == [tuple(ctx)]
    draft = d.propose(ctx + [3])
    assert (draft.tokens, draft.parents) == ([3, 1, 2], [-1, 0, 1])


def test_the_hash_order_is_libstdcxx_s():
    """Small maps have 13 buckets (a new key first in its bucket, an empty bucket's key first overall); the 14th
    key rehashes to 29 buckets, re-inserting in the old order."""
    m = HashOrder()
    for k in (5, 4, 18):
        m.insert(k, k)
    assert m.keys == [4, 18, 5]  # 18 shares bucket 5 with 5 and goes before it
    for k in range(20, 31):
        m.insert(k, k)
    assert len(m.keys) == 14 and m._buckets == 29


def random_run(seed: int, match_type: str):
    """Both matchers fed the same steps: three requests, each draft's tail inserted, some requests ended,
    a small capacity so eviction happens; every draft must be equal, node for node, padding included."""
    rng = random.Random(seed)
    size, depth, capacity = rng.choice([4, 12, 60]), rng.choice([3, 18]), rng.choice([60, 100000])
    args = (size, match_type, rng.choice([1, 2]), rng.choice([2, 10]), depth, capacity)
    real, ours = native.NativeCorpus(*args), PyCorpus(*args)
    streams: dict[int, list[int]] = {}
    drafts = 0
    for step in range(200):
        rid = rng.randrange(3)
        s = streams.setdefault(rid, [rng.randrange(1, 40) for _ in range(rng.randrange(1, 25))])
        tail = s[-depth:]
        want = real.match(rid, tail, len(s))
        assert ours.match(rid, tail, len(s)) == want, (seed, match_type, step)
        drafts += len(unpadded(*want)[0]) > 1
        real.insert(tail)
        ours.insert(tail)
        s.extend(s[rng.randrange(len(s)):][: rng.randrange(1, 5)] if rng.random() < 0.7 else [rng.randrange(1, 40)])
        if rng.random() < 0.03:
            real.erase(rid)
            ours.erase(rid)
            del streams[rid]
    return drafts


@needs_native
@pytest.mark.parametrize("match_type", ["BFS", "PROB"])
def test_the_reimplementation_drafts_what_sglangs_own_matcher_drafts(match_type):
    assert sum(random_run(seed, match_type) for seed in range(12)) > 1000  # most steps draft something


def test_without_sglangs_sources_the_method_is_unavailable_in_one_line(monkeypatch):
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "sources", lambda: None)
    with pytest.raises(MissingLibrary, match="sglang_native fetch") as e:
        SGLangNgramDrafter()
    assert "\n" not in str(e.value)
    SGLangNgramDrafter(impl="python")  # the reimplementation needs nothing
    # B = 60 named: the key is the name alone
    assert list(build_drafters(["sglang-ngram@60", "pld@60"], skip_missing=True)) == ["pld"]


def test_the_budget_sets_the_equal_budget_variants_draft_tokens():
    d, _ = drafter_for("sglang-ngram-budget@5")
    assert d.config.budget == 5 and d.config.draft_tokens == 5
    fixed, _ = drafter_for("sglang-ngram@5")
    assert fixed.config.draft_tokens == 12 and fixed.config.memory == "run"


@pytest.mark.integration
@pytest.mark.parametrize("spec", ["sglang-ngram", "sglang-ngram-budget@20:prompt"])
@pytest.mark.parametrize("extra", [[], ["++method.drafter.impl=python", "++method.drafter.match_type=PROB"]])
def test_lossless_and_drafts_are_walked(spec, extra, tiny, prompts):
    if not extra and NATIVE_MISSING:
        pytest.skip(NATIVE_MISSING)
    d = drafter_for(spec, extra=extra)[0]
    engine = Engine(tiny)
    walked = 0
    for p in prompts + prompts[:1]:
        g = generate(engine, p, d, 40)
        assert g.tokens == hf_greedy(tiny, p, 40)
        walked += g.stats["trie_accepted"]
    assert walked >= 10


@pytest.mark.integration
@pytest.mark.parametrize("impl", IMPLS)
def test_batched_at_concurrency_4_and_sampled_return_ar_tokens(impl, tiny, prompts):
    template = drafter_for("sglang-ngram", extra=[f"++method.drafter.impl={impl}"])[0]
    many = many_prompts()
    want = [generate(Engine(tiny), p, Drafter(), 24).tokens for p in many]
    for rows in (1, 4):
        got, _ = decode_batch(BatchEngine(tiny, rows=rows), [Request(p, template.spawn(), 24) for p in many])
        assert [g.tokens for g in got] == want, rows
    engine = Engine(tiny)
    for seed in (0, 1):
        s = Sampling(0.7, 0, 0.95, seed)
        for p in prompts:
            assert generate(engine, p, template, 32, sampling=s).tokens == \
                generate(engine, p, Drafter(), 32, sampling=s).tokens, seed


@pytest.mark.parametrize("impl", IMPLS)
def test_a_restored_memory_drafts_what_the_saved_one_did(impl):
    """Timed repeats restore the trie saved before a prompt: replaying the saved tails rebuilds it exactly."""
    d = SGLangNgramDrafter(impl=impl)
    ctx = [4, 5, 6, 7, 4, 5]

    def step(context, bonus):
        d.propose(context)
        d.accepted(Verification(path=[0], bonus=bonus), context + [bonus])
        return context + [bonus]

    d.start(ctx, Verification(path=[0], bonus=5))
    ctx = step(step(ctx, 6), 7)
    saved = d.save_memory()
    want = d.propose(ctx)
    d.window = None
    step(step(ctx, 9), 9)
    d.restore_memory(saved)
    d.start(ctx, Verification(path=[0], bonus=7))
    got = d.propose(ctx)
    assert (got.tokens, got.parents) == (want.tokens, want.parents) and len(want.tokens) > 1
