"""The drafter contract: what every method implements and everything the runner may ask of it.

A drafter proposes a `Draft` from the committed tokens, the engine verifies it, and the drafter
is told the result (Hugging Face's candidate-generator shape). What a drafter needs from the
engine or the runner is declared once, in `Capabilities`, never probed with `hasattr` or names.

Hyperparameters live in a frozen dataclass per drafter (`Config`): its defaults are the method's
defaults, its `__post_init__` validates them, and `conf/method/<name>.yaml` only overrides them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from goose.engine.draft import Draft, Verification
from goose.errors import GooseError


@dataclass(frozen=True)
class Capabilities:
    topk: int = 0  # top-k of every verified node's logits, handed to accepted()
    harvest_prefill: bool = False  # ... and of every prompt position at prefill, handed to start()
    auto_budget: bool = False  # prunes its drafts to what pays on this hardware under budget=auto
    trace: bool = False  # can record one dict per verification step (trace=true)
    memory: bool = False  # memory=run: keeps state across prompts, so a row depends on the prompts before it
    tokenizer_bound: bool = False  # holds token ids of its own (a datastore): handed the tokenizer (bind_tokenizer)
    autoregressive: bool = False  # AR itself (goose.baselines.ar): its rows are AR's own timing, no AR run beside it


@dataclass(frozen=True)
class NoConfig:
    """A drafter without hyperparameters."""


def configure(cls: type, config, overrides: dict):
    """`cls(**overrides)`, or `config` with `overrides` replaced; validation runs in cls.__post_init__."""
    if config is None:
        return cls(**overrides)
    if not isinstance(config, cls):
        raise GooseError(f"expected a {cls.__name__}, got {type(config).__name__}")
    return dataclasses.replace(config, **overrides) if overrides else config


# What a Config field is to the runner, declared where the field is (never guessed from its name):
# - budget_setting(): nodes per draft incl. the root, set from the top-level `budget`. A drafter without
#   one ignores numeric budgets: its rows record budget=fixed, so a budget sweep runs it once; under
#   budget=auto a drafter with capabilities.auto_budget is pruned all the same and records auto.
# - memory_setting(): the cross-prompt memory mode (MEMORY_MODES), set from the top-level `memory`.
#   `prompt` clears learned state before every prompt, `run` keeps it across the prompts of a run, in
#   prompt order. A drafter without one keeps nothing and records memory=none.
# - data_setting(): a file or folder the drafts depend on (REST's datastore, a user drafter's table):
#   its content, not its path, enters the config hash, so a rebuilt datastore is another configuration.
ROLE = "goose_role"
BUDGET, MEMORY, DATA = "budget", "memory", "data"
MEMORY_MODES = ("prompt", "run")
NO_MEMORY = "none"


def budget_setting(default: int = 60):
    return dataclasses.field(default=default, metadata={ROLE: BUDGET})


def memory_setting(default: str = "prompt"):
    return dataclasses.field(default=default, metadata={ROLE: MEMORY})


def data_setting(default=dataclasses.MISSING):
    return dataclasses.field(default=default, metadata={ROLE: DATA})


def role_fields(config, role: str) -> list[str]:
    """The names of a Config's (class or instance) fields declared with `role`."""
    return [f.name for f in dataclasses.fields(config) if f.metadata.get(ROLE) == role]


def check_roles(config_cls: type, method: str) -> None:
    """A field named budget or memory must say it is one (budget_setting(), memory_setting()): otherwise the
    top-level setting would silently not reach it."""
    for f in dataclasses.fields(config_cls):
        if f.name in (BUDGET, MEMORY) and f.metadata.get(ROLE) != f.name:
            raise GooseError(f"method '{method}': {config_cls.__name__}.{f.name} must be declared with "
                             f"{__name__}.{f.name}_setting(...) so that the top-level {f.name}=... sets it.")
    if len(role_fields(config_cls, BUDGET)) > 1 or len(role_fields(config_cls, MEMORY)) > 1:
        raise GooseError(f"method '{method}': {config_cls.__name__} declares more than one budget or memory field.")


def takes_budget(config) -> bool:
    """Whether a numeric budget changes this drafter's drafts."""
    return bool(role_fields(config, BUDGET))


def check_memory(value, where: str, null_ok: bool = False) -> None:
    """A memory mode (a drafter's Config), or also null (the top-level setting: the method's default)."""
    if value in MEMORY_MODES or (null_ok and value is None):
        return
    null = " or null (each method's paper default)" if null_ok else ""
    raise GooseError(f"{where}: memory must be prompt (state cleared before every prompt) or run (kept across the "
                     f"prompts of a run, in order){null}; got {value!r}.")


def memory_label(config) -> str:
    """The memory mode a row records: the Config's, or `none` for a drafter that keeps nothing."""
    names = role_fields(config, MEMORY)
    return getattr(config, names[0]) if names else NO_MEMORY


def memory_default(config) -> str:
    """The memory mode a drafter's Config defaults to: its method's paper setting (`none`: it keeps nothing)."""
    fields = [f for f in dataclasses.fields(config) if f.metadata.get(ROLE) == MEMORY]
    return fields[0].default if fields else NO_MEMORY


