"""The official OpenAI Python client against the server (the tiny model, uvicorn in this process): models, completions
and chat completions, streamed and whole, give the offline tokens' text; its errors are the exceptions the client
raises for OpenAI's own (404 NotFoundError, 400 BadRequestError, 401 AuthenticationError, 429 RateLimitError)."""

import pytest
from conftest import many_prompts
from live import EOS, Live, template_for, tiny_served, tiny_tokenizer

from goose.engine.sampling import Sampling
from goose.engine.single import Engine
from goose.running.loop import generate

pytestmark = pytest.mark.integration  # the tiny model served end to end over HTTP
openai = pytest.importorskip("openai")


def offline(tiny, ids: list[int], n: int) -> list[int]:
    return generate(Engine(tiny), ids, template_for("goose"), n, frozenset({EOS})).tokens


def test_the_openai_client_streams_and_gets_whole_answers(tiny):
    tok = tiny_tokenizer()
    prompt = "def add(a, b):\n    return a + b\n\ndef add(a, b):\n"
    ids = tok(prompt).input_ids
    want = tok.decode(offline(tiny, ids, 24), skip_special_tokens=True)
    with Live(tiny_served(tiny, "goose", rows=2), api_key="k") as live:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{live.port}/v1", api_key="k", max_retries=0)
        assert [m.id for m in client.models.list()] == ["tiny"]
        whole = client.completions.create(model="tiny", prompt=prompt, max_tokens=24)
        assert whole.choices[0].text == want and whole.usage.completion_tokens == 24
        parts = [c.choices[0].text for c in client.completions.create(model="tiny", prompt=prompt, max_tokens=24,
                                                                     stream=True) if c.choices]
        assert "".join(parts) == want and len(parts) > 2
        extra = client.completions.create(model="tiny", prompt=ids, max_tokens=24, extra_body={
            "return_token_ids": True, "top_k": 5, "temperature": 0.9, "seed": 11})
        sampled = generate(Engine(tiny), ids, template_for("ar"), 24, frozenset({EOS}),
                           Sampling(0.9, 5, 1.0, 11)).tokens
        assert extra.choices[0].model_extra["token_ids"] == sampled
        messages = [{"role": "user", "content": "hello"}]
        chat_ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        chat_ids = list(chat_ids["input_ids"] if hasattr(chat_ids, "keys") else chat_ids)
        chat_want = tok.decode(offline(tiny, chat_ids, 20), skip_special_tokens=True)
        chat = client.chat.completions.create(model="tiny", messages=messages, max_tokens=20)
        assert chat.choices[0].message.content == chat_want and chat.choices[0].message.role == "assistant"
        chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_completion_tokens=20,
                                                     stream=True, stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == chat_want
        assert chunks[-1].usage.completion_tokens == chat.usage.completion_tokens and not chunks[-1].choices


def test_the_openai_client_raises_its_own_errors(tiny):
    with Live(tiny_served(tiny, "ar", rows=1), queue_size=0, api_key="k") as live:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{live.port}/v1", api_key="k", max_retries=0)
        prompt = many_prompts()[0]
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="gpt-4", prompt=prompt, max_tokens=4)
        with pytest.raises(openai.BadRequestError) as e:
            client.completions.create(model="tiny", prompt=prompt, max_tokens=4, logprobs=1)
        assert e.value.body["param"] == "logprobs"
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=client.base_url, api_key="wrong", max_retries=0).models.list()
        stream = client.completions.create(model="tiny", prompt=prompt, max_tokens=900, stream=True,
                                           extra_body={"ignore_eos": True})
        next(iter(stream))  # in flight: the one row is taken, no queue
        with pytest.raises(openai.RateLimitError):
            client.completions.create(model="tiny", prompt=prompt, max_tokens=4)
        stream.close()
        assert live.idle()
        assert client.completions.create(model="tiny", prompt=prompt, max_tokens=4).usage.completion_tokens == 4
