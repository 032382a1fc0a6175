"""The Python API: load a model once, generate with any method.

    import goose
    model = goose.load("smollm2-135m")
    out = goose.generate(model, "def fib(n):", method="goose", budget="auto", max_new_tokens=128)
    print(out.text, out.tau)

`generate` returns exactly the tokens AR decoding returns (greedy, or AR sampling with the same
settings and seed), as every run of run.py does.
"""

from __future__ import annotations

import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from goose.core.identity import ModelIdentity
from goose.core.sections import ModelSpec
from goose.core.values import got, is_flag, is_number, is_whole
from goose.drafting.budget import Budget, CostCurve, cost_curve
from goose.drafting.contract import BUDGET, MEMORY, MEMORY_MODES, Drafter, role_fields
from goose.engine.backends import apply_backend, default_backend
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.errors import GooseError
from goose.models.loading import identify_model, load_model, model_config, model_config_names, stop_ids
from goose.running.inputs import build_input, check_budget, check_length
from goose.running.loop import BONUS
from goose.running.loop import generate as decode
from goose.running.registry import load_method, make_drafter, method_names, prepare_drafter
from goose.storage.result_files import token_pieces

HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass
class Model:
    """A loaded target model: the transformers model and tokenizer, the verification engine over it,
    its stop ids, and what it is (`identity`: content fingerprint, where it was loaded from)."""

    hf: torch.nn.Module
    tokenizer: object
    engine: Engine
    stop_ids: frozenset[int]
    identity: ModelIdentity
    config_name: str  # the conf/model config it was loaded through (hf, gguf for a path or hub id)
    device: torch.device
    dtype: torch.dtype
    _cost: CostCurve | None = field(default=None, repr=False)

    @property
    def backend(self) -> str:
        """How the forward runs (goose.engine.backends). prepacked keeps oneDNN-reordered copies of the linear
        weights and drops the plain ones: save weights from a model loaded with backend="eager"."""
        return self.engine.backend

    def cost(self) -> CostCurve:
        """The cost curve budget=auto prunes with (measured once per model, device, threads; cached)."""
        if self._cost is None:
            self._cost = cost_curve(self.engine, self.identity, self.device, self.dtype)
        return self._cost


def _model_config(name: str):
    """(conf/model config, how `name` was understood): a config name, else an existing local GGUF file
    or Hugging Face folder, else a hub repo id."""
    if name in ("hf", "gguf"):
        what = "a local Hugging Face folder" if name == "hf" else "a GGUF file"
        raise GooseError(f"'{name}' is the config for {what}: pass its path, goose.load('/path/to/it').")
    if not name.strip():
        raise GooseError("goose.load: give a model config name, a local path or a hub id (got an empty string).")
    if name in model_config_names():
        return model_config(name), f"model config '{name}'"
    path = Path(name).expanduser()
    if path.is_file():
        return model_config("gguf", str(path)), f"local GGUF file {path.resolve()}"
    if path.is_dir():
        return model_config("hf", str(path)), f"local folder {path.resolve()}"
    if HUB_ID.match(name):
        return ModelSpec(name=name.split("/")[-1], source="hub", repo=name), f"Hugging Face hub id {name}"
    raise GooseError(f"cannot load '{name}': not a model config ({', '.join(model_config_names())}), not an "
                     "existing file or folder, and not a hub id (org/name).")


