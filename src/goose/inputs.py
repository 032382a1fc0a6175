"""From prompts to token ids: turns, raw or chat formatting, and the length checks."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig

from goose.benchmarks import STRATIFIED, Prompt, load_prompts
from goose.errors import GooseError

DRAFT_EXTRA = 128  # positions a draft may take beyond its budget (chain extension, long chains)


def select(prompts: list[Prompt], n: int | None, stratified: bool = False) -> list[Prompt]:
    """The first n prompts, or with `stratified` the first n of each category (in file order), so a
    small run covers every category."""
    if n is None:
        return prompts
    if not stratified:
        return prompts[:n]
    taken: dict[str, int] = {}
    out = []
    for p in prompts:
        if taken.get(p.category, 0) < n:
            taken[p.category] = taken.get(p.category, 0) + 1
            out.append(p)
    return out


def benchmark_prompts(cfg: DictConfig) -> tuple[list[Prompt], list[Prompt]]:
    """(every prompt of the configured benchmark, the ones this run decodes: `n_prompts` of them, per
    category where the benchmark is stratified)."""
    b = cfg.benchmark
    every = load_prompts(b.name, cfg.data_dir, b.get("path"), b.get("turns"))
    return every, select(every, cfg.n_prompts, b.name in STRATIFIED)


def turns_of(prompt: Prompt) -> list[tuple[str, str]]:
    """(row id, user text) per turn; later turns get ids '<id>#2', '<id>#3', ..."""
    texts = [prompt.text, *prompt.later_turns]
    return [(prompt.id if i == 0 else f"{prompt.id}#{i + 1}", t) for i, t in enumerate(texts)]


def build_input(tokenizer, history: list[tuple[str, str]], text: str, chat: bool) -> list[int]:
    """Token ids for a turn. Raw (the paper's default): earlier prompts and answers, then the new
    prompt, joined by blank lines. Chat: the tokenizer's chat template."""
    if chat:
        msgs = [m for user, answer in history for m in ({"role": "user", "content": user},
                                                        {"role": "assistant", "content": answer})]
        msgs.append({"role": "user", "content": text})
        out = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)
    raw = "".join(f"{user}{answer}\n\n" for user, answer in history) + text
    return tokenizer(raw).input_ids


def single_prompt_text(cfg: DictConfig) -> str:
    if cfg.prompt_file is None:
        return str(cfg.prompt)
    path = Path(os.path.expanduser(str(cfg.prompt_file)))
    if not path.is_file():
        raise GooseError(f"prompt_file '{path}' does not exist.")
    return path.read_text(encoding="utf-8")


def _check_budget(cfg: DictConfig, limit: int, drafts: int) -> None:
    if drafts + 1 >= limit:
        fix = (f"Use budget={limit - DRAFT_EXTRA - 2} or less." if limit > DRAFT_EXTRA + 2 else
               "Its context is too short for tree drafts: use method=ar.")
        raise GooseError(
            f"budget={cfg.budget} is too large for this model: a draft may take up to {drafts} positions "
            f"(the budget plus {DRAFT_EXTRA} for chain extension), which does not fit its context of {limit} "
            f"tokens. {fix}"
        )


def token_room(prompt_id: str, n: int, limit: int | None, cfg: DictConfig, nodes: int) -> int:
    """max_new_tokens, or fewer where the model's context ends first: the prompt, its generation and one
    draft (`nodes` per draft, incl. root, plus chain extension) must fit. It depends on the prompt, the
    budget and the model only, so AR and every method at one budget stop at the same length. A benchmark
    run caps such prompts (rows record `capped_at`) rather than refusing them."""
    if limit is None:
        return cfg.max_new_tokens
    drafts = nodes + DRAFT_EXTRA
    _check_budget(cfg, limit, drafts)
    room = min(cfg.max_new_tokens, limit - n - drafts)
    if room < 1:
        raise GooseError(
            f"prompt '{prompt_id}' has {n} tokens; with drafts of up to {drafts} nodes not one new token fits in "
            f"the model's context of {limit}. Shorten the prompt or use a model with a longer context."
        )
    return room


def check_length(prompt_id: str, n: int, limit: int | None, cfg: DictConfig, nodes: int) -> None:
    """Refuse a prompt whose whole generation (max_new_tokens) and drafts would not fit (a single prompt: the
    user asked for that many tokens)."""
    if limit is None:
        return
    drafts = nodes + DRAFT_EXTRA
    _check_budget(cfg, limit, drafts)
    if n + cfg.max_new_tokens + drafts > limit:
        raise GooseError(
            f"prompt '{prompt_id}' has {n} tokens; with max_new_tokens={cfg.max_new_tokens} and drafts of "
            f"up to {drafts} nodes it exceeds the model's context of {limit}. Lower max_new_tokens or "
            "shorten the prompt."
        )
