"""What the server answers, in the shapes OpenAI's API gives: errors, completions, chat completions, their
streamed chunks (Server-Sent Events) and usage. Field names follow OpenAI's reference; `token_ids` and
`prompt_token_ids` (asked with return_token_ids) are vLLM's names for the same extension; `goose` carries what the
harness adds (the method, target forwards, tau, tokens by source) and clients ignore.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field


class ApiError(Exception):
    """A request the server refuses: its HTTP status and OpenAI's error object (message, type, param, code)."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def refused(param: str, why: str) -> ApiError:
    """A parameter the server cannot honour exactly: 400, never ignored."""
    return ApiError(400, f"{param}: {why}", param=param, code="unsupported_parameter")


@dataclass
class Outcome:
    """How a request ended, what it cost and where its tokens came from."""

    reason: str  # "stop" (EOS or a stop string) or "length" (max_tokens or the context)
    prompt_tokens: int
    completion_tokens: int
    steps: int  # target forwards the request took part in, prefill included
    from_source: dict[str, int] = field(default_factory=dict)

    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}

    def goose(self, method: str) -> dict:
        tau = self.completion_tokens / self.steps if self.steps else 0.0
        return {"method": method, "target_forwards": self.steps, "tau": round(tau, 4),
                "from_source": dict(self.from_source)}


class Reply:
    """One request's answer, streamed or whole: its id, creation time and shapes for /v1/completions (`chat`
    False) or /v1/chat/completions."""

    def __init__(self, chat: bool, model: str, method: str, prompt_ids: list[int] | None = None):
        self.chat, self.model, self.method = chat, model, method
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.prompt_ids = prompt_ids  # returned when return_token_ids asked for them

    def _envelope(self, chunk: bool) -> dict:
        kind = ("chat.completion.chunk" if chunk else "chat.completion") if self.chat else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def _ids(self, choice: dict, ids: list[int] | None) -> dict:
        if self.prompt_ids is not None and ids is not None:
            choice["token_ids"] = list(ids)
        return choice

    def whole(self, text: str, ids: list[int], outcome: Outcome) -> dict:
        """The non-streaming answer."""
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                      "finish_reason": outcome.reason}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": outcome.reason}
        out = {**self._envelope(False), "choices": [self._ids(choice, ids)], "usage": outcome.usage(),
               "goose": outcome.goose(self.method)}
        if self.prompt_ids is not None:
            out["prompt_token_ids"] = list(self.prompt_ids)
        return out

    def chunk(self, text: str | None, ids: list[int] | None = None, reason: str | None = None,
              usage: dict | None = None, first: bool = False) -> dict:
        """One streamed chunk: new text (None: no content key, as a chat chunk that only finishes), the ids it
        came from, the finish reason on the last; `usage` with continuous_usage_stats. `first`: the stream's first
        chunk, which carries the prompt's ids when they were asked for."""
        if self.chat:  # a chat's first chunk says the role, and nothing else
            delta: dict = {"role": "assistant", "content": ""} if first else {}
            if text is not None and not first:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": reason}
        out = {**self._envelope(True), "choices": [self._ids(choice, ids)]}
        if first and self.prompt_ids is not None:
            out["prompt_token_ids"] = list(self.prompt_ids)
        if usage is not None:
            out["usage"] = usage
        return out

    def usage_chunk(self, outcome: Outcome) -> dict:
        """stream_options.include_usage: a last chunk with no choices and the usage (and what goose adds)."""
        return {**self._envelope(True), "choices": [], "usage": outcome.usage(), "goose": outcome.goose(self.method)}


def sse(data: dict | str) -> str:
    """One Server-Sent Event: `data: {json}` and a blank line (`data: [DONE]` ends a stream)."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"


DONE = sse("[DONE]")
