"""The OpenAI-compatible HTTP app (Starlette, served by uvicorn): /v1/completions and /v1/chat/completions
(streamed as Server-Sent Events or whole), /v1/models, /health, /metrics.

Handlers run on the event loop and never touch the batch: a request is read and checked (goose.serving.params),
handed to the engine thread as a Job (goose.serving.scheduler), and its tokens come back through an asyncio queue
that the engine thread fills with loop.call_soon_threadsafe. A client that goes away is cancelled: a stream's
generator is cancelled by Starlette when the client disconnects, a whole answer's handler watches for the
disconnect itself; either way the request leaves the batch at its next step and its row is free. Every refusal is
OpenAI's error object with the status that says why (400 bad request, 401 key, 404 model or route, 413 body,
429 queue full with Retry-After, 500 engine failure, 503 shutting down).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import threading
import time
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from goose.drafting.contract import Drafter
from goose.engine.batched import BatchEngine
from goose.serving.metrics import Metrics
from goose.serving.params import Ask, Target, parse
from goose.serving.replies import DONE, ApiError, Reply, sse
from goose.serving.scheduler import Draining, Failed, Finished, Job, QueueFull, Scheduler
from goose.serving.text import TextStream


@dataclass
class Served:
    """What a server serves: the batch engine over the model, its tokenizer, the drafter every request's is spawned
    from (armed: goose.running.registry.prepare_drafter), the model's stop ids, and for budget=auto the cost
    surface. `name` is the model name clients ask for; `method` what /v1/models and responses say was run."""

    name: str
    engine: BatchEngine
    tokenizer: object
    template: Drafter
    stop_ids: frozenset[int]
    method: str
    cost: object | None = None
    default_max_tokens: int = 64  # a request without max_tokens (the harness's max_new_tokens)


@dataclass(frozen=True)
class Options:
    queue_size: int = 64  # requests waiting for a row beyond the batch's; one more is a 429
    api_key: str | None = None  # Bearer key the /v1 endpoints ask for (None: open)
    max_body_bytes: int = 16 << 20
    drain_timeout_s: float = 300.0  # at shutdown, how long the engine thread may take to finish what it holds


class Server:
    """One server's state: the target requests are checked against, the scheduler and its thread, the metrics."""

    def __init__(self, served: Served, options: Options):
        self.served, self.options = served, options
        tok = served.tokenizer
        vocab = served.engine.model.config.get_text_config(decoder=True).vocab_size
        self.target = Target(served.name, tok, threading.Lock(), served.engine.max_positions, vocab,
                             served.default_max_tokens)
        self.metrics = Metrics(lambda: self.scheduler.running, lambda: self.scheduler.waiting, served.engine.rows,
                               {"model": served.name, "method": served.method, "rows": str(served.engine.rows),
                                "queue_size": str(options.queue_size)})
        self.scheduler = Scheduler(served.engine, served.template, served.cost, options.queue_size, self.metrics)
        self.draining = False
        self.started = int(time.time())

    def begin_drain(self) -> None:
        """Shutting down: no new request (503), every one in flight or waiting finishes."""
        self.draining = True
        self.scheduler.stop_accepting()

    def authorize(self, request: Request) -> None:
        key = self.options.api_key
        if key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), key.encode()):
            raise ApiError(401, "Incorrect or missing API key: send the header `Authorization: Bearer <key>`",
                           code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})

    def job(self, ask: Ask, deliver) -> Job:
        stops = frozenset() if ask.ignore_eos else self.served.stop_ids
        text = TextStream(self.target.tokenizer, ask.prompt, ask.stops, self.target.lock)
        return Job(ask.prompt, ask.max_tokens, ask.sampling, stops, text, deliver)


async def read_json(request: Request, limit: int):
    size, chunks = 0, []
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"the body is larger than {limit} bytes", code="body_too_large")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "the client went away before its request's body arrived", code="client_gone") from None
    try:
        return json.loads(b"".join(chunks))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the body is not valid JSON: {e}", code="invalid_json") from None