def load(name: str, device: str = "auto", dtype: str = "auto", quiet: bool = False, backend: str = "auto") -> Model:
    """A model by config name (`smollm2-135m`, `vicuna-7b`, ...), local GGUF file or HF folder, or hub id.
    `backend`: how its forward runs (goose.engine.backends: eager, prepacked, or auto: prepacked for fp32 on a CPU)."""
    if not isinstance(name, (str, os.PathLike)):
        raise GooseError(f"goose.load: name must be a str, a model config name, a local path or a hub id "
                         f"({got(name)}).")
    for key, value in (("device", device), ("dtype", dtype), ("backend", backend)):
        _str_arg("goose.load", key, value)
    _flag("goose.load", "quiet", quiet)
    cfg, how = _model_config(os.fspath(name))
    if not quiet:
        print(f"[goose] loading {name} as {how}", file=sys.stderr, flush=True)
    model = load_config(cfg, device, dtype, backend)
    if not quiet:
        print(f"[goose] {model.device.type} {str(model.dtype).replace('torch.', '')}, engine.backend={model.backend}",
              file=sys.stderr, flush=True)
    return model


def load_config(cfg, device: str = "auto", dtype: str = "auto", backend: str = "auto") -> Model:
    """A model from a conf/model config (as run.py composes it)."""
    identity = identify_model(cfg)
    hf, tok, dev, dt = load_model(cfg, device, dtype, identity)
    hf = apply_backend(hf, default_backend(dev, dt) if backend == "auto" else backend)
    return Model(hf, tok, Engine(hf), stop_ids(tok, hf), identity, cfg.name, dev, dt)


@dataclass
class Output:
    """What `generate` returns: the text, the token ids, where each token came from, and the stats."""

    text: str
    tokens: list[int]
    pieces: list[str]  # per token, the text it adds (they join to `text`)
    origins: list[str]  # per token: a draft source (GOOSE: spine, branch) or "bonus" (the target's own)
    method: str
    tau: float  # tokens per target forward, prefill included
    steps: int  # target forwards
    tokens_per_s: float
    wall_s: float
    stats: dict  # the drafter's counters: drafted and accepted nodes per source, routes, ...

    def marked(self, colour: bool | None = None) -> str:
        """The text with each drafted token marked by its source (see `marked`)."""
        return marked(self.pieces, self.origins, colour)

    @property
    def from_source(self) -> dict[str, int]:
        """How many committed tokens each source gave (bonus: the target's own)."""
        counts: dict[str, int] = {}
        for o in self.origins:
            counts[o] = counts.get(o, 0) + 1
        return counts


# --- the arguments: each of its type, or one GooseError naming it (a truthy "no" is not True) -----------------
def _flag(fn: str, name: str, value) -> bool:
    if is_flag(value):
        return bool(value)
    raise GooseError(f"{fn}: {name} must be True or False ({got(value)}).")


def _whole(fn: str, name: str, value, low: int | None = None) -> int:
    if is_whole(value, low):
        return int(value)
    at_least = f" >= {low}" if low is not None else ""
    raise GooseError(f"{fn}: {name} must be an integer{at_least} ({got(value)}).")


def _real(fn: str, name: str, value) -> float:
    if is_number(value):
        return value if isinstance(value, (int, float)) else float(value)
    raise GooseError(f"{fn}: {name} must be a number ({got(value)}).")


def _str_arg(fn: str, name: str, value) -> str:
    if isinstance(value, str):
        return value
    raise GooseError(f"{fn}: {name} must be a str ({got(value)}).")


def _model(fn: str, model) -> Model:
    if isinstance(model, Model):
        return model
    raise GooseError(f"{fn}: model must be what goose.load returns, e.g. model = goose.load('smollm2-135m') (got "
                     f"{'None' if model is None else type(model).__name__}).")


def _method_args(fn: str, method, budget, memory):
    """(method, budget, memory) checked: a method name or a Drafter; None, a budget of nodes or 'auto'; None or
    a memory mode."""
    if not isinstance(method, (str, Drafter)):
        raise GooseError(f"{fn}: method must be a method name such as 'goose' or a Drafter instance "
                         f"({got(method)}).")
    if is_whole(budget):
        budget = int(budget)
    elif not (budget is None or (isinstance(budget, str) and budget == "auto")):
        raise GooseError(f"{fn}: budget must be an integer number of draft nodes >= 1 or 'auto' ({got(budget)}), or "
                         "None: the method's default, or a Drafter instance's own.")
    if memory is not None and memory not in MEMORY_MODES:
        raise GooseError(f"{fn}: memory must be None (the method's default), {' or '.join(map(repr, MEMORY_MODES))} "
                         f"({got(memory)}).")
    return method, budget, memory


