"""The paper's models are three architectures: Vicuna (a Llama, multi-head attention), Llama 3 (a Llama with
grouped-query attention, llama3 rope scaling and two stop ids) and Qwen3 (q/k norms, grouped-query attention, a
head_dim set apart from hidden / heads). A tiny random model of each (tests/tiny.py), from its family's own config
class; on each, every method of conf/method/ is lossless on the single engine and the batched one (ragged prompts,
refill, a stop), greedy against the model's own `generate` and sampled against AR sampling with the same seed, in
fp32. Every prompt list holds one prompt whose answer ends at one of the family's stop ids."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from conftest import SHORT_TEXT, drafter_for
from tiny import PAPER_ARCHITECTURES, tiny_architecture

from goose.drafting.contract import Drafter
from goose.engine.batched import BatchEngine
from goose.engine.layouts import check_supported, sliding_window
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.models.loading import stop_ids
from goose.models.reference import hf_greedy
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.registry import method_names

N = 24  # new tokens per prompt
SAMPLING = Sampling(0.8, 0, 0.95, 7)
ROWS = 3  # batch rows: four prompts, so one request is admitted when another finishes


def stopping_prompt(model, stops: frozenset[int], n: int = N) -> list[int]:
    """A prompt whose greedy answer ends at one of `stops` after a few tokens (at index 3 .. n - 4): 256
    candidates decoded in one batched generate, the first that stops there."""
    g = torch.Generator().manual_seed(5)
    candidates = torch.randint(0, 250, (256, 8), generator=g).repeat(1, 2)  # 8 tokens twice: drafts find matches
    with torch.no_grad():
        out = model.generate(candidates, attention_mask=torch.ones_like(candidates), max_new_tokens=n,
                             do_sample=False, eos_token_id=None, pad_token_id=0)[:, candidates.shape[1]:]
    for prompt, answer in zip(candidates.tolist(), out.tolist()):
        first = next((i for i, t in enumerate(answer) if t in stops), None)
        if first is not None and 3 <= first <= n - 4:
            return prompt
    raise AssertionError(f"no candidate prompt stops at {sorted(stops)}: pick other candidates")


@dataclass
class Case:
    kind: str
    model: torch.nn.Module
    stops: frozenset[int]
    prompts: list[list[int]]
    greedy: list[list[int]]  # the model's own generate
    sampled: list[list[int]]  # AR sampling on the engine (checked against generate with the same noise below)


@pytest.fixture(scope="module", params=PAPER_ARCHITECTURES)
def case(request, prompts):
    model = tiny_architecture(request.param)
    stops = stop_ids(None, model)  # the config's and the generation config's eos ids (a run adds the tokenizer's)
    ps = [*prompts, stopping_prompt(model, stops)]
    greedy = [hf_greedy(model, p, N, stops) for p in ps]
    engine = Engine(model)
    sampled = [generate(engine, p, Drafter(), N, stops, SAMPLING).tokens for p in ps]
    return Case(request.param, model, stops, ps, greedy, sampled)


def test_each_tiny_model_is_its_family():
    from transformers import LlamaForCausalLM, Qwen3ForCausalLM

    models = {kind: tiny_architecture(kind) for kind in PAPER_ARCHITECTURES}
    for model in models.values():
        c = model.config
        check_supported(c)
        assert sliding_window(c) is None and not c.tie_word_embeddings
        assert model.get_output_embeddings().weight.data_ptr() != model.get_input_embeddings().weight.data_ptr()
        assert next(model.parameters()).dtype == torch.float32
    vicuna, llama3, qwen3 = (models[k] for k in PAPER_ARCHITECTURES)
    assert type(vicuna) is LlamaForCausalLM and vicuna.config.num_key_value_heads == vicuna.config.num_attention_heads
    assert (vicuna.config.bos_token_id, vicuna.config.eos_token_id, vicuna.config.pad_token_id) == (1, 2, 0)
    assert vicuna.config.rope_parameters["rope_type"] == "default" and stop_ids(None, vicuna) == {2}
    assert type(llama3) is LlamaForCausalLM and llama3.config.num_key_value_heads == 1
    assert llama3.config.rope_parameters["rope_type"] == "llama3" and stop_ids(None, llama3) == {257, 265}
    inv_freq = llama3.model.rotary_emb.inv_freq
    theta, dim = llama3.config.rope_parameters["rope_theta"], llama3.config.head_dim
    unscaled = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)
    assert inv_freq[0] == unscaled[0] and (inv_freq[1:] < unscaled[1:]).all()  # the llama3 scaling bites
    assert type(qwen3) is Qwen3ForCausalLM and qwen3.config.num_key_value_heads == 2
    attn = qwen3.model.layers[0].self_attn
    assert attn.q_norm.weight.shape == (32,) and attn.k_norm.weight.shape == (32,)
    assert qwen3.config.head_dim * qwen3.config.num_attention_heads != qwen3.config.hidden_size
    assert stop_ids(None, qwen3) == {256, 258}


def test_ar_is_the_models_own_generate_on_both_engines(case):
    engine = Engine(case.model)
    for p, want, sampled in zip(case.prompts, case.greedy, case.sampled):
        assert generate(engine, p, Drafter(), N, case.stops).tokens == want
        assert sampled == hf_greedy(case.model, p, N, case.stops, SAMPLING)  # generate's loop, our noise
        assert sampled != want or len(want) < 5
    *_, stopped = case.greedy
    assert 4 <= len(stopped) <= N - 3 and stopped[-1] in case.stops  # the last prompt ends at a stop id
    for sampling, want in ((None, case.greedy), (SAMPLING, case.sampled)):
        got, _ = decode_batch(BatchEngine(case.model, rows=ROWS), [Request(p, Drafter(), N) for p in case.prompts],
                              case.stops, sampling)
        assert [g.tokens for g in got] == want


def methods():
    """Every method; GOOSE in the unit tier, the others in the integration tier."""
    return [pytest.param(m, marks=() if m == "goose" else pytest.mark.integration) for m in method_names()]


class IdTokenizer:
    """Token ids written as decimal numbers, for a REST datastore of a model's own answers in any vocabulary."""

    def __init__(self, vocab: int):
        self.vocab = vocab

    def __call__(self, text: str, add_special_tokens: bool = False):
        from types import SimpleNamespace

        return SimpleNamespace(input_ids=[int(t) for t in text.split()])

    def get_vocab(self) -> dict[str, int]:
        return {str(i): i for i in range(self.vocab)}


