"""The real model served (SmolLM2-135M-Instruct, fp32, CPU, loaded by goose-serve's own loader from run.py's settings):
the official OpenAI client streams a completion and a chat answer at once, and each is offline decoding's tokens
(goose.running.loop.generate on the same model) and their text."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import drafter_for
from live import Live

from goose.engine.single import Engine
from goose.running.inputs import build_input
from goose.running.loop import generate
from goose.serving.command import check_settings, load

pytestmark = pytest.mark.slow
openai = pytest.importorskip("openai")

PROMPT = 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'
QUESTION = "Write a Python function that reverses a string."
N = 32


def test_the_openai_client_streams_smollm2s_offline_tokens():
    served = load(check_settings(["model=smollm2-135m", "method=goose", "budget=60", "concurrency=2", "device=cpu",
                                  "dtype=float32"]), [], None)
    tok = served.tokenizer
    engine = Engine(served.engine.model)
    want = {}
    for key, ids in (("text", build_input(tok, [], PROMPT, False)), ("chat", build_input(tok, [], QUESTION, True))):
        want[key] = generate(engine, ids, drafter_for("goose")[0], N, served.stop_ids).tokens
    with Live(served) as live:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{live.port}/v1", api_key="none", max_retries=0)

        def completion():
            chunks = list(client.completions.create(model="smollm2-135m", prompt=PROMPT, max_tokens=N, stream=True,
                                                    extra_body={"return_token_ids": True}))
            return ("".join(c.choices[0].text for c in chunks),
                    [t for c in chunks for t in c.choices[0].model_extra["token_ids"]])

        def chat():
            chunks = list(client.chat.completions.create(model="smollm2-135m", max_tokens=N, stream=True, messages=[
                {"role": "user", "content": QUESTION}], extra_body={"return_token_ids": True}))
            return ("".join(c.choices[0].delta.content or "" for c in chunks),
                    [t for c in chunks for t in c.choices[0].model_extra.get("token_ids", [])])

        with ThreadPoolExecutor(2) as pool:
            got = {"text": pool.submit(completion), "chat": pool.submit(chat)}
            got = {k: f.result() for k, f in got.items()}
        assert live.idle()
    for key in ("text", "chat"):
        text, ids = got[key]
        assert ids == want[key], key
        assert text == tok.decode(want[key], skip_special_tokens=True), key
