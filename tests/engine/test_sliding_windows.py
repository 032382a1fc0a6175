"""Sliding-window models (Gemma 3's mixed layers, Mistral's all-sliding ones): the engines keep every entry and
hide what a window no longer sees with the mask (goose.engine.layouts); every path must decode what the model's own
generate decodes, whose cache drops old entries instead. Prompts and answers run well past the window of 8."""

import pytest
import torch
from conftest import hf_greedy, many_prompts
from tiny import tiny_windowed_model

from goose.drafting.contract import Drafter
from goose.engine.batched import BatchEngine
from goose.engine.layouts import check_supported, layer_masks, sliding_window
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.registry import build_drafters


@pytest.fixture(scope="module", params=["gemma3", pytest.param("mistral", marks=pytest.mark.integration)])
def windowed(request):
    return tiny_windowed_model(request.param)


def test_the_window_is_read_from_the_config(windowed):
    assert sliding_window(windowed.config) == 8
    mask = torch.zeros(1, 1, 2, 12)
    q, k = torch.tensor([[10, 11]]), torch.arange(12).unsqueeze(0)
    masks = layer_masks(windowed.config, sliding_window(windowed.config), mask, q, k)
    sliding = masks["sliding_attention"] if isinstance(masks, dict) else masks
    assert (sliding[0, 0] == 0).tolist() == [[j > 2 for j in range(12)], [j > 3 for j in range(12)]]
    if isinstance(masks, dict):
        assert masks["full_attention"] is mask


def test_ar_is_the_models_own_generate_past_the_window(windowed):
    import copy

    from goose.engine.backends import apply_backend

    packed = apply_backend(copy.deepcopy(windowed), "prepacked")
    for p in many_prompts()[:4]:
        want = hf_greedy(windowed, p, 30)
        assert generate(Engine(windowed), p, Drafter(), 30).tokens == want
        assert generate(Engine(packed), p, Drafter(), 30).tokens == want


# GOOSE in the unit tier, the others in the integration tier
@pytest.mark.parametrize("method", [pytest.param(m, marks=() if m == "goose@60" else pytest.mark.integration)
                                    for m in ["pld@60", "goose@60", "goose@auto", "tr@60", "lookahead", "suffix@60"]])
def test_every_method_is_ar_on_a_windowed_model(windowed, method):
    from goose.drafting.budget import AutoBudget, CostCurve

    (drafter, budget), = build_drafters([method], "smollm2-135m", (), []).values()
    if budget.auto:
        drafter.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.2])))
    engine = Engine(windowed)
    for p in many_prompts():
        want = generate(engine, p, Drafter(), 30).tokens
        assert generate(engine, p, drafter, 30).tokens == want, (method, p)


def test_batched_rows_of_a_windowed_model_are_ar_row_by_row(windowed):
    (drafter, _), = build_drafters(["goose@60"], "smollm2-135m", (), []).values()
    prompts = many_prompts()
    want = [generate(Engine(windowed), p, Drafter(), 24).tokens for p in prompts]
    for template in (Drafter(), drafter):
        got, _ = decode_batch(BatchEngine(windowed, rows=3), [Request(p, template.spawn(), 24) for p in prompts])
        assert [g.tokens for g in got] == want


def test_layouts_the_engines_cannot_mask_are_refused():
    from transformers import Gemma2Config, Gemma3TextConfig

    with pytest.raises(GooseError, match="chunked_attention"):
        check_supported(Gemma3TextConfig(layer_types=["full_attention", "chunked_attention"], num_hidden_layers=2))
    with pytest.raises(GooseError, match="soft-caps its attention"):
        check_supported(Gemma2Config())