@pytest.fixture(scope="module")
def answers(case, tmp_path_factory):
    """(a REST datastore of every prompt followed by its greedy answer, its tokenizer): random prompts match no
    corpus, so REST drafts here, some continuations right, some not."""
    from goose.baselines.rest_datastore import build

    corpus = tmp_path_factory.mktemp(f"answers-{case.kind}")
    for i, (p, want) in enumerate(zip(case.prompts, case.greedy)):
        (corpus / f"{i}.txt").write_text(" ".join(map(str, p + want)))
    tok = IdTokenizer(case.model.config.vocab_size)
    out = tmp_path_factory.mktemp(f"store-{case.kind}") / "store"
    build(tok, "ids", str(corpus), out, None, 10_000)
    return out, tok


@pytest.mark.parametrize("name", methods())
def test_every_method_is_lossless_on_every_architecture(case, name, request):
    extra = list(SHORT_TEXT.get(name, ()))
    if name == "rest":
        store, tok = request.getfixturevalue("answers")
        extra = [f"rest_datastore={store}"]
    template, _ = drafter_for(name, extra=extra)
    if template.capabilities.tokenizer_bound:
        template.bind_tokenizer(tok, "ids")
    engine = Engine(case.model)
    drafted = 0
    for p, want, sampled in zip(case.prompts, case.greedy, case.sampled):
        gen = generate(engine, p, template, N, case.stops)
        assert gen.tokens == want, (case.kind, name, "greedy", p)
        drafted += len(gen.tokens) - gen.steps
        assert generate(engine, p, template, N, case.stops, SAMPLING).tokens == sampled, (case.kind, name, "sampled")
    if name != "ar":
        assert drafted > 0, f"{name} never had a drafted token accepted on {case.kind}: the test exercises little"
    for sampling, want in ((None, case.greedy), (SAMPLING, case.sampled)):
        got, _ = decode_batch(BatchEngine(case.model, rows=ROWS),
                              [Request(p, template.spawn(), N) for p in case.prompts], case.stops, sampling)
        assert [g.tokens for g in got] == want, (case.kind, name, "batched", sampling)
