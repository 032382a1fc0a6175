"""A request's body read into what the engine is asked (`Ask`), or refused with a 400 in OpenAI's error shape.

Every parameter OpenAI's completions and chat completions take is either honoured exactly or refused in one line
saying why (never ignored): sampling is the harness's exact sampling (goose.engine.sampling), so temperature,
top_p, top_k and seed give exactly the tokens offline AR sampling gives; penalties, logit_bias, logprobs, n > 1,
best_of, echo, suffix, tools and structured output are refused. A key no table names is refused as unknown.
Extensions other servers share: top_k, ignore_eos and return_token_ids (vLLM's names), and
stream_options.continuous_usage_stats (what GuideLLM asks for).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from goose.core.values import is_flag, is_number, is_whole
from goose.engine.sampling import Sampling
from goose.errors import GooseError
from goose.running.inputs import Length
from goose.serving.replies import ApiError, refused


@dataclass(frozen=True)
class Target:
    """What a request is checked against: the served name, the tokenizer (and the lock the engine thread shares
    it under), the context, the vocabulary, the new-token limit when a request gives none."""

    name: str
    tokenizer: Any
    lock: threading.Lock
    context: int | None
    vocab: int
    default_max_tokens: int


@dataclass(frozen=True)
class Ask:
    """One request, checked: its prompt ids and everything that decides its tokens and how they are returned."""

    chat: bool
    prompt: list[int]
    max_tokens: int
    sampling: Sampling | None  # None: greedy
    stops: tuple[str, ...]
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    return_token_ids: bool


PENALTY = "goose returns exactly the target's own tokens (greedy, or sampled from its distribution); a penalty " \
          "would change that distribution: leave it 0 or unset"
NEUTRAL = {  # parameter -> (the values it may have, why any other is refused)
    "n": ((1,), "one choice per request; send n requests instead (they join the same batch)"),
    "best_of": ((1,), "one candidate per request; send several requests instead"),
    "presence_penalty": ((0,), PENALTY),
    "frequency_penalty": ((0,), PENALTY),
    "repetition_penalty": ((1,), PENALTY),
    "logit_bias": (({},), PENALTY),
    "logprobs": ((False,), "the verifier returns tokens, not their log-probabilities"),
    "top_logprobs": ((0,), "the verifier returns tokens, not their log-probabilities"),
    "echo": ((False,), "the prompt is not echoed back (return_token_ids returns its ids)"),
    "suffix": (("",), "inserting text before a suffix is not supported"),
    "response_format": (({"type": "text"},), "structured output is not supported: only {\"type\": \"text\"}"),
    "tools": (([],), "tool calling is not supported"),
    "tool_choice": (("none",), "tool calling is not supported"),
}
# Every request parameter the server takes, once: the endpoints that take it, and how. "honoured": `parse` reads and
# checks it (a wrong type or range is a 400 naming it); "neutral": in NEUTRAL, taken at its neutral value and refused
# at any other. A key not here is refused as unknown. tests/serving/test_refusals.py sends each a wrong value.
BOTH, COMPLETION, CHAT_ONLY = ("completions", "chat"), ("completions",), ("chat",)
PARAMETERS: dict[str, tuple[tuple[str, ...], str]] = {
    "model": (BOTH, "honoured"), "stream": (BOTH, "honoured"), "stream_options": (BOTH, "honoured"),
    "max_tokens": (BOTH, "honoured"), "temperature": (BOTH, "honoured"), "top_p": (BOTH, "honoured"),
    "top_k": (BOTH, "honoured"), "seed": (BOTH, "honoured"), "stop": (BOTH, "honoured"), "user": (BOTH, "honoured"),
    "ignore_eos": (BOTH, "honoured"), "return_token_ids": (BOTH, "honoured"),
    "n": (BOTH, "neutral"), "presence_penalty": (BOTH, "neutral"), "frequency_penalty": (BOTH, "neutral"),
    "repetition_penalty": (BOTH, "neutral"), "logit_bias": (BOTH, "neutral"), "logprobs": (BOTH, "neutral"),
    "prompt": (COMPLETION, "honoured"), "suffix": (COMPLETION, "neutral"), "echo": (COMPLETION, "neutral"),
    "best_of": (COMPLETION, "neutral"),
    "messages": (CHAT_ONLY, "honoured"), "max_completion_tokens": (CHAT_ONLY, "honoured"),
    "parallel_tool_calls": (CHAT_ONLY, "honoured"),  # true or false: no tools are taken, so either is honoured
    "top_logprobs": (CHAT_ONLY, "neutral"), "response_format": (CHAT_ONLY, "neutral"), "tools": (CHAT_ONLY, "neutral"),
    "tool_choice": (CHAT_ONLY, "neutral"),
}
COMPLETIONS = {k for k, (where, _) in PARAMETERS.items() if "completions" in where}
CHAT = {k for k, (where, _) in PARAMETERS.items() if "chat" in where}
ROLES = ("system", "developer", "user", "assistant")


def _bad(param: str, what: str, value) -> ApiError:
    return ApiError(400, f"{param} must be {what} (got {value!r})", param=param, code="invalid_parameter")


def _flag(body: dict, key: str) -> bool:
    v = body.get(key)
    if v is None or is_flag(v):
        return bool(v)
    raise _bad(key, "true or false", v)


def _neutral(body: dict) -> None:
    for key, (allowed, why) in NEUTRAL.items():
        v = body.get(key)
        if v is None or any(v == a and type(v) is type(a) or (is_number(v) and is_number(a) and v == a)
                            for a in allowed):
            continue
        raise refused(key, f"{why} (got {v!r})")


def _max_tokens(body: dict, chat: bool) -> int | None:
    given = {k: body[k] for k in (("max_tokens", "max_completion_tokens") if chat else ("max_tokens",))
             if body.get(k) is not None}
    if len(set(map(repr, given.values()))) > 1:
        raise ApiError(400, "max_tokens and max_completion_tokens differ: give one", param="max_tokens")
    for key, v in given.items():
        if not is_whole(v) or v < 1:
            raise _bad(key, "an integer >= 1", v)
        return int(v)
    return None


def _sampling(body: dict) -> Sampling | None:
    t, p, k, seed = (body.get(x) for x in ("temperature", "top_p", "top_k", "seed"))
    for key, v in (("temperature", t), ("top_p", p)):
        if v is not None and not is_number(v):
            raise _bad(key, "a number", v)
    for key, v in (("top_k", k), ("seed", seed)):
        if v is not None and not is_whole(v):
            raise _bad(key, "an integer", v)
    if k == -1:  # vLLM's "off"
        k = 0
    try:  # the harness's checks: temperature 0 or >= 1e-3, top_k >= 0, 0 < top_p <= 1
        s = Sampling(float(t or 0.0), int(k or 0), float(1.0 if p is None else p), int(seed or 0))
    except GooseError as e:
        raise ApiError(400, str(e), param=next((x for x in ("temperature", "top_k", "top_p", "seed")
                                                if x in str(e)), None), code="invalid_parameter") from None
    return None if s.greedy else s


def _stops(body: dict) -> tuple[str, ...]:
    v = body.get("stop")
    if v is None:
        return ()
    stops = [v] if isinstance(v, str) else v
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _bad("stop", "a non-empty string or a list of them", v)
    return tuple(stops)


def _stream_options(body: dict, stream: bool) -> tuple[bool, bool]:
    opts = body.get("stream_options")
    if opts is None:
        return False, False
    if not stream:
        raise ApiError(400, "stream_options is only allowed with stream: true", param="stream_options")
    if not isinstance(opts, dict) or set(opts) - {"include_usage", "continuous_usage_stats"}:
        raise _bad("stream_options", "an object of include_usage and continuous_usage_stats", opts)
    return _flag(opts, "include_usage"), _flag(opts, "continuous_usage_stats")


def check_model(body: dict, target: Target) -> None:
    name = body.get("model")
    if name is not None and name != target.name:
        raise ApiError(404, f"The model `{name}` does not exist: this server serves `{target.name}` (GET /v1/models)",
                       param="model", code="model_not_found")


def _prompt_ids(body: dict, target: Target) -> list[int]:
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]  # a batch of one prompt
    if isinstance(p, str):
        if not p:
            raise _bad("prompt", "a non-empty string or a list of token ids", p)
        with target.lock:
            return list(target.tokenizer(p).input_ids)
    if isinstance(p, list) and p and all(is_whole(t) for t in p):
        bad = [t for t in p if not 0 <= t < target.vocab]
        if bad:
            raise _bad("prompt", f"token ids in 0..{target.vocab - 1}", bad[:5])
        return [int(t) for t in p]
    if isinstance(p, list) and p and all(isinstance(x, (str, list)) for x in p):
        raise refused("prompt", f"one prompt per request (got {len(p)}); send one request each: they join the "
                      "same batch")
    raise _bad("prompt", "a non-empty string or a list of token ids", p)


def _content(m: dict, i: int) -> str:
    c = m.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, list) and all(isinstance(x, dict) for x in c):
        kinds = {x.get("type") for x in c}
        if kinds - {"text"}:
            raise refused(f"messages[{i}].content", f"only text parts are supported (got {sorted(map(str, kinds))})")
        if not all(isinstance(x.get("text"), str) for x in c):
            raise _bad(f"messages[{i}].content", "text parts with a string text", c)
        return "".join(x["text"] for x in c)
    raise _bad(f"messages[{i}].content", "a string or a list of text parts", c)


def _chat_ids(body: dict, target: Target) -> list[int]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("messages", "a non-empty list of messages", msgs)
    plain = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise _bad(f"messages[{i}]", f"an object with a role of {', '.join(ROLES)}", m)
        if extra := sorted(set(m) - {"role", "content"}):
            raise refused(f"messages[{i}].{extra[0]}", "messages carry a role and a content only")
        plain.append({"role": m["role"], "content": _content(m, i)})
    tok = target.tokenizer
    if not getattr(tok, "chat_template", None):
        raise ApiError(400, f"the tokenizer of {target.name} has no chat template to format messages with: use "
                       "/v1/completions with a prompt", param="messages", code="no_chat_template")
    try:
        with target.lock:
            out = tok.apply_chat_template(plain, add_generation_prompt=True, tokenize=True)
    except Exception as e:  # the template refuses the conversation (roles out of order, ...): the client's to fix
        raise ApiError(400, f"the chat template refused these messages: {e}", param="messages") from None
    return list(out["input_ids"] if hasattr(out, "keys") else out)


def _fits(n: int, max_tokens: int | None, target: Target, prompt: str = "prompt") -> int:
    """max_tokens, checked against the context by the length rule (goose.running.inputs.Length: a prompt and its
    answer must fit, refused, never cut short), its refusal worded as OpenAI's 400; none asked: the server's
    default, within the room the prompt leaves."""
    length, limit = Length(n, target.context, max_tokens), target.context
    if not length.prompt_fits:
        raise ApiError(400, f"This model's maximum context length is {limit} tokens; the prompt has {n}: shorten it",
                       param=prompt, code="context_length_exceeded")
    if max_tokens is None:
        return target.default_max_tokens if length.room is None else min(target.default_max_tokens, length.room)
    if not length.fits:
        raise ApiError(400, f"This model's maximum context length is {limit} tokens; {n + max_tokens} were asked "
                       f"({n} in the prompt, {max_tokens} max_tokens): ask for {length.room} or fewer",
                       param="max_tokens", code="context_length_exceeded")
    return max_tokens


def parse(body: Any, target: Target, chat: bool) -> Ask:
    """The request body of /v1/completions (`chat` False) or /v1/chat/completions, checked; ApiError if refused."""
    if not isinstance(body, dict):
        raise ApiError(400, f"the body must be a JSON object (got {type(body).__name__})")
    known = CHAT if chat else COMPLETIONS
    if unknown := sorted(set(body) - known):
        raise refused(unknown[0], f"not a parameter this server takes ({', '.join(sorted(known))})")
    check_model(body, target)
    _neutral(body)
    if body.get("user") is not None and not isinstance(body["user"], str):
        raise _bad("user", "a string", body["user"])
    stream = _flag(body, "stream")
    _flag(body, "parallel_tool_calls")
    include_usage, continuous = _stream_options(body, stream)
    sampling, stops, max_tokens = _sampling(body), _stops(body), _max_tokens(body, chat)
    ids = _chat_ids(body, target) if chat else _prompt_ids(body, target)
    max_tokens = _fits(len(ids), max_tokens, target, "messages" if chat else "prompt")
    return Ask(chat, ids, max_tokens, sampling, stops, _flag(body, "ignore_eos"), stream, include_usage, continuous,
               _flag(body, "return_token_ids"))