async def generate(request: Request, chat: bool) -> Response:
    server: Server = request.app.state.goose
    server.authorize(request)
    ask = parse(await read_json(request, server.options.max_body_bytes), server.target, chat)
    reply = Reply(chat, server.target.name, server.served.method, ask.prompt if ask.return_token_ids else None)
    loop, events = asyncio.get_running_loop(), asyncio.Queue()

    def deliver(event) -> None:  # the engine thread's way back onto this loop
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody is listening
            loop.call_soon_threadsafe(events.put_nowait, event)

    job = server.job(ask, deliver)
    try:
        server.scheduler.submit(job)
    except QueueFull as e:
        raise ApiError(429, f"every row is taken and {server.options.queue_size} request(s) wait: retry after "
                       f"{e.retry_after} s", kind="rate_limit_exceeded", code="queue_full",
                       headers={"Retry-After": str(e.retry_after)}) from None
    except Draining:
        raise ApiError(503, "the server is shutting down", kind="server_error", code="shutting_down") from None
    if ask.stream:
        return StreamingResponse(stream(server, ask, reply, job, events), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
    return await whole(request, server, reply, job, events)


async def stream(server: Server, ask: Ask, reply: Reply, job: Job, events: asyncio.Queue):
    """The SSE body: a chunk per engine step that settled text (a speculative step may settle several tokens), the
    finish reason on the last, the usage when asked, then [DONE]. Cancelled (the client went away): the request
    leaves the batch."""
    ended = opened = False  # opened: a completion's first chunk (it carries the prompt's ids) went out
    sent = 0
    try:
        if ask.chat:
            yield sse(reply.chunk(None, first=True))
        while True:
            event = await events.get()
            if isinstance(event, Failed):
                ended = True
                yield sse(ApiError(500, event.message, kind="server_error", code="engine_failed").body())
                yield DONE
                return
            sent += len(event.ids)
            usage = ({"prompt_tokens": len(ask.prompt), "completion_tokens": sent,
                      "total_tokens": len(ask.prompt) + sent} if ask.continuous_usage else None)
            ids = event.ids if ask.return_token_ids else None
            if isinstance(event, Finished):
                ended = True
                yield sse(reply.chunk(event.text or (None if ask.chat else ""), ids, event.outcome.reason, usage,
                                      first=not (ask.chat or opened)))
                if ask.include_usage:
                    yield sse(reply.usage_chunk(event.outcome))
                yield DONE
                return
            if event.text or ids:
                yield sse(reply.chunk(event.text, ids, usage=usage, first=not (ask.chat or opened)))
                opened = True
    finally:
        if not ended:
            server.scheduler.cancel(job.id)


async def whole(request: Request, server: Server, reply: Reply, job: Job, events: asyncio.Queue) -> Response:
    """The non-streaming answer, or nothing if the client went away first (the request is cancelled)."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.create_task(gone())
    texts, ids = [], []
    try:
        while True:
            getter = asyncio.create_task(events.get())
            done, _ = await asyncio.wait({getter, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                server.scheduler.cancel(job.id)
                return Response(status_code=499)  # nobody reads it
            event = getter.result()
            if isinstance(event, Failed):
                return error_response(ApiError(500, event.message, kind="server_error", code="engine_failed"))
            texts.append(event.text)
            ids += event.ids
            if isinstance(event, Finished):
                return JSONResponse(reply.whole("".join(texts), ids, event.outcome))
    except asyncio.CancelledError:  # the server stops waiting (shutdown timeout): the request leaves the batch
        server.scheduler.cancel(job.id)
        raise
    finally:
        watcher.cancel()


async def completions(request: Request) -> Response:
    return await generate(request, chat=False)


async def chat_completions(request: Request) -> Response:
    return await generate(request, chat=True)


async def models(request: Request) -> Response:
    server: Server = request.app.state.goose
    server.authorize(request)
    s = server.served
    return JSONResponse({"object": "list", "data": [{
        "id": s.name, "object": "model", "created": server.started, "owned_by": "goose",
        "max_model_len": s.engine.max_positions, "goose": {"method": s.method, "rows": s.engine.rows,
                                                           "queue_size": server.options.queue_size}}]})


async def health(request: Request) -> Response:
    server: Server = request.app.state.goose
    state = {"running": server.scheduler.running, "waiting": server.scheduler.waiting}
    if server.draining or not server.scheduler.thread.is_alive():
        return JSONResponse({"status": "draining" if server.draining else "engine stopped", **state}, 503)
    return JSONResponse({"status": "ok", **state})


async def metrics(request: Request) -> Response:
    server: Server = request.app.state.goose
    return Response(server.metrics.render(), media_type=Metrics.CONTENT_TYPE)


OUTCOME_OF_STATUS = {429: "rejected", 503: "unavailable"}


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), e.status, headers=e.headers)


async def on_error(request: Request, e: Exception) -> Response:
    """Every refusal in OpenAI's shape, counted by outcome."""
    if isinstance(e, HTTPException):  # no such route (404) or method (405)
        e = ApiError(e.status_code, f"{request.method} {request.url.path}: {e.detail}", code=str(e.status_code),
                     headers=dict(e.headers or {}))
    elif not isinstance(e, ApiError):
        e = ApiError(500, f"internal error: {type(e).__name__}: {e}", kind="server_error")
    server: Server = request.app.state.goose
    outcome = OUTCOME_OF_STATUS.get(e.status, "failed" if e.status >= 500 else "invalid")
    server.metrics.requests.labels(outcome).inc()
    return error_response(e)


def make_app(served: Served, options: Options = Options()) -> Starlette:
    """The app over `served`. Its lifespan starts the engine thread, and at shutdown (after uvicorn has stopped
    accepting and finished the responses in flight) lets it finish what it holds and stop."""
    server = Server(served, options)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        server.scheduler.start()
        yield
        server.begin_drain()
        await asyncio.to_thread(server.scheduler.stop, options.drain_timeout_s)

    routes = [Route("/v1/completions", completions, methods=["POST"]),
              Route("/v1/chat/completions", chat_completions, methods=["POST"]),
              Route("/v1/models", models, methods=["GET"]),
              Route("/health", health, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])]
    app = Starlette(routes=routes, lifespan=lifespan,
                    exception_handlers={ApiError: on_error, HTTPException: on_error, Exception: on_error})
    app.state.goose = server
    return app
