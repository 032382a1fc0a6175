"""REST (goose.baselines.rest, goose.baselines.rest_datastore): the suffix array, the trie of continuations, the
datastore's round trip and its refusals, the offline default built once on first use; lossless on the tiny model."""

import numpy as np
import pytest
from conftest import hf_greedy
from tiny import byte_tokenizer

from goose.baselines.rest import RestDrafter, draft_trie
from goose.baselines.rest_datastore import Datastore, suffix_array
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.running.loop import generate


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


def test_two_builds_of_one_corpus_are_one_datastore(tmp_path, monkeypatch):
    """A run's key covers its datastore's content (data_fingerprint): a rebuild of the same corpus (a fresh machine's
    first use) keys the same runs, however long it took; a datastore built when meta.json still held the build time
    is settled on first load (the time kept in .build.json) to the same fingerprint. Before, every rebuild started
    REST's rows afresh under a new key."""
    import itertools
    import json
    import time

    import goose.baselines.rest_datastore as rest
    from goose.core.fingerprints import path_fingerprint

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.py").write_text("def add(a, b):\n    return a + b\n" * 4)
    clock = (float(i * i) for i in itertools.count())
    monkeypatch.setattr(time, "time", lambda: next(clock))  # every build takes longer than the one before
    first, second = tmp_path / "first", tmp_path / "second"
    took = [rest.build(byte_tokenizer(), "tiny", str(corpus), out, None, 1000)["build_s"] for out in (first, second)]
    assert 0 < took[0] < took[1] and path_fingerprint(first) == path_fingerprint(second)
    assert json.loads((first / rest.BUILD).read_text()) == {"build_s": took[0]}
    old = tmp_path / "old"  # as builds wrote it before: the time in meta.json
    rest.build(byte_tokenizer(), "tiny", str(corpus), old, None, 1000)
    (old / rest.BUILD).unlink()
    meta = json.loads((old / "meta.json").read_text())
    (old / "meta.json").write_text(json.dumps({**meta, "build_s": 12.3}, indent=2))
    assert path_fingerprint(old) != path_fingerprint(first)
    assert Datastore(old).meta == meta and path_fingerprint(old) == path_fingerprint(first)
    assert json.loads((old / rest.BUILD).read_text()) == {"build_s": 12.3}
    assert sorted(p.name for p in old.iterdir()) == [".build.json", "meta.json", "sa.npy", "tokens.npy"]


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
def test_rest_is_lossless_on_tiny_model(tiny, prompts, store):
    engine = Engine(tiny)
    d = RestDrafter(datastore=str(store))
    for prompt in prompts:
        assert generate(engine, prompt, d, 40).tokens == hf_greedy(tiny, prompt, 40)