def _promptgot(prompt) -> str:
    """What a refused prompt was, in words: an empty tensor, a list holding a non-id, ..."""
    if isinstance(prompt, torch.Tensor) or type(prompt).__module__ == "numpy":
        kind = "tensor" if isinstance(prompt, torch.Tensor) else "numpy array"
        empty = "an empty" if 0 in tuple(getattr(prompt, "shape", ())) else "a"
        return f"got {empty} {kind} of shape {tuple(prompt.shape)}"
    if isinstance(prompt, (list, tuple)):
        if not prompt:
            return f"got an empty {type(prompt).__name__}"
        bad = next((t for t in prompt if not is_whole(t)), None)
        return f"got a {type(prompt).__name__} holding {bad!r}, not a token id"
    return got(prompt)


def _prompt_ids(model: Model, prompt, chat_template: bool) -> list[int]:
    given = prompt
    if isinstance(prompt, str):
        if not prompt:
            raise GooseError("goose.generate: the prompt is an empty string: give it text to continue.")
        return build_input(model.tokenizer, [], prompt, chat_template)
    if isinstance(prompt, torch.Tensor) or type(prompt).__module__ == "numpy":
        shape = tuple(prompt.shape)
        if len(shape) == 2 and shape[0] == 1:
            prompt = prompt[0]
            shape = shape[1:]
        if len(shape) != 1:
            raise GooseError(f"prompt: an array of token ids must be 1-D (or 1 x n); got shape {shape}.")
        if "int" not in str(prompt.dtype):
            raise GooseError(f"prompt: token ids must be integers; got an array of {prompt.dtype}.")
        prompt = prompt.tolist()
    if isinstance(prompt, (list, tuple)) and all(is_whole(t)
                                                 for t in prompt) and prompt:
        prompt = [int(t) for t in prompt]
        vocab = model.hf.config.vocab_size
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise GooseError(f"prompt: token ids {bad[:5]} are outside this model's vocabulary (0..{vocab - 1}).")
        return list(prompt)
    raise GooseError(f"prompt must be a string, a non-empty list of token ids or a 1-D tensor; {_promptgot(given)}.")


def _own_settings(fn: str, drafter: Drafter, budget, memory) -> None:
    """A budget or memory given beside a Drafter instance must be the instance's own: it drafts with its Config, so
    another value would be drafted as another configuration than the one asked for. Refused in one line naming
    the setting, both values and the fix. budget="auto" arms pruning on the instance (its budget: the most it
    builds); a drafter without a budget or memory field takes any (its rows record budget=fixed and memory=none,
    as the method's by name do)."""
    cls = type(drafter).__name__
    if budget not in (None, "auto") and drafter.auto_budget_enabled:
        raise GooseError(f"{fn}: budget={budget!r} asked of a Drafter instance made or used with budget='auto' (the "
                         f"default where a method prunes its drafts): it prunes under budget=auto for good; make one "
                         f"for a fixed budget (goose.make_method(model, {drafter.name!r}, budget={budget!r}) or "
                         f"{cls}(...)), or pass budget='auto'.")
    for key, given, role in (("budget", budget, BUDGET), ("memory", memory, MEMORY)):
        fields = role_fields(drafter.config, role)
        if given is None or given == "auto" or not fields or getattr(drafter.config, fields[0]) == given:
            continue
        own, name = getattr(drafter.config, fields[0]), drafter.name
        by_name = ""
        if name in method_names():
            by_name = (f", or make it by name (goose.make_method(model, {name!r}, {key}={given!r}))" if given == "run"
                       else f", or pass the method by name (method={name!r}, {key}={given!r})")
        raise GooseError(f"{fn}: {key}={given!r} differs from the Drafter instance's own {key}={own!r} "
                         f"({cls}.config.{fields[0]}), and an instance drafts with its own Config: build the drafter "
                         f"with it ({cls}({fields[0]}={given!r}, ...)){by_name}.")


