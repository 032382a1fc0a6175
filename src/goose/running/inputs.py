"""From prompts to token ids: turns, raw or chat formatting, and the context limits."""

from __future__ import annotations

from dataclasses import dataclass

from goose.benchmarks.prompts import Prompt, load_benchmark, read_text_file
from goose.core.fingerprints import prompt_fingerprint
from goose.errors import GooseError


def select(prompts: list[Prompt], n: int | None, stratified: bool = False, spread: bool = False) -> list[Prompt]:
    """The first n prompts; with `stratified` the first n of each category (in file order), so a small run
    covers every category; with `spread` n in all, round-robin over the categories (each one's first prompt,
    then each one's second, ...) and decoded in that order, so a grown n appends to the run (a drafter that
    keeps memory across prompts sees the same history as in a fresh run of the larger n)."""
    if n is None:
        return prompts
    if spread:
        by_category: dict[str, list[Prompt]] = {}
        for p in prompts:
            by_category.setdefault(p.category, []).append(p)
        deepest = max((len(ps) for ps in by_category.values()), default=0)
        return [ps[i] for i in range(deepest) for ps in by_category.values() if i < len(ps)][:n]
    if not stratified:
        return prompts[:n]
    taken: dict[str, int] = {}
    out = []
    for p in prompts:
        if taken.get(p.category, 0) < n:
            taken[p.category] = taken.get(p.category, 0) + 1
            out.append(p)
    return out


def benchmark_prompts(spec, say: bool = True) -> tuple[list[Prompt], list[Prompt]]:
    """(every prompt of the spec's benchmark, the ones this run decodes: `n_prompts` of them, spread over the
    categories with `spread_prompts`, else per category where the benchmark is stratified). A benchmark with fewer
    than asked runs what it has, said in one line (`say`): a sweep over benchmarks of different sizes is fine."""
    every = load_benchmark(spec.benchmark, spec.data_dir)
    chosen = select(every, spec.n_prompts, spec.benchmark.stratified, spec.spread_prompts)
    if say and spec.n_prompts is not None:
        bench = spec.benchmark
        where = f"benchmark {bench.name}" + (f" ({bench.path})" if bench.path else "")
        if spec.spread_prompts or not bench.stratified:
            if len(chosen) < spec.n_prompts:
                print(f"[goose] n_prompts={spec.n_prompts} asked, but {where} has {len(every)} prompt(s): running "
                      f"{len(chosen)}", flush=True)
        else:
            counts: dict[str, int] = {}
            for p in every:
                counts[p.category] = counts.get(p.category, 0) + 1
            short = [f"{c or '(none)'}: {k}" for c, k in counts.items() if k < spec.n_prompts]
            if short:
                print(f"[goose] n_prompts={spec.n_prompts} asked of each category, but {where} has fewer in "
                      f"{len(short)} of its {len(counts)} ({', '.join(short)}): running {len(chosen)}", flush=True)
    return every, chosen


@dataclass(frozen=True)
class Turn:
    """One row's question: a prompt, or a later turn of it (after the model's own earlier answers)."""

    id: str
    text: str
    earlier: tuple[str, ...] = ()  # the user turns before it
    category: str = ""

    @property
    def fingerprint(self) -> str:
        return prompt_fingerprint(self.text, self.earlier)


def turns_of(prompt: Prompt) -> list[Turn]:
    """Every turn of a prompt; later turns get ids '<id>#2', '<id>#3', ..."""
    texts = [prompt.text, *prompt.later_turns]
    return [Turn(prompt.id if i == 0 else f"{prompt.id}#{i + 1}", t, tuple(texts[:i]), prompt.category)
            for i, t in enumerate(texts)]


def check_chat_template(tokenizer, chat: bool, model: str = "this model") -> None:
    """chat_template=true needs a tokenizer with a chat template: refused in one line (transformers would raise
    mid-run, with a traceback)."""
    if chat and not getattr(tokenizer, "chat_template", None):
        raise GooseError(f"chat_template=true: the tokenizer of {model} has no chat template to format the prompts "
                         "with; use chat_template=false (raw prompts, the paper's default) or a model whose "
                         "tokenizer_config.json has a chat_template.")


def build_input(tokenizer, history: list[tuple[str, str]], text: str, chat: bool) -> list[int]:
    """Token ids for a turn. Raw (the paper's default): earlier prompts and answers, then the new
    prompt, joined by blank lines. Chat: the tokenizer's chat template."""
    if chat:
        check_chat_template(tokenizer, chat)
        msgs = [m for user, answer in history for m in ({"role": "user", "content": user},
                                                        {"role": "assistant", "content": answer})]
        msgs.append({"role": "user", "content": text})
        out = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        return list(out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out)
    raw = "".join(f"{user}{answer}\n\n" for user, answer in history) + text
    return tokenizer(raw).input_ids


