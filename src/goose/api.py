"""The Python API: load a model once, generate with any method.

    import goose
    model = goose.load("smollm2-135m")
    out = goose.generate(model, "def fib(n):", method="goose", budget="auto", max_new_tokens=128)
    print(out.text, out.tau)

`generate` returns exactly the tokens AR decoding returns (greedy, or AR sampling with the same
settings and seed), as every run of run.py does.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from goose.budget import AutoBudget, Budget, CostCurve, cost_curve
from goose.decode import BONUS
from goose.decode import generate as decode
from goose.drafter import Drafter
from goose.engine import Engine
from goose.errors import GooseError
from goose.inputs import DRAFT_EXTRA
from goose.models import ModelIdentity, identify_model, load_model, model_config, model_config_names, stop_ids
from goose.sampling import Sampling

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

    def cost(self) -> CostCurve:
        """The cost curve budget=auto prunes with (measured once per model, device, threads; cached)."""
        if self._cost is None:
            self._cost = cost_curve(self.engine, self.identity, self.device, self.dtype)
        return self._cost


def _model_config(name: str):
    """(conf/model config, how `name` was understood): a config name, else an existing local GGUF file
    or Hugging Face folder, else a hub repo id."""
    from omegaconf import OmegaConf

    if name in model_config_names() and name not in ("hf", "gguf"):
        return model_config(name), f"model config '{name}'"
    path = Path(name).expanduser()
    if path.is_file():
        return model_config("gguf", str(path)), f"local GGUF file {path.resolve()}"
    if path.is_dir():
        return model_config("hf", str(path)), f"local folder {path.resolve()}"
    if HUB_ID.match(name):
        cfg = OmegaConf.create({"name": name.split("/")[-1], "source": "hub", "repo": name, "dtype": "auto",
                                "device": "auto"})
        return cfg, f"Hugging Face hub id {name}"
    raise GooseError(f"cannot load '{name}': not a model config ({', '.join(model_config_names())}), not an "
                     "existing file or folder, and not a hub id (org/name).")


def load(name: str, device: str = "auto", dtype: str = "auto", quiet: bool = False) -> Model:
    """A model by config name (`smollm2-135m`, `vicuna-7b`, ...), local GGUF file or HF folder, or hub id."""
    cfg, how = _model_config(str(name))
    if not quiet:
        print(f"[goose] loading {name} as {how}", file=sys.stderr, flush=True)
    return load_config(cfg, device, dtype)


def load_config(cfg, device: str = "auto", dtype: str = "auto") -> Model:
    """A model from a conf/model config (as run.py composes it)."""
    identity = identify_model(cfg)
    hf, tok, dev, dt = load_model(cfg, device, dtype, identity)
    return Model(hf, tok, Engine(hf), stop_ids(tok, hf), identity, cfg.name, dev, dt)


@dataclass
class Output:
    """What `generate` returns: the text, the token ids, where each token came from, and the stats."""

    text: str
    tokens: list[int]
    origins: list[str]  # per token: a draft source (GOOSE: spine, branch) or "bonus" (the target's own)
    method: str
    tau: float  # tokens per target forward, prefill included
    steps: int  # target forwards
    tokens_per_s: float
    wall_s: float
    stats: dict  # the drafter's counters: drafted and accepted nodes per source, routes, ...

    @property
    def from_source(self) -> dict[str, int]:
        """How many committed tokens each source gave (bonus: the target's own)."""
        counts: dict[str, int] = {}
        for o in self.origins:
            counts[o] = counts.get(o, 0) + 1
        return counts


def _prompt_ids(model: Model, prompt, chat_template: bool) -> list[int]:
    from goose.inputs import build_input

    if isinstance(prompt, str):
        return build_input(model.tokenizer, [], prompt, chat_template)
    if isinstance(prompt, torch.Tensor):
        if prompt.dim() == 2 and prompt.shape[0] == 1:
            prompt = prompt[0]
        if prompt.dim() != 1:
            raise GooseError(f"prompt: a tensor of token ids must be 1-D (or 1 x n); got shape {tuple(prompt.shape)}.")
        prompt = prompt.tolist()
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                             for t in prompt):
        vocab = model.hf.config.vocab_size
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise GooseError(f"prompt: token ids {bad[:5]} are outside this model's vocabulary (0..{vocab - 1}).")
        return list(prompt)
    raise GooseError(f"prompt must be a string, a non-empty list of token ids or a 1-D tensor; got "
                     f"{type(prompt).__name__}.")


