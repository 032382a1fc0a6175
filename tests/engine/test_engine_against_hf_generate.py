"""The engine against Hugging Face generate on a tiny random Llama (fp32)."""

import pytest
import torch
from conftest import hf_greedy

from goose.engine.draft import Draft, ancestor_matrix, greedy_walk
from goose.engine.layouts import check_supported
from goose.engine.single import Engine
from goose.running.loop import Drafter, commit, generate


class Scripted(Drafter):
    """Proposes drafts built by a function of (context, true continuation)."""

    def __init__(self, truth, prompt_len, build):
        self.truth, self.n0, self.build = truth, prompt_len, build

    def propose(self, context):
        return self.build(context[-1], self.truth[len(context) - self.n0:])


def chain_of_truth(root, fut):
    return Draft.chain([root, *fut[:5]])


def chain_wrong_at(k):
    def build(root, fut):
        toks = list(fut[:6])
        if len(toks) > k:
            toks[k] = (toks[k] + 1) % 250
        return Draft.chain([root, *toks])
    return build


def tree_reject_everywhere(root, fut):
    """Each depth: a wrong sibling first, then the right one; plus wrong subtrees under wrong nodes."""
    tokens, parents, prev = [root], [-1], 0
    for t in fut[:5]:
        wrong = len(tokens)
        tokens += [(t + 1) % 250, (t + 2) % 250]
        parents += [prev, wrong]  # a wrong node with a wrong child
        tokens.append(t)
        parents.append(prev)
        prev = len(tokens) - 1
    return Draft(tokens, parents)


def tree_all_wrong(root, fut):
    return Draft([root, (fut[0] + 1) % 250 if fut else 0, 3, 4], [-1, 0, 0, 1])


@pytest.mark.parametrize("build", [chain_of_truth, chain_wrong_at(0), chain_wrong_at(2), chain_wrong_at(5),
                                   tree_reject_everywhere, tree_all_wrong])
def test_drafts_are_lossless(tiny, prompts, build):
    engine = Engine(tiny)
    for prompt in prompts:
        ref = hf_greedy(tiny, prompt, 40)
        gen = generate(engine, prompt, Scripted(ref + [0] * 10, len(prompt), build), 40)
        assert gen.tokens == ref


def test_ar_matches_generate_and_tau_is_one(tiny, prompts):
    engine = Engine(tiny)
    for prompt in prompts:
        gen = generate(engine, prompt, Drafter(), 30)
        assert gen.tokens == hf_greedy(tiny, prompt, 30)
        assert gen.steps == 30 and gen.tau == 1.0


def test_accepting_drafts_saves_forwards(tiny, prompts):
    engine = Engine(tiny)
    prompt = prompts[0]
    ref = hf_greedy(tiny, prompt, 40)
    gen = generate(engine, prompt, Scripted(ref + [0] * 10, len(prompt), chain_of_truth), 40)
    assert gen.steps < 40 / 3 + 2  # 6 tokens per verify after prefill


def test_non_tree_visibility(tiny, prompts):
    """Extra nodes visible to nobody but themselves (parent -1) never change the result."""
    prompt = prompts[1]
    ref = hf_greedy(tiny, prompt, 30)

    def build(root, fut):
        toks = [root, *fut[:3], 11, 12, 13]
        parents = [-1, 0, 1, 2, -1, -1, -1]
        T = len(toks)
        vis = torch.zeros(T, T, dtype=torch.bool)
        for i in range(4):
            vis[i, : i + 1] = True
        for i in range(4, 7):  # a causal side chain seeing only the prefix and itself
            vis[i, 4: i + 1] = True
        return Draft(toks, parents, visibility=vis, depths=[0, 1, 2, 3, 1, 2, 3])

    gen = generate(Engine(tiny), prompt, Scripted(ref + [0] * 10, len(prompt), build), 30)
    assert gen.tokens == ref


