"""Lookahead (window, pool, visibility) and REST (suffix array, trie, datastore); both lossless."""

import numpy as np
import pytest
import torch
from conftest import hf_greedy
from tiny import byte_tokenizer

from goose.baselines.lookahead import LookaheadDrafter, NGramPool, window_visibility
from goose.baselines.rest import RestDrafter, draft_trie
from goose.baselines.rest_datastore import Datastore, suffix_array
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.running.loop import generate


def test_pool_keeps_g_most_recent_per_key():
    pool = NGramPool(per_key=2)
    pool.add((1, 2, 3))
    pool.add((1, 4, 5))
    pool.add((1, 2, 3))  # refreshed: now the most recent
    pool.add((1, 6, 7))  # evicts (1, 4, 5), the least recently used
    assert pool.guesses(1) == [(6, 7), (2, 3)]
    assert pool.guesses(9) == []


def test_window_visibility_shape_and_contents():
    vis, depth = window_visibility(levels=2, width=3)
    assert vis.shape == (7, 7) and depth == [0, 1, 2, 3, 2, 3, 4]
    # cell (level 2, column 1) = index 5 sees: root, level-1 columns 0 and 1, itself
    assert vis[5].nonzero().flatten().tolist() == [0, 1, 2, 5]
    # level-1 cells form a causal row
    assert vis[3].nonzero().flatten().tolist() == [0, 1, 2, 3]


def test_window_and_pool_update_on_hand_made_step():
    d = LookaheadDrafter(ngram=3, window=2, guesses=4)

    class Pre:  # a prefill result: only its shape matters here
        topk_ids = None

    d.start([5, 6, 7, 8, 9], Pre())
    d.levels = [[10, 11], [20, 21]]
    draft = d.propose([5, 6, 7, 8, 9])
    assert draft.tokens == [9, 10, 11, 20, 21] and draft.parents == [-1, -1, -1, -1, -1]
    assert draft.depths == [0, 1, 2, 2, 3]

    class Res:
        path = [0]
        width = 5
        topk_ids = torch.tensor([[0], [0], [0], [30], [31]])  # guesses of the top level: 30, 31

    d.accepted(Res(), [5, 6, 7, 8, 9, 0])
    assert d.levels == [[20, 21], [30, 31]]
    assert d.pool.guesses(10) == [(20, 30)] and d.pool.guesses(11) == [(21, 31)]
    d.pool.add((0, 1, 2))
    d.pool.add((0, 1, 3))
    nxt = d.propose([5, 6, 7, 8, 9, 0])
    # the guesses starting after token 0 form a trie: 0 -> 1 -> {3, 2}, then the window
    assert nxt.tokens[:4] == [0, 1, 3, 2] and nxt.parents[:4] == [-1, 0, 1, 1]


def test_suffix_array_matches_sorted_suffixes():
    rng = np.random.default_rng(0)
    toks = rng.integers(0, 4, 300).astype(np.int32)
    sa = suffix_array(toks)
    ref = sorted(range(len(toks)), key=lambda i: toks[i:].tolist())
    assert sa.tolist() == ref


def test_trie_top_prefixes_by_count():
    conts = [(1, 2, 3), (1, 2, 4), (1, 5), (6,)]
    assert draft_trie(conts, 4) == [(1,), (1, 2), (6,), (1, 5)]  # counts 3, 2, then ties: shorter first


def test_datastore_round_trip_and_retrieval(store):
    ds = Datastore(store)
    tok = byte_tokenizer()
    q = tok("the cat", add_special_tokens=False).input_ids
    conts = ds.continuations(q, 4, 100)
    texts = sorted(set(tok.decode(list(c)) for c in conts))
    assert texts == [" ate", " sat"] and len(conts) == 6
    assert "corpus" in ds.meta["corpus"] and ds.meta["tokenizer"] == "tiny"


def test_rest_errors(store, tmp_path):
    with pytest.raises(GooseError, match="python -m goose.baselines.rest_datastore build"):
        RestDrafter(datastore=str(tmp_path / "none"))
    with pytest.raises(GooseError, match="tokenizer"):
        RestDrafter(datastore=str(store)).bind_tokenizer(OtherVocab(), "tiny")


class OtherVocab:
    def get_vocab(self):
        return {"a": 0, "b": 1}


@pytest.mark.integration
def test_rest_builds_its_offline_default_once_on_first_use(tiny, prompts, tmp_path, monkeypatch, capsys):
    """method=rest without a datastore built: the default one is built with the model's tokenizer, by
    one of two runs starting together (the other waits and uses it); another datastore must exist."""
    from concurrent.futures import ThreadPoolExecutor

    from tiny import byte_tokenizer

    import goose.baselines.rest_datastore as rest

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(rest, "FIRST_USE_TOKENS", 4000)
    folder = rest.default_folder("tiny")
    pair = [RestDrafter(datastore=str(folder)) for _ in range(2)]  # nothing to refuse before the tokenizer is known
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda d: d.bind_tokenizer(byte_tokenizer(), "tiny"), pair))
    out = capsys.readouterr().out
    assert out.count("building REST's offline datastore once") == 1 and str(folder) in out
    meta = pair[0].store.meta
    assert meta["corpus"] == "stdlib" and meta["tokens"] == 4000 and pair[1].store.meta == meta
    assert sorted(p.name for p in folder.parent.iterdir()) == [".tiny-stdlib.lock", "tiny-stdlib"]  # nothing aside
    engine = Engine(tiny)
    assert generate(engine, prompts[0], pair[0], 24).tokens == hf_greedy(tiny, prompts[0], 24)
    RestDrafter(datastore=str(folder)).bind_tokenizer(byte_tokenizer(), "tiny")  # built: used as is
    assert "building" not in capsys.readouterr().out
    with pytest.raises(GooseError, match="not this model's offline default"):
        RestDrafter(datastore=str(rest.default_folder("other"))).bind_tokenizer(byte_tokenizer(), "tiny")


@pytest.mark.integration
def test_lookahead_and_rest_are_lossless_on_tiny_model(tiny, prompts, store):
    engine = Engine(tiny)
    for d in (LookaheadDrafter(), LookaheadDrafter(budget=12), RestDrafter(datastore=str(store))):
        for prompt in prompts:
            assert generate(engine, prompt, d, 40).tokens == hf_greedy(tiny, prompt, 40)


def test_lookahead_is_seeded(prompts):
    """The seed alone decides the window's initial tokens: same seed, same window; another, another."""

    class Pre:
        topk_ids = None

    def window(seed):
        d = LookaheadDrafter(seed=seed)
        d.start(prompts[1] + [0], Pre())
        return d.levels

    assert window(3) == window(3)
    assert window(3) != window(4)
