"""Helpers of the serving tests: the tiny model served by uvicorn in a thread of this process on a free 127.0.0.1
port (`Live`), and plain HTTP against it (the standard library's http.client: every byte and every disconnect is
the test's own)."""

from __future__ import annotations

import http.client
import json
import threading
import time

import uvicorn
from conftest import drafter_for
from tiny import byte_tokenizer

from goose.engine.batched import BatchEngine
from goose.serving.app import Options, Served, make_app
from goose.serving.command import listen

EOS = 257  # the tiny model's
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


def tiny_tokenizer():
    """The byte tokenizer, with a small chat template so /v1/chat/completions has one to apply."""
    tok = byte_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    return tok


def template_for(name: str, store=None, budget: str | None = None):
    """A method's drafter as run.py resolves it, bound to the byte tokenizer where it needs one (REST)."""
    spec = name if budget is None else f"{name}@{budget}"
    drafter, _ = drafter_for(spec, extra=[f"rest_datastore={store}"] if store is not None else [])
    if drafter.capabilities.tokenizer_bound:
        drafter.bind_tokenizer(byte_tokenizer(), "tiny")
    return drafter


def tiny_served(model, name: str = "goose", rows: int = 3, store=None, template=None, cost=None,
                max_tokens: int = 24) -> Served:
    tmpl = template if template is not None else template_for(name, store)
    return Served("tiny", BatchEngine(model, rows, profile=True), tiny_tokenizer(), tmpl, frozenset({EOS}), name,
                  cost, max_tokens)


class Live:
    """`served` behind the app, uvicorn in a thread; a context manager (stopped as SIGTERM stops it: uvicorn's
    should_exit, then the app's shutdown)."""

    def __init__(self, served: Served, **options):
        self.app = make_app(served, Options(**options))
        self.server = self.app.state.goose
        sock = listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.uvicorn = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="on",
                                                     timeout_graceful_shutdown=30))
        self.thread = threading.Thread(target=self.uvicorn.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.time() + 30
        while not self.uvicorn.started:
            assert time.time() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.02)

    def __enter__(self) -> Live:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self, timeout: float = 60) -> None:
        self.server.begin_drain()
        self.uvicorn.should_exit = True
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the server did not stop"

    def connection(self, timeout: float = 60) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method: str, path: str, body=None, headers: dict | None = None) -> tuple[int, dict, bytes]:
        """(status, headers, body) of one request; `body` a dict (sent as JSON) or raw bytes."""
        c = self.connection()
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        c.request(method, path, data, {"Content-Type": "application/json", **(headers or {})})
        r = c.getresponse()
        out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        c.close()
        return out

    def post(self, path: str, body, **kw) -> tuple[int, dict]:
        status, _, raw = self.request("POST", path, body, **kw)
        return status, json.loads(raw)

    def stream(self, path: str, body: dict) -> list:
        """Every SSE event of a streamed answer, parsed (the last is the string '[DONE]')."""
        c = self.connection()
        c.request("POST", path, json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200, r.read()
        assert r.getheader("content-type", "").startswith("text/event-stream")
        events = list(sse_events(r))
        c.close()
        return events

    def metrics(self) -> dict[str, float]:
        """/metrics parsed by prometheus_client's own parser: {sample name and labels: value}."""
        from prometheus_client.parser import text_string_to_metric_families

        status, headers, raw = self.request("GET", "/metrics")
        assert status == 200 and headers["content-type"].startswith("text/plain")
        out = {}
        for family in text_string_to_metric_families(raw.decode()):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                out[s.name + (f"{{{labels}}}" if labels else "")] = s.value
        return out

    def idle(self, timeout: float = 30) -> bool:
        """Whether the batch is empty within `timeout`: no row taken, nothing waiting, no request held."""
        sched = self.server.scheduler
        deadline = time.time() + timeout
        while time.time() < deadline:
            if (sched.outstanding == 0 and not sched.batch.flights and not sched.batch.queue and not sched.jobs
                    and sched.engine.active == 0):
                return True
            time.sleep(0.02)
        return False


def sse_events(response):
    """The `data:` payloads of an SSE response, JSON-decoded ('[DONE]' as the string), read line by line."""
    while True:
        line = response.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if line.startswith("data: "):
            data = line[len("data: ") :]
            yield data if data == "[DONE]" else json.loads(data)


def streamed_text(events: list, chat: bool = False) -> str:
    parts = []
    for e in events[:-1]:
        for c in e["choices"]:
            parts.append((c["delta"].get("content") or "") if chat else c["text"])
    return "".join(parts)


def streamed_ids(events: list) -> list[int]:
    return [t for e in events[:-1] for c in e["choices"] for t in c.get("token_ids", [])]