def make_method(model: Model, method: str | Drafter, budget: int | str = 60, memory: str | None = None) -> Drafter:
    """A drafter ready for this model: a method name (conf/method/NAME.yaml) with `budget` and `memory`, or
    a drafter instance (its own Config holds its budget; budget="auto" arms pruning on it)."""
    from goose.methods import load_method, make_drafter

    if isinstance(method, Drafter):
        drafter = method
        auto = str(budget) == "auto"
    else:
        known = model.config_name if model.config_name in model_config_names() else "smollm2-135m"
        method_cfg, b, mem = load_method(f"{method}@{budget}" + (f":{memory}" if memory else ""), model=known)
        drafter = make_drafter(method_cfg, b, mem)[0]
        auto = b.auto
    if drafter.capabilities.tokenizer_bound:
        drafter.bind_tokenizer(model.tokenizer, model.config_name)
    if auto:
        if not drafter.capabilities.auto_budget:
            raise GooseError(f"method '{drafter.name}' does not support budget=auto; give a number of nodes.")
        drafter.enable_auto_budget(AutoBudget(model.cost()))
    return drafter


def generate(model: Model, prompt, method: str | Drafter = "goose", budget: int | str = 60,
             max_new_tokens: int = 128, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
             seed: int = 0, memory: str | None = None, stop_at_eos: bool = True,
             chat_template: bool = False) -> Output:
    """Decode `prompt` (a string, a list of token ids or a 1-D tensor) with `method` (a name such as
    "goose", "pld", "tr", "ar", or a Drafter instance). Stops at the tokenizer's EOS (unless
    stop_at_eos=False) and after max_new_tokens. temperature > 0 samples exactly: the tokens AR
    sampling gives with the same seed."""
    if not (isinstance(max_new_tokens, int) and max_new_tokens >= 1):
        raise GooseError(f"max_new_tokens must be an integer >= 1 (got {max_new_tokens!r}).")
    sampling = Sampling(temperature, top_k, top_p, seed)
    nodes = Budget.parse(budget).nodes if not isinstance(method, Drafter) else 1
    drafter = make_method(model, method, budget, memory)
    ids = _prompt_ids(model, prompt, chat_template)
    limit = model.engine.max_positions
    if limit is not None and len(ids) + max_new_tokens + nodes + DRAFT_EXTRA > limit:
        raise GooseError(f"the prompt has {len(ids)} tokens; with max_new_tokens={max_new_tokens} and drafts it "
                         f"exceeds the model's context of {limit}. Lower max_new_tokens or shorten the prompt.")
    gen = decode(model.engine, ids, drafter, max_new_tokens, model.stop_ids if stop_at_eos else frozenset(),
                 None if sampling.greedy else sampling)
    return Output(text=model.tokenizer.decode(gen.tokens, skip_special_tokens=True), tokens=gen.tokens,
                  origins=gen.origins, method=drafter.name, tau=gen.tau, steps=gen.steps,
                  tokens_per_s=gen.tokens_per_s, wall_s=gen.wall_s, stats=gen.stats)


# --- showing where tokens came from --------------------------------------------------------
COLOURS = {"spine": "\033[32m", "branch": "\033[33m"}  # green, yellow; other draft sources: cyan
PLAIN = {"spine": ("[", "]"), "branch": ("{", "}")}  # other draft sources: < >
RESET = "\033[0m"


def marked(tokenizer, tokens: list[int], origins: list[str], colour: bool | None = None) -> str:
    """The text with each run of drafted tokens marked by source: colours on a terminal, else
    [spine] {branch} <other draft source>; the target's own (bonus) tokens unmarked."""
    colour = sys.stdout.isatty() if colour is None else colour
    out, i, done = [], 0, ""
    while i < len(tokens):
        j = i
        while j < len(tokens) and origins[j] == origins[i]:
            j += 1
        # Decode prefixes, not pieces: a piece alone may lose a leading space or half a character.
        upto = tokenizer.decode(tokens[:j], skip_special_tokens=True)
        text, done = upto[len(done):], upto
        src = origins[i]
        if src == BONUS or not text:
            out.append(text)
        elif colour:
            out.append(f"{COLOURS.get(src, chr(27) + '[36m')}{text}{RESET}")
        else:
            left, right = PLAIN.get(src, ("<", ">"))
            out.append(f"{left}{text}{right}")
        i = j
    return "".join(out)


def legend(sources: list[str], colour: bool | None = None) -> str:
    colour = sys.stdout.isatty() if colour is None else colour
    parts = []
    for s in sources:
        if colour:
            parts.append(f"{COLOURS.get(s, chr(27) + '[36m')}{s}{RESET}")
        else:
            left, right = PLAIN.get(s, ("<", ">"))
            parts.append(f"{left}{s}{right}")
    return "drafted by " + ", ".join(parts) + "; unmarked: the target's own token (bonus)"
