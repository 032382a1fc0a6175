"""The in-place KV cache: what attention reads, crops and the engine's compaction give exactly what
Hugging Face's concatenating cache gives, also across a buffer's growth."""

import torch
from transformers import DynamicCache

from goose.engine import kv_cache
from goose.engine.draft import Draft
from goose.engine.kv_cache import InPlaceLayer
from goose.engine.single import Engine


def test_update_crop_and_growth_match_the_concatenating_layer(monkeypatch):
    monkeypatch.setattr(kv_cache, "CHUNK", 8)  # small buffers: the steps below grow them three times
    from transformers.cache_utils import DynamicLayer

    g = torch.Generator().manual_seed(0)
    ours, theirs = InPlaceLayer(), DynamicLayer()
    for n, crop in [(5, 0), (1, 0), (6, -4), (9, -1), (1, 0), (20, -15), (3, -3)]:
        k, v = torch.randn(1, 2, n, 4, generator=g), torch.randn(1, 2, n, 4, generator=g)
        a, b = ours.update(k, v), theirs.update(k, v)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        ours.crop(crop)
        theirs.crop(crop)
        assert ours.get_seq_length() == theirs.get_seq_length()
        assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)
    assert ours.capacity % 8 == 0 and ours.capacity >= ours.get_seq_length()


def test_the_engine_decodes_the_same_logits_on_either_cache(tiny, prompts, monkeypatch):
    """Trees verified and compacted on the in-place cache give bit-identical top-k to the same steps on
    transformers' DynamicCache (and so the same tokens)."""
    g = torch.Generator().manual_seed(3)
    steps = [Draft(torch.randint(0, 250, (T,), generator=g).tolist(), [-1] + [(i - 1) // 2 for i in range(1, T)])
             for T in (1, 7, 3, 12, 1, 5)]

    def run():
        engine = Engine(tiny)
        out = [engine.prefill(prompts[0], topk=4).topk_ids]
        for d in steps:
            res = engine.verify(d, topk=4)
            out += [res.topk_ids, res.topk_scores, torch.tensor(res.path)]
        return out, engine.cache_len

    monkeypatch.setattr(kv_cache, "CHUNK", 16)
    ours, n = run()
    monkeypatch.setattr("goose.engine.kv_cache.new_cache", lambda config, limit=None: DynamicCache(config=config))
    theirs, m = run()
    assert n == m and all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_new_cache_layers_grow_in_place(tiny):
    """A step writes into the buffer the cache already holds (no new tensor per forward, as DynamicLayer's
    concatenation makes): the storage stays put until the buffer is full, then grows by whole chunks."""
    from goose.engine import kv_cache

    engine = Engine(tiny)
    engine.prefill(list(range(40, 90)))  # 50 positions: one buffer of CHUNK
    layer = engine.cache.layers[0]
    storage = layer.keys.untyped_storage().data_ptr()
    for t in range(10):
        engine.verify(Draft.chain([60 + t]))
    assert engine.cache_len == 60 and layer.keys.shape[-2] == 60
    assert layer.keys.untyped_storage().data_ptr() == storage and layer.capacity == kv_cache.CHUNK
    engine.verify(Draft.chain(list(range(kv_cache.CHUNK))))  # does not fit: the buffer grows, once
    assert layer.capacity == 2 * kv_cache.CHUNK and layer.keys.untyped_storage().data_ptr() != storage


def test_a_buffer_grows_no_further_than_the_model_context(monkeypatch):
    monkeypatch.setattr(kv_cache, "CHUNK", 8)
    layer = InPlaceLayer(limit=20)
    for n in (5, 6, 6):  # 17 positions: doubling would ask for 32
        layer.update(torch.zeros(1, 1, n, 2), torch.zeros(1, 1, n, 2))
    assert layer.capacity == 20 and layer.get_seq_length() == 17