def single_prompt_text(prompt: str | None, prompt_file: str | None) -> str:
    """The text of prompt=... or prompt_file=...; an empty one is refused before the model loads."""
    if prompt_file is None:
        if str(prompt) == "":
            raise GooseError("prompt= is empty: give the text to continue, 'prompt=\"...\"' (or prompt_file=PATH).")
        return str(prompt)
    text = read_text_file(prompt_file, "prompt_file")
    if text == "":
        raise GooseError(f"prompt_file '{prompt_file}' is empty: it needs the text to continue.")
    return text


def check_budget(nodes: int, limit: int | None, auto: bool = False) -> None:
    """A draft of `nodes` must fit beside at least one prompt token in the model's context."""
    if limit is not None and nodes >= limit:
        given = f"budget=auto builds drafts of {nodes} nodes, too many" if auto else f"budget={nodes} is too large"
        raise GooseError(f"{given} for this model: its context holds {limit} positions. Use budget={limit // 2} or "
                         "less.")


def token_room(prompt_id: str, n: int, limit: int | None, max_new_tokens: int) -> int:
    """max_new_tokens, or fewer where the model's context ends first: a benchmark prompt generates until
    the context is full (rows record `capped_at`). It depends on the prompt and the model only, so every
    method and budget stops at the same length (near the end the engine verifies only the draft nodes
    that still fit: goose.engine.single)."""
    length = Length(n, limit)
    if length.room is None:
        return max_new_tokens
    room = min(max_new_tokens, length.room)
    if not length.prompt_fits:
        raise GooseError(f"prompt '{prompt_id}' has {n} tokens: not one new token fits in the model's context of "
                         f"{limit}. Shorten the prompt or use a model with a longer context.")
    return room


@dataclass(frozen=True)
class Length:
    """The length rule, stated once: a prompt of `n` tokens and the `max_new_tokens` asked after it must fit the
    model's context of `limit` positions (None: no limit), and a prompt must leave room for one new token. A
    generation that does not fit is refused, never cut short. run.py's prompt=, bench and the Python API ask it
    through `check_length` (a GooseError); goose-serve asks it of every request and words the refusal as OpenAI's
    400 (goose.serving.params); a benchmark's prompt is capped where the context ends (`token_room`).
    `max_new_tokens` None: none asked (a request without max_tokens)."""

    n: int
    limit: int | None
    max_new_tokens: int | None = None

    @property
    def room(self) -> int | None:
        """New tokens the context holds after the prompt (None: no limit)."""
        return None if self.limit is None else self.limit - self.n

    @property
    def prompt_fits(self) -> bool:
        """At least one new token fits after the prompt."""
        return self.room is None or self.room >= 1

    @property
    def fits(self) -> bool:
        """The prompt and every token asked fit."""
        asked, room = self.max_new_tokens, self.room
        return self.prompt_fits and (room is None or asked is None or asked <= room)

    def reason(self, what: str) -> str:
        """Why it does not fit, with the real limits: a prompt of at most context - max_new_tokens tokens, or
        max_new_tokens of at most context - prompt. `what` names the prompt as the user gave it."""
        limit, n, asked = self.limit, self.n, self.max_new_tokens
        fits = limit - asked
        shorten = (f"shorten the prompt to {fits} tokens or fewer (the context less max_new_tokens)" if fits >= 1 else
                   f"lower max_new_tokens below {limit} and shorten the prompt")
        fit = (f"Lower max_new_tokens to {self.room} or less, or {shorten}" if self.prompt_fits else
               shorten[0].upper() + shorten[1:])
        return f"{what} has {n} tokens; with max_new_tokens={asked} it exceeds the model's context of {limit}. {fit}."


def check_length(what: str, n: int, limit: int | None, max_new_tokens: int) -> None:
    """Refuse a single prompt whose whole generation would not fit (the user asked for that many tokens): the
    `Length` rule's reason as one GooseError. `what` names the prompt as the user gave it: "prompt" (run.py's prompt=
    or prompt_file=), "prompt 'ID'" (bench), "goose.generate: the prompt" (the API)."""
    length = Length(n, limit, max_new_tokens)
    if not length.fits:
        raise GooseError(length.reason(what))
