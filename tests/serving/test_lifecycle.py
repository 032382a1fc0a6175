"""A request's life in the server under load (goose.serving.scheduler, goose.serving.app): a client that goes away
mid-stream or mid-wait is cancelled and its row freed (nothing left in the batch, the engine or the scheduler) and
the server goes on; over rows + queue the next request gets a 429 with Retry-After; shutdown (what SIGTERM starts)
refuses new requests and finishes every one in flight and waiting; an engine failure fails the requests it held with
a 500 and the server serves the next; /metrics parses and adds up."""

import json
import socket
import threading
import time

import pytest
from conftest import many_prompts
from live import Live, sse_events, template_for, tiny_served

from goose.engine.single import Engine
from goose.running.loop import generate

pytestmark = pytest.mark.integration  # the tiny model served end to end over HTTP

LONG = 900  # tokens: far more than a test waits for (the tiny model's context is 1024)


def open_stream(live: Live, body: dict):
    """A streamed request left open: (its connection, its events as they come)."""
    c = live.connection()
    c.request("POST", "/v1/completions", json.dumps({**body, "stream": True}), {"Content-Type": "application/json"})
    r = c.getresponse()
    assert r.status == 200
    return c, sse_events(r)


def hang_up(c) -> None:
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def until(check, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, "timed out"
        time.sleep(0.02)


def test_a_client_gone_mid_stream_frees_its_row_and_the_server_goes_on(tiny):
    prompts = many_prompts()
    with Live(tiny_served(tiny, "goose", rows=2)) as live:
        c, events = open_stream(live, {"prompt": prompts[1], "max_tokens": LONG, "ignore_eos": True})
        first = next(events)
        assert first["choices"][0]["finish_reason"] is None and live.server.scheduler.running == 1
        hang_up(c)
        assert live.idle()
        m = live.metrics()
        assert m["goose_requests_total{outcome=cancelled}"] == 1 and m["goose_requests_total{outcome=finished}"] == 0
        assert m["goose_batch_size"] == 0 and m["goose_queue_depth"] == 0
        status, body = live.post("/v1/completions", {"prompt": prompts[0], "max_tokens": 16, "return_token_ids": True})
        assert status == 200
        assert body["choices"][0]["token_ids"] == generate(Engine(tiny), prompts[0], template_for("goose"), 16,
                                                           frozenset({257})).tokens


def test_a_client_gone_before_its_whole_answer_frees_its_row(tiny):
    with Live(tiny_served(tiny, "ar", rows=1)) as live:
        c = live.connection()
        c.request("POST", "/v1/completions", json.dumps({"prompt": many_prompts()[0], "max_tokens": LONG,
                                                         "ignore_eos": True}), {"Content-Type": "application/json"})
        until(lambda: live.server.scheduler.running == 1)
        hang_up(c)
        assert live.idle()
        assert live.metrics()["goose_requests_total{outcome=cancelled}"] == 1
        assert live.post("/v1/completions", {"prompt": many_prompts()[1], "max_tokens": 4})[0] == 200


def test_over_rows_and_queue_the_next_request_gets_a_429_with_retry_after(tiny):
    body = {"prompt": many_prompts()[0], "max_tokens": LONG, "ignore_eos": True}
    with Live(tiny_served(tiny, "ar", rows=1), queue_size=1) as live:
        running, events = open_stream(live, body)
        next(events)
        waiting, _ = open_stream(live, body)
        until(lambda: live.server.scheduler.outstanding == 2)
        status, headers, raw = live.request("POST", "/v1/completions", {**body, "max_tokens": 4})
        err = json.loads(raw)["error"]
        assert status == 429 and int(headers["retry-after"]) >= 1 and err["code"] == "queue_full"
        assert set(err) == {"message", "type", "param", "code"}
        health = json.loads(live.request("GET", "/health")[2])
        assert health == {"status": "ok", "running": 1, "waiting": 1}
        m = live.metrics()
        assert (m["goose_batch_size"], m["goose_queue_depth"], m["goose_batch_rows"]) == (1, 1, 1)
        hang_up(waiting)
        hang_up(running)
        assert live.idle()
        assert live.post("/v1/completions", {**body, "max_tokens": 4})[0] == 200
        m = live.metrics()
        assert m["goose_requests_total{outcome=rejected}"] == 1 and m["goose_requests_total{outcome=cancelled}"] == 2


def test_shutdown_refuses_new_requests_and_finishes_those_in_flight_and_waiting(tiny):
    """What SIGTERM does (goose.serving.command: begin_drain, then uvicorn's should_exit): the streams in flight and
    waiting run to their last token and [DONE]; a request after it is refused (503, or the port is closed)."""
    prompts = many_prompts()
    n = 64
    live = Live(tiny_served(tiny, "goose", rows=1), queue_size=2)
    streams = [open_stream(live, {"prompt": p, "max_tokens": n, "ignore_eos": True, "return_token_ids": True})
               for p in prompts[:2]]
    first = next(streams[0][1])
    until(lambda: live.server.scheduler.outstanding == 2)
    stopping = threading.Thread(target=live.stop)
    stopping.start()
    until(lambda: live.server.draining)
    try:
        status, _, raw = live.request("POST", "/v1/completions", {"prompt": prompts[2], "max_tokens": 4})
        assert status == 503 and b"shutting_down" in raw
        status, _, raw = live.request("GET", "/health")
        assert status == 503 and json.loads(raw)["status"] == "draining"
    except OSError:  # uvicorn had closed the port already
        pass
    got = [first["choices"][0]["token_ids"] + [t for e in streams[0][1] if e != "[DONE]"
                                               for t in e["choices"][0]["token_ids"]],
           [t for e in streams[1][1] if e != "[DONE]" for c in e["choices"] for t in c["token_ids"]]]
    stopping.join(60)
    assert not live.thread.is_alive() and not live.server.scheduler.thread.is_alive()
    for p, ids in zip(prompts, got):
        assert ids == generate(Engine(tiny), p, template_for("goose"), n).tokens
    assert live.server.scheduler.outstanding == 0


def test_an_engine_failure_fails_the_requests_it_held_and_the_server_goes_on(tiny):
    served = tiny_served(tiny, "goose", rows=2)
    verify = served.engine.verify
    broken = {"left": 1}

    def fails_once(*a, **kw):
        if broken["left"]:
            broken["left"] -= 1
            raise RuntimeError("injected")
        return verify(*a, **kw)

    served.engine.verify = fails_once
    with Live(served) as live:
        status, body = live.post("/v1/completions", {"prompt": many_prompts()[0], "max_tokens": 16})
        assert status == 500 and body["error"]["code"] == "engine_failed" and "injected" in body["error"]["message"]
        assert live.idle() and live.server.scheduler.engine.active == 0
        events = live.stream("/v1/completions", {"prompt": many_prompts()[1], "max_tokens": 16})
        assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] is not None
        assert live.metrics()["goose_requests_total{outcome=failed}"] == 1