@contextmanager
def _refusals_of(fn: str):
    """A refusal from the rules the three entry points share (goose.core, goose.running) said as this function's."""
    try:
        yield
    except GooseError as e:
        if type(e) is not GooseError or str(e).startswith("goose."):
            raise
        raise GooseError(f"{fn}: {e}") from None


def make_method(model: Model, method: str | Drafter, budget: int | str | None = None,
                memory: str | None = None) -> Drafter:
    """A drafter ready for this model: a method name (conf/method/NAME.yaml) with `budget` (None: the config's
    default, auto where the method prunes its drafts, else the paper's 60) and `memory`, or a drafter instance,
    which drafts with its own Config: a budget or memory given beside it must be its own (else refused in one
    line), and budget="auto" arms pruning on it."""
    fn = "goose.make_method"
    with _refusals_of(fn):
        return _make_method(fn, model, method, budget, memory)


def _make_method(fn: str, model: Model, method: str | Drafter, budget: int | str | None,
                 memory: str | None) -> Drafter:
    model = _model(fn, model)
    method, budget, memory = _method_args(fn, method, budget, memory)
    if budget is not None:
        Budget.parse(budget)  # a bad budget is refused whatever the method
    if isinstance(method, Drafter):
        _own_settings(fn, method, budget, memory)
        drafter = method
        own = [getattr(drafter.config, f) for f in role_fields(drafter.config, BUDGET)]
        b = Budget.parse("auto") if budget == "auto" else Budget(own[0] if own else 1, False)
    else:
        # A model loaded by hub id has no config of its own: compose as `hf` under its name (REST's default
        # datastore is named after the model config).
        known = model.config_name in model_config_names()
        method_spec, b = load_method(method + (f"@{budget}" if budget is not None else "")
                                     + (f":{memory}" if memory else ""),
                                     model=model.config_name if known else "hf",
                                     extra=[] if known else [f"model.name={model.config_name}"])
        drafter = make_drafter(method_spec, b)
    # before budget=auto measures a cost curve
    check_budget(getattr(drafter.config, "budget", 1), model.engine.max_positions, b.auto)
    return prepare_drafter(drafter, b, model.tokenizer, model.config_name, model.cost)


def generate(model: Model, prompt, method: str | Drafter = "goose", budget: int | str | None = None,
             max_new_tokens: int = 128, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             seed: int = 0, memory: str | None = None, stop_at_eos: bool = True,
             chat_template: bool = False, stop_at_loop: bool = False) -> Output:
    """Decode `prompt` (a string, a list of token ids or a 1-D tensor) with `method` (a name such as
    "goose", "pld", "tr", "ar", or a Drafter instance). `budget` None: the method's default (auto where it prunes
    its drafts, else 60), or a Drafter instance's own (a budget or memory that differs from an instance's own is
    refused). Stops at the tokenizer's EOS (unless stop_at_eos=False), after max_new_tokens and, with
    stop_at_loop=True, once the answer's last 32 tokens repeat an earlier run of it (run.py's stop_at_loop).
    temperature > 0 samples exactly: the tokens AR sampling gives with the same seed."""
    fn = "goose.generate"
    with _refusals_of(fn):
        return _generate(fn, model, prompt, method, budget, max_new_tokens, temperature, top_k, top_p, seed, memory,
                         stop_at_eos, chat_template, stop_at_loop)