def test_cache_after_compaction_equals_fresh_prefill(tiny, prompts):
    prompt = prompts[0]
    ref = hf_greedy(tiny, prompt, 12)
    engine = Engine(tiny)
    engine.prefill(prompt)
    root = ref[0]
    # Accept the 2nd-listed branch at depth 1 and its child: a non-prefix path.
    draft = Draft([root, 5, ref[1], 9, ref[2], 4], [-1, 0, 0, 2, 2, 1])
    res = engine.verify(draft)
    assert res.path == [0, 2, 4] and res.bonus == ref[3]
    committed = prompt + ref[:3]
    assert engine.cache_len == len(committed)
    fresh = Engine(tiny)
    fresh.prefill(committed + [0])  # cache then holds `committed` + one extra position
    for a, b in zip(engine.cache.layers, fresh.cache.layers):
        torch.testing.assert_close(a.keys, b.keys[..., : len(committed), :], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(a.values, b.values[..., : len(committed), :], rtol=1e-4, atol=1e-5)


def test_stop_rules_inside_accepted_path(tiny, prompts):
    prompt = prompts[0]
    ref = hf_greedy(tiny, prompt, 30)
    eos = ref[7]  # pretend the 8th greedy token is EOS: generate stops right after it
    first = ref.index(eos)
    engine = Engine(tiny)
    gen = generate(engine, prompt, Scripted(ref + [0] * 10, len(prompt), chain_of_truth), 30,
                   frozenset([eos]))
    assert gen.tokens == ref[: first + 1]
    assert gen.tokens == hf_greedy(tiny, prompt, 30, eos=eos)
    gen = generate(engine, prompt, Scripted(ref + [0] * 10, len(prompt), chain_of_truth), 9)
    assert gen.tokens == ref[:9]  # max_new_tokens falls inside an accepted chain


def test_commit_cuts():
    from goose.running.loop import LoopWatch

    assert commit([1, 2, 3], 2, frozenset(), LoopWatch()) == ([1, 2], "cap")
    assert commit([1, 2, 3], 5, frozenset([2]), LoopWatch()) == ([1, 2], "stop")
    assert commit([1, 2], 5, frozenset(), LoopWatch()) == ([1, 2], "")


def test_walk_and_ancestors():
    parents = [-1, 0, 0, 1, 3, 2]
    anc = ancestor_matrix(parents, torch.device("cpu"))
    assert anc[4].nonzero().flatten().tolist() == [0, 1, 3, 4]
    assert anc[5].nonzero().flatten().tolist() == [0, 2, 5]
    assert greedy_walk(parents, [9, 1, 2, 3, 4, 5], pred=[2, 0, 5, 0, 0, 7]) == [0, 2, 5]
    long = list(range(-1, 99))
    assert ancestor_matrix(long, torch.device("cpu")).sum().item() == 100 * 101 // 2


def test_sliding_window_models_are_supported_full_attention_ones_unchanged():
    from transformers import MistralConfig, Qwen2Config

    from goose.engine.layouts import sliding_window

    check_supported(MistralConfig(sliding_window=128))  # masked by the engines (tests/engine/test_sliding_windows.py)
    check_supported(Qwen2Config(use_sliding_window=False))
    assert sliding_window(MistralConfig(sliding_window=128)) == 128
    assert sliding_window(Qwen2Config(use_sliding_window=False)) is None


def test_greedy_from_topk_breaks_ties_like_argmax():
    from goose.engine.logits import greedy_from_topk

    logits = torch.tensor([[0.0, 3.0, 3.0, 1.0], [5.0, 1.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    s, i = logits.topk(2, dim=-1)
    assert greedy_from_topk(logits, i, s) == logits.argmax(-1).tolist() == [1, 0, 0]


@pytest.mark.parametrize("shape,k", [((60, 49152), 10), ((7, 1000), 2), ((3, 4099), 10), ((1, 300), 10)])
def test_topk_rows_equals_topk(shape, k):
    from goose.engine.logits import topk_rows

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[1]))
    values, ids = topk_rows(x, k)
    ref_values, ref_ids = x.topk(k, dim=-1)
    assert torch.equal(values, ref_values) and torch.equal(ids, ref_ids)


def test_topk_rows_with_ties_keeps_the_top_values():
    from goose.engine.logits import greedy_rows, topk_rows

    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 6, (20, 5000), generator=g).float()  # thousands of ties per value
    x[3, 4321] = 9.0
    x[4, [17, 4000, 4999]] = 9.0  # the maximum three times, in three blocks, last in the tail
    values, ids = topk_rows(x, 10)
    assert torch.equal(values, x.topk(10, dim=-1).values)
    assert torch.equal(x.gather(1, ids), values)  # each id points at its value
    assert all(len(set(row)) == 10 for row in ids.tolist())
    pred, s, i, top2 = greedy_rows(x, 10)
    assert pred == x.argmax(-1).tolist()  # first index among ties, as greedy decoding
    assert pred[3] == 4321 and pred[4] == 17 and torch.equal(s, values)
    assert greedy_rows(x, 0)[:3] == (x.argmax(-1).tolist(), None, None)


def test_block_topk_path_is_lossless(tiny, prompts, monkeypatch):
    """The tiny vocabulary (260) is too small for topk_rows' blocks; shrink them to run that path."""
    import goose.engine.logits
    from goose.baselines.pld import PromptLookupDrafter
    from goose.methods.goose import GooseDrafter

    monkeypatch.setattr(goose.engine.logits, "TOPK_BLOCK", 6)  # 43 blocks and a ragged tail of 2
    for drafter in (GooseDrafter(budget=60), PromptLookupDrafter()):
        engine = Engine(tiny)
        for prompt in prompts:
            assert generate(engine, prompt, drafter, 40).tokens == hf_greedy(tiny, prompt, 40)