def test_the_metrics_parse_and_add_up(tiny):
    prompts = many_prompts()
    with Live(tiny_served(tiny, "goose", rows=2)) as live:
        answers = [live.post("/v1/completions", {"prompt": p, "max_tokens": 20})[1] for p in prompts[:4]]
        assert live.idle()  # every request's bookkeeping done (a busy machine may read the metrics before it)
        m = live.metrics()
    made = sum(a["usage"]["completion_tokens"] for a in answers)
    assert m["goose_requests_total{outcome=finished}"] == 4
    assert m["goose_prompt_tokens_total"] == sum(len(p) for p in prompts[:4])
    assert m["goose_generation_tokens_total"] == made
    assert sum(v for k, v in m.items() if k.startswith("goose_accepted_tokens_total")) == made
    assert m["goose_accepted_tokens_total{source=bonus}"] < made  # drafts were accepted
    assert m["goose_target_forwards_total"] == sum(a["goose"]["target_forwards"] for a in answers)
    assert m["goose_request_tau_count"] == 4 and m["goose_time_to_first_token_seconds_count"] == 4
    assert m["goose_request_seconds_count"] == 4 and m["goose_batch_steps_total"] > 0
    assert min(m["goose_draft_seconds_total"], m["goose_verify_seconds_total"], m["goose_prefill_seconds_total"]) > 0
    assert (m["goose_batch_size"], m["goose_queue_depth"], m["goose_batch_rows"]) == (0, 0, 2)
    assert m["goose_server_info{method=goose,model=tiny,queue_size=64,rows=2}"] == 1


def test_a_newcomers_first_token_goes_out_before_the_steps_verification(tiny):
    """Held verifications: a streamed request's first chunk (its prefill's token) still arrives, since the engine
    thread sends what admission gave before it verifies; released, the answer is offline decoding's."""
    prompts = many_prompts()
    gate = threading.Event()
    with Live(tiny_served(tiny, "goose", rows=2)) as live:
        batch = live.server.scheduler.batch
        verify = batch.verify
        batch.verify = lambda: gate.wait(60) and verify()
        try:
            c, events = open_stream(live, {"prompt": prompts[0], "max_tokens": 16, "return_token_ids": True})
            c.sock.settimeout(20)  # before the split, this first chunk waited for the held verification
            first = next(events)
            assert first["choices"][0]["token_ids"] and not gate.is_set()
        finally:
            gate.set()
        rest = list(events)
        assert rest[-1] == "[DONE]"
        ids = [t for e in [first, *rest[:-1]] for ch in e["choices"] for t in ch.get("token_ids", [])]
        assert ids == generate(Engine(tiny), prompts[0], template_for("goose"), 16, frozenset({257})).tokens
        assert live.idle()