def _generate(fn: str, model, prompt, method, budget, max_new_tokens, temperature, top_k, top_p, seed, memory,
              stop_at_eos, chat_template, stop_at_loop) -> Output:
    model = _model(fn, model)
    method, budget, memory = _method_args(fn, method, budget, memory)
    max_new_tokens = _whole(fn, "max_new_tokens", max_new_tokens, 1)
    temperature, top_p = _real(fn, "temperature", temperature), _real(fn, "top_p", top_p)
    top_k, seed = _whole(fn, "top_k", top_k, 0), _whole(fn, "seed", seed)
    stop_at_eos, chat_template = _flag(fn, "stop_at_eos", stop_at_eos), _flag(fn, "chat_template", chat_template)
    stop_at_loop = _flag(fn, "stop_at_loop", stop_at_loop)
    if isinstance(method, str) and "@" in method:
        raise GooseError(f"method={method!r}: give the budget as budget=..., e.g. method='goose', budget=30.")
    if memory == "run" and not isinstance(method, Drafter):
        raise GooseError("memory='run' keeps a drafter's state across prompts, but a method name builds a new "
                         "drafter every call: build one (goose.make_method(model, 'goose', memory='run')) and pass "
                         "the same instance to every generate call.")
    if isinstance(method, Drafter):
        _own_settings(fn, method, budget, memory)
    sampling = Sampling(temperature, top_k, top_p, seed)
    drafter = _make_method(fn, model, method, budget, memory)
    ids = _prompt_ids(model, prompt, chat_template)
    check_length(f"{fn}: the prompt", len(ids), model.engine.max_positions, max_new_tokens)
    gen = decode(model.engine, ids, drafter, max_new_tokens, model.stop_ids if stop_at_eos else frozenset(),
                 None if sampling.greedy else sampling, stop_at_loop)
    pieces = token_pieces(model.tokenizer, gen.tokens)
    return Output(text="".join(pieces), tokens=gen.tokens, pieces=pieces, origins=gen.origins,
                  method=method if isinstance(method, str) else type(method).__name__, tau=gen.tau, steps=gen.steps,
                  tokens_per_s=gen.tokens_per_s, wall_s=gen.wall_s, stats=gen.stats)


# --- showing where tokens came from --------------------------------------------------------
COLOURS = {"spine": "\033[32m", "branch": "\033[33m"}  # green, yellow; other draft sources: cyan
# Brackets that code rarely contains: [ ] and { } would blur into the text they mark.
PLAIN = {"spine": ("⟦", "⟧"), "branch": ("⟨", "⟩")}  # other draft sources: ⟪ ⟫
OTHER = ("⟪", "⟫")
RESET = "\033[0m"


def _mark(source: str, text: str, colour: bool) -> str:
    if colour:
        return f"{COLOURS.get(source, chr(27) + '[36m')}{text}{RESET}"
    left, right = PLAIN.get(source, OTHER)
    return f"{left}{text}{right}"


def marked(pieces: list[str], origins: list[str], colour: bool | None = None) -> str:
    """The text (`pieces`: the text each token settles, see goose.storage.result_files.token_pieces) with each run
    of drafted tokens marked by source: colours on a terminal, else ⟦spine⟧ ⟨branch⟩ ⟪other draft
    source⟫; the target's own (bonus) tokens unmarked."""
    colour = sys.stdout.isatty() if colour is None else colour
    out, i = [], 0
    while i < len(pieces):
        j = i
        while j < len(pieces) and origins[j] == origins[i]:
            j += 1
        text, src = "".join(pieces[i:j]), origins[i]
        out.append(text if src == BONUS or not text else _mark(src, text, colour))
        i = j
    return "".join(out)


def legend(sources: list[str], colour: bool | None = None) -> str:
    colour = sys.stdout.isatty() if colour is None else colour
    parts = [_mark(s, s, colour) for s in sources]
    drafted = f"drafted by {', '.join(parts)}; " if parts else "nothing drafted was accepted; "
    return drafted + "unmarked: the target's own token (bonus)"