def data_paths(config) -> dict[str, str]:
    """Config field -> the file or folder it names, for every data_setting() field that is set."""
    return {n: str(getattr(config, n)) for n in role_fields(config, DATA) if getattr(config, n) not in (None, "")}


def no_auto_budget(method: str) -> GooseError:
    """The one refusal of budget=auto for a method that cannot prune its drafts (registry and contract alike)."""
    return GooseError(f"method '{method}' does not support budget=auto (it cannot prune its drafts); give a number "
                      "of nodes, e.g. budget=60.")


class Drafter:
    """The drafter contract, with the default of every member (the base proposes a one-node draft: just the root).

    A drafter sees only token ids. A method sets `name`, `Config` and `capabilities` and implements `propose`;
    everything else has a default that does nothing. The core is called for every request, alone or in a batch:
    `start`, `propose`, `origins`, `accepted`, `stop`, `stats`. The optional parts are called only where the run
    or `capabilities` asks: concurrency > 1 (`spawn`, `share_with`, `skipped`), memory=run (`save_memory`,
    `restore_memory`), budget=auto (`enable_auto_budget`, `sized_by_batch`), trace=true (`enable_trace`,
    `take_trace`), token data of its own (`bind_tokenizer`). docs/engine.md tabulates every member
    (tests/drafting/test_contract_table.py keeps the table whole).
    """

    name = "ar"
    Config: type = NoConfig
    capabilities = Capabilities()

    def __init__(self, config=None, **overrides):
        self.config = configure(self.Config, config, overrides)

    # --- the core: every request, alone (goose.running.loop) or in a batch (goose.running.batch_loop) ----------
    def start(self, context: list[int], prefill: Verification) -> None:
        """A new prompt: `context` is prompt + the first generated token (the root). `prefill`
        carries every prompt position's top-k when capabilities.harvest_prefill."""

    def propose(self, context: list[int]) -> Draft:
        """The draft to verify; node 0 is the root, `context[-1]`."""
        return Draft([context[-1]], [-1])

    def origins(self, path: list[int]) -> list[str]:
        """Where the accepted nodes `path[1:]` of the draft just verified came from (one source name
        each), told before `accepted`; tree drafters name their node sources."""
        return ["draft"] * (len(path) - 1)

    def accepted(self, result: Verification, context: list[int]) -> None:
        """After each verify: `result.path` indexes the proposed draft; `context` already holds
        the committed tokens (accepted nodes and the bonus)."""

    def stop(self) -> None:
        """The request is done: nothing more will be committed (SuffixDecoding files its response, which the
        requests after it see under memory=run)."""

    def stats(self) -> dict:
        """Per-prompt counters for the results row (plain numbers or strings)."""
        return {}

    def window_stats(self, tokens: int) -> dict:
        """The counters that can be read over the answer's first `tokens` tokens alone (its loop-free window:
        the forwards whose tokens begin there); the row carries them prefixed `loop_free_`."""
        return {}

    # --- concurrency > 1: one drafter per request in flight -------------------------------------------------
    def spawn(self) -> Drafter:
        """A drafter for another request decoded beside this one (concurrency > 1): the same configuration
        and fresh per-request state, sharing what is kept across prompts under memory=run and read-only data
        (`share_with`)."""
        other = type(self)(self.config)
        self.share_with(other)
        return other

    def share_with(self, other: Drafter) -> None:
        """Hand `other` (a fresh drafter of this class) what the requests in flight share: under memory=run
        what is kept across prompts (tests/drafting/test_contract.py checks that a spawned drafter sees it)."""

    def skipped(self, context: list[int]) -> None:
        """A step verified without a draft of this drafter (a batch that drafts nothing while no width pays):
        `context` already holds the committed token. No propose, no `accepted` for it."""

    # --- memory=run (capabilities.memory) ------------------------------------------------------------------
    def save_memory(self):
        """memory=run: a copy of what is kept across prompts, taken before a prompt so that its timed
        repeats (and a benchmark's passes) each start from the state a single run gives it."""
        return None

    def restore_memory(self, saved) -> None:
        """Put back a state from `save_memory`."""

    # --- budget=auto (capabilities.auto_budget) ------------------------------------------------------------
    def enable_auto_budget(self, auto) -> None:
        """budget=auto: an `AutoBudget` that prunes every draft (capabilities.auto_budget)."""
        raise no_auto_budget(self.name)

    @property
    def auto_budget_enabled(self) -> bool:
        """Whether `enable_auto_budget` armed this instance: it prunes under budget=auto from then on."""
        return False

    @property
    def sized_by_batch(self) -> bool:
        """budget=auto in a batch: drafts carry gains and the batch decides what is verified (and harvested)."""
        return False

    # --- trace=true (capabilities.trace) -------------------------------------------------------------------
    def enable_trace(self) -> None:
        """Record one dict per step until `take_trace` (capabilities.trace)."""

    def take_trace(self) -> list[dict]:
        """The steps recorded since the last call, and start a new record."""
        return []

    # --- token data of its own (capabilities.tokenizer_bound) ----------------------------------------------
    def bind_tokenizer(self, tokenizer, model_name: str) -> None:
        """Once the model is loaded (capabilities.tokenizer_bound): a drafter with token data of its own
        refuses another vocabulary, or builds its default data with this tokenizer on first use."""
