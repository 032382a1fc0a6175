"""Served answers are offline decoding's tokens (goose.serving over goose.running.batch_loop), on the tiny model served
by uvicorn in this process: every method of the registry greedy, six requests at once on three rows (so requests
join the running batch as rows free up); sampled requests beside greedy ones draw what offline sampling draws with
the same seed; budget=auto with the batch picking every request's width; a stream's chunks join to the whole
answer's text and ids, token ids are held back while a byte-level character is incomplete, a stop string cuts the
text exactly where it begins; chat applies the tokenizer's chat template."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import many_prompts
from live import EOS, Live, streamed_ids, streamed_text, template_for, tiny_served, tiny_tokenizer

from goose.drafting.budget import AutoBudget, CostCurve
from goose.drafting.cost_surface import CostSurface
from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.running.loop import generate
from goose.running.registry import method_names

STOPS = frozenset({EOS})


def offline(tiny, name: str, prompt: list[int], n: int, store=None, sampling: Sampling | None = None,
            stops=STOPS) -> list[int]:
    """The single-request decode loop's tokens (goose.running.loop.generate), a fresh drafter of the method."""
    return generate(Engine(tiny), prompt, template_for(name, store), n, stops, sampling).tokens


def ask_all(live: Live, bodies: list[dict], path: str = "/v1/completions") -> list[tuple[int, dict]]:
    """Every body posted at once, one client thread each."""
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda b: live.post(path, b), bodies))


def text_of(ids: list[int]) -> str:
    return tiny_tokenizer().decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("name", [pytest.param(m, marks=() if m == "goose" else pytest.mark.integration)
                                  for m in method_names()])
def test_every_method_served_concurrently_returns_its_offline_tokens(name, tiny, store):
    prompts = many_prompts()
    with Live(tiny_served(tiny, name, rows=3, store=store), queue_size=8) as live:
        got = ask_all(live, [{"model": "tiny", "prompt": p, "max_tokens": 24, "return_token_ids": True}
                             for p in prompts])
        assert live.idle()
    for p, (status, body) in zip(prompts, got):
        want = offline(tiny, name, p, 24, store)
        assert status == 200, body
        choice = body["choices"][0]
        assert choice["token_ids"] == want, (name, p)
        assert choice["text"] == text_of(want) and body["prompt_token_ids"] == p
        assert choice["finish_reason"] == ("stop" if want[-1] == EOS else "length")
        assert body["usage"] == {"prompt_tokens": len(p), "completion_tokens": len(want),
                                 "total_tokens": len(p) + len(want)}
        assert sum(body["goose"]["from_source"].values()) == len(want)


@pytest.mark.integration
def test_sampled_requests_beside_greedy_ones_draw_their_offline_tokens(tiny):
    """Per-request sampling in one batch: temperature, top_p, top_k and seed give exactly offline AR sampling's
    tokens for the same seed; greedy requests in the same forwards stay greedy."""
    prompts = many_prompts()
    settings = [None, Sampling(0.8, 0, 0.95, 4), Sampling(1.0, 20, 1.0, 7), None, Sampling(0.7, 0, 1.0, 1),
                Sampling(1.3, 5, 0.9, 0)]
    bodies = []
    for p, s in zip(prompts, settings):
        b = {"prompt": p, "max_tokens": 20, "return_token_ids": True}
        if s is not None:
            b.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k, seed=s.seed)
        bodies.append(b)
    with Live(tiny_served(tiny, "goose", rows=4), queue_size=8) as live:
        got = ask_all(live, bodies)
    for p, s, (status, body) in zip(prompts, settings, got):
        assert status == 200, body
        assert body["choices"][0]["token_ids"] == offline(tiny, "ar", p, 20, sampling=s)
    sampled = [g[1]["choices"][0]["token_ids"] for g, s in zip(got, settings) if s is not None]
    greedy = [offline(tiny, "ar", p, 20) for p, s in zip(prompts, settings) if s is not None]
    assert sampled != greedy  # sampling did draw


