"""Device and dtype discipline, checked on a CPU.

Device: on a GPU, a tensor goose makes without `device=` lands on the CPU and breaks (or silently copies) the
moment it meets the model's tensors; on a CPU-only machine it works by accident. `NoDefaultDevice` makes every
tensor that goose's own code (src/goose, baselines) creates without naming a device a meta tensor (no data):
most ops fail the moment it meets the model's CPU tensors or is read, as a CPU tensor would on a GPU, and the mode
records where each was made, which fails the test even where an op takes the meta tensor without complaint (CPU
SDPA does, with a meta mask: the tokens then go wrong). The engine, every drafter, the sampler and the batch
engine run under it and must still decode AR's tokens.

Dtype: with a half-precision model every mask, score and noise tensor is in the model's dtype or in float32 on
purpose; `EXPECTED` says which, and the test checks each against it.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from conftest import drafter_for
from tiny import byte_tokenizer, tiny_model, tiny_windowed_model
from torch.overrides import TorchFunctionMode

import goose
import goose.analysis
import goose.baselines
import goose.experiments
from goose.drafting.contract import Capabilities, Drafter
from goose.engine.batched import BatchEngine
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.running.batch_loop import Request, decode_batch
from goose.running.loop import generate
from goose.running.registry import method_names

# goose's code: the package and its top-level rooms (baselines/ holds the peers' drafters, outside src/goose)
GOOSE_CODE = tuple(str(Path(m.__file__).parent) for m in (goose, goose.baselines, goose.experiments, goose.analysis))
FACTORIES = {torch.tensor, torch.as_tensor, torch.asarray, torch.scalar_tensor, torch.zeros, torch.ones, torch.empty,
             torch.full, torch.arange, torch.range, torch.linspace, torch.logspace, torch.eye, torch.empty_strided,
             torch.rand, torch.randn, torch.randint, torch.randperm, torch.tril_indices, torch.triu_indices}
SAMPLING = Sampling(0.8, 0, 0.95, 3)


class NoDefaultDevice(TorchFunctionMode):
    """Tensors that goose's own code creates without `device=` are made on the meta device (shape only, no data),
    so they fail loudly where they meet real tensors or are read; `sites` counts where they were made. Other code
    (transformers, torch, the tests) is left alone."""

    def __init__(self):
        super().__init__()
        self.sites: Counter[str] = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in FACTORIES and kwargs.get("device") is None:
            if not (func in (torch.as_tensor, torch.asarray) and args and isinstance(args[0], torch.Tensor)):
                caller = sys._getframe(1)
                file = caller.f_code.co_filename
                if file.startswith(GOOSE_CODE):
                    self.sites[f"{Path(file).parent.name}/{Path(file).name}:{caller.f_lineno} ({func.__name__})"] += 1
                    kwargs["device"] = "meta"
        return func(*args, **kwargs)


def strictly(run, *args, **kwargs):
    """`run(*args, **kwargs)` under NoDefaultDevice; a failure names the goose lines that made tensors without a
    device, and any such line fails it."""
    mode = NoDefaultDevice()
    try:
        with mode:
            return run(*args, **kwargs)
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\ntensors made without device=: {dict(mode.sites)}") from e
    finally:
        assert not mode.sites, f"tensors made without device=: {dict(mode.sites)}"


def prompts():
    g = torch.Generator().manual_seed(2)
    base = torch.randint(0, 250, (10,), generator=g).tolist()
    return [base * 3, (base[:4] + [9, 9]) * 3, torch.randint(0, 250, (7,), generator=g).tolist()]


def test_the_mode_catches_a_tensor_made_without_a_device():
    """The tripwire itself: a device-less tensor from goose's code (run as if it were) fails where it meets a
    CPU tensor, a device-less tensor from elsewhere is left alone."""
    code = compile("def f(x):\n    return x + torch.zeros(x.shape)\n", GOOSE_CODE[0] + "/engine.py", "exec")
    scope = {"torch": torch}
    exec(code, scope)
    x = torch.ones(3)
    with pytest.raises(AssertionError, match=r"engine.py:2 \(zeros\)"):
        strictly(scope["f"], x)
    assert strictly(lambda: (x + torch.zeros(3)).tolist()) == [1.0, 1.0, 1.0]  # made here, not in goose


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=0)


def decode_all(model, template, sampling=None, rows=2, n=16):
    single = [generate(Engine(model), p, template, n, sampling=sampling).tokens for p in prompts()]
    got, _ = decode_batch(BatchEngine(model, rows=rows), [Request(p, template.spawn(), n) for p in prompts()],
                          sampling=sampling)
    return single, [g.tokens for g in got]


# GOOSE in the unit tier (the engine, the batch engine, the sampler, the prefill harvest and the batch's deferred
# top-k all run under it); every other method, each decoded end to end twice, in the integration tier.
UNIT = {"goose"}


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m in UNIT else pytest.mark.integration)
                                  for m in method_names()])
def test_every_method_names_its_devices(model, name, store):
    """Every drafter, the engine and the batch engine, greedy and sampled (the sampler), prefill harvest and the
    batch's deferred prompt top-k included: no tensor of goose's lacks a device."""
    template, _ = drafter_for(name, extra=[f"rest_datastore={store}"])
    if template.capabilities.tokenizer_bound:
        template.bind_tokenizer(byte_tokenizer(), "tiny")
    for sampling in (None, SAMPLING):
        want = [generate(Engine(model), p, Drafter(), 16, sampling=sampling).tokens for p in prompts()]
        single, batched = strictly(decode_all, model, template, sampling)
        assert single == want and batched == want, (name, sampling)


def test_backends_windows_and_cost_measurement_name_their_devices(model):
    import copy

    from goose.drafting.budget import AutoBudget, CostCurve
    from goose.engine.backends import apply_backend

    auto, _ = drafter_for("goose@auto")
    auto.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.2])))
    for m in (apply_backend(copy.deepcopy(model), "prepacked"), tiny_windowed_model("gemma3")):
        for template in (Drafter(), auto):
            want = [generate(Engine(m), p, Drafter(), 16).tokens for p in prompts()]
            single, batched = strictly(decode_all, m, template)
            assert single == want and batched == want
    costs = strictly(Engine(model).measure_cost, [1, 4], context_len=16, repeats=1)
    assert len(costs) == 2 and all(c > 0 for c in costs)


# --- dtypes at half precision ------------------------------------------------------------------------------------
MODEL = "the model's dtype"
EXPECTED = {
    # additive masks: 0 = may attend, the model dtype's minimum = blocked (a float32 mask would upcast or be refused
    # by a half model's attention; the minimum of float32 is -inf once cast to half)
    "verify mask": MODEL,
    "batched verify mask": MODEL,
    "sliding-window mask": MODEL,
    # ranked in float32 on purpose: half logits tie far more often, and harvesting drafters compare scores
    "prefill top-k scores": torch.float32,
    "verify top-k scores": torch.float32,
    "batched prompt top-k scores": torch.float32,
    # the sampler works in float32 on purpose: logits / temperature, the nucleus and the Gumbel noise, so a
    # sampled token is the same draw whatever the model's dtype (goose.engine.sampling)
    "filtered logits": torch.float32,
    "sampling noise": torch.float32,
}


class Recorder(Drafter):
    """A one-node drafter that asks for every top-k the engines hand out (prefill harvest, verified nodes)."""

    capabilities = Capabilities(topk=4, harvest_prefill=True)

    def __init__(self, seen, *a, **kw):
        super().__init__(*a, **kw)
        self.seen = seen

    def spawn(self):
        return Recorder(self.seen, self.config)

    def start(self, context, prefill):
        if prefill.topk_later is not None:
            self.seen["batched prompt top-k scores"].add(prefill.topk_later()[0].dtype)
        else:
            self.seen["prefill top-k scores"].add(prefill.topk_scores.dtype)

    def propose(self, context):
        from goose.engine.draft import Draft

        return Draft([context[-1], context[-1], context[-1]], [-1, 0, 1])  # three nodes: a real tree mask

    def accepted(self, result, context):
        self.seen["verify top-k scores"].add(result.topk_scores.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masks_scores_and_noise_are_in_the_model_dtype_or_float32_on_purpose(dtype, monkeypatch):
    from collections import defaultdict

    import goose.engine.sampling
    import goose.engine.single

    seen: dict[str, set] = defaultdict(set)
    blocked: set[float] = set()
    batched = False

    def mask_of(module, args, kwargs):
        mask = kwargs.get("attention_mask")
        if mask is None:  # the prefill: the model's own causal mask
            return
        masks = mask if isinstance(mask, dict) else {"full_attention": mask}
        for kind, m in masks.items():
            name = "sliding-window mask" if kind == "sliding_attention" else \
                "batched verify mask" if batched else "verify mask"
            seen[name].add(m.dtype)
            blocked.update(set(m.unique().tolist()) - {0.0})
        assert kwargs["position_ids"].dtype == torch.int64

    real_gumbel, real_kept = goose.engine.sampling.gumbel_at, goose.engine.sampling.kept_tokens

    def gumbel_at(seed, ids):
        out = real_gumbel(seed, ids)
        seen["sampling noise"].add(out.dtype)
        return out

    def kept_tokens(*a, **kw):
        ids, values = real_kept(*a, **kw)
        seen["filtered logits"].add(values.dtype)
        return ids, values

    monkeypatch.setattr(goose.engine.sampling, "gumbel_at", gumbel_at)
    monkeypatch.setattr(goose.engine.sampling, "kept_tokens", kept_tokens)
    assert goose.engine.single.Sampler is goose.engine.sampling.Sampler  # the engine samples through the patched module
    for m in (tiny_model(seed=0).to(dtype), tiny_windowed_model("gemma3").to(dtype)):
        hook = m.register_forward_pre_hook(mask_of, with_kwargs=True)
        for sampling in (None, SAMPLING):
            batched = False
            for p in prompts():
                generate(Engine(m), p, Recorder(seen), 10, sampling=sampling)
            batched = True
            decode_batch(BatchEngine(m, rows=2), [Request(p, Recorder(seen), 10) for p in prompts()],
                         sampling=sampling)
        hook.remove()
    want = {k: {dtype if v == MODEL else v} for k, v in EXPECTED.items()}
    assert dict(seen) == want
    assert blocked == {torch.finfo(dtype).min}  # blocked is the dtype's minimum (finite: no NaN from a full row)
