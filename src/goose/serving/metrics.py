"""The server's Prometheus metrics (GET /metrics, prometheus-client's text format), one registry per server.

Counters accumulate over the server's life; tau over any window is goose_generation_tokens_total /
goose_target_forwards_total (tokens per target forward each request took part in, its prefill included), and a
source's share of the tokens is goose_accepted_tokens_total{source} over the generation tokens (`bonus`: the
target's own token after each accepted path; any other source: a drafter's, e.g. GOOSE's spine and branch). The
gauges are read when scraped.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

OUTCOMES = ("finished", "cancelled", "rejected", "invalid", "failed", "unavailable")
LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TAU = (1, 1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 12)


class Metrics:
    """Every metric the server exports. Outcomes: finished (EOS, stop string or max_tokens), cancelled (the client
    went away), rejected (429: the queue was full), invalid (4xx: a bad request), failed (500: the engine raised),
    unavailable (503: shutting down)."""

    CONTENT_TYPE = CONTENT_TYPE_LATEST

    def __init__(self, running: Callable[[], int], waiting: Callable[[], int], rows: int, info: dict[str, str]):
        r = self.registry = CollectorRegistry()
        self.requests = Counter("goose_requests", "Requests by how they ended", ["outcome"], registry=r)
        for o in OUTCOMES:
            self.requests.labels(o)  # every outcome shows from the start, at 0
        self.prompt_tokens = Counter("goose_prompt_tokens", "Prompt tokens of admitted requests", registry=r)
        self.generation_tokens = Counter("goose_generation_tokens", "Tokens generated (returned to clients)",
                                         registry=r)
        self.accepted = Counter("goose_accepted_tokens", "Generated tokens by where they came from: bonus (the "
                                "target's own) or the drafter source whose draft node was accepted", ["source"],
                                registry=r)
        self.forwards = Counter("goose_target_forwards", "Target forwards each request took part in, prefill "
                                "included (tau = generation_tokens / target_forwards)", registry=r)
        self.tau = Histogram("goose_request_tau", "Tokens per target forward of each finished request", registry=r,
                             buckets=TAU)
        self.ttft = Histogram("goose_time_to_first_token_seconds", "From the request's arrival to its first token "
                              "(queueing and prefill included)", registry=r, buckets=LATENCY)
        self.latency = Histogram("goose_request_seconds", "From the request's arrival to its last token",
                                 registry=r, buckets=LATENCY)
        self.draft_s = Counter("goose_draft_seconds", "Seconds drafters spent proposing and learning from "
                               "verifications", registry=r)
        self.verify_s = Counter("goose_verify_seconds", "Seconds of batched verification (forward, walk, cache "
                                "compaction)", registry=r)
        self.prefill_s = Counter("goose_prefill_seconds", "Seconds of prefills (a drafter's prompt harvest "
                                 "included)", registry=r)
        self.steps = Counter("goose_batch_steps", "Batched verification steps", registry=r)
        Gauge("goose_queue_depth", "Requests waiting for a row", registry=r).set_function(waiting)
        Gauge("goose_batch_size", "Requests in flight (rows taken)", registry=r).set_function(running)
        Gauge("goose_batch_rows", "Rows of the batch (the configured concurrency)", registry=r).set(rows)
        Info("goose_server", "What is served", registry=r).info(info)

    def render(self) -> bytes:
        return generate_latest(self.registry)