@pytest.mark.integration
def test_budget_auto_serves_the_offline_tokens_with_the_batch_picking_widths(tiny):
    template = template_for("goose", budget="auto")
    template.enable_auto_budget(AutoBudget(CostCurve([1, 64], [1.0, 1.0]), defer=True))
    surface = CostSurface([1, 4], [1, 64], [[1.0, 1.3], [1.2, 1.6]])
    prompts = many_prompts()
    with Live(tiny_served(tiny, template=template, rows=4, cost=surface), queue_size=8) as live:
        got = ask_all(live, [{"prompt": p, "max_tokens": 24, "return_token_ids": True} for p in prompts])
    for p, (status, body) in zip(prompts, got):
        assert status == 200 and body["choices"][0]["token_ids"] == offline(tiny, "ar", p, 24)


@pytest.mark.integration
def test_a_streams_chunks_join_to_the_whole_answer(tiny):
    """Completions and chat, streamed and whole: the chunks' text and ids join to the whole answer's; the chat role
    comes first, the finish reason last, usage when asked (include_usage, continuous_usage_stats), then [DONE]."""
    prompts = many_prompts()
    with Live(tiny_served(tiny, "goose", rows=2)) as live:
        for p in prompts[:3]:
            body = {"prompt": p, "max_tokens": 40, "return_token_ids": True, "ignore_eos": True}
            status, whole = live.post("/v1/completions", body)
            events = live.stream("/v1/completions", {**body, "stream_options": {"include_usage": True,
                                                                                 "continuous_usage_stats": True}})
            assert status == 200 and events[-1] == "[DONE]"
            assert streamed_text(events) == whole["choices"][0]["text"] == text_of(whole["choices"][0]["token_ids"])
            assert streamed_ids(events) == whole["choices"][0]["token_ids"] == offline(tiny, "goose", p, 40,
                                                                                            stops=frozenset())
            assert events[0]["prompt_token_ids"] == p and "prompt_token_ids" not in events[1]
            assert events[-2]["choices"] == [] and events[-2]["usage"] == whole["usage"]
            assert events[-3]["choices"][0]["finish_reason"] == "length"
            assert all(e["choices"][0]["finish_reason"] is None for e in events[:-3])
            assert [e["usage"]["completion_tokens"] for e in events[:-2]] == sorted(
                e["usage"]["completion_tokens"] for e in events[:-2])
            assert len(events) > 4  # many chunks: several steps
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "def fib(n):"}]
        status, whole = live.post("/v1/chat/completions", {"messages": messages, "max_tokens": 30,
                                                           "return_token_ids": True})
        events = live.stream("/v1/chat/completions", {"messages": messages, "max_tokens": 30})
        ids = tiny_tokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        assert status == 200 and whole["object"] == "chat.completion" and whole["prompt_token_ids"] == ids
        assert whole["choices"][0]["token_ids"] == offline(tiny, "goose", ids, 30)
        assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert streamed_text(events, chat=True) == whole["choices"][0]["message"]["content"]
        assert events[-2]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


@pytest.mark.integration
def test_a_stop_string_ends_the_answer_exactly_where_it_begins(tiny):
    p = many_prompts()[0]
    full = offline(tiny, "goose", p, 40, stops=frozenset())
    text = text_of(full)
    at = next(i for i in range(8, len(text) - 3) if "\ufffd" not in text[i : i + 3])
    stop = text[at : at + 3]  # three whole characters from the middle of the greedy answer
    cut = text[: text.find(stop)]
    with Live(tiny_served(tiny, "goose", rows=2)) as live:
        body = {"prompt": p, "max_tokens": 40, "ignore_eos": True, "stop": [stop, "never there"],
                "return_token_ids": True}
        status, whole = live.post("/v1/completions", body)
        events = live.stream("/v1/completions", body)
        assert live.idle()  # the stopped request left the batch
    choice = whole["choices"][0]
    assert status == 200 and choice["text"] == cut == streamed_text(events)
    assert choice["finish_reason"] == "stop" == events[-2]["choices"][0]["finish_reason"]
    ids = choice["token_ids"]
    assert ids == full[: len(ids)] and stop in text_of(ids) and stop not in text_of(ids[:-1])
