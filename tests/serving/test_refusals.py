"""What the server refuses, and how (goose.serving.params, goose.serving.app): every parameter it cannot honour
exactly is a 400 naming it (never ignored), a malformed body, an unknown model or route, a prompt or max_tokens
past the context, a missing API key and an over-large body each get their status in OpenAI's error shape, and
the server answers the next request as before."""

import json
import threading

import pytest
from conftest import many_prompts
from live import Live, tiny_served, tiny_tokenizer
from tiny import byte_tokenizer

from goose.serving.params import CHAT, COMPLETIONS, NEUTRAL, PARAMETERS, Target, parse
from goose.serving.replies import ApiError

TOK = tiny_tokenizer()
TARGET = Target("tiny", TOK, threading.Lock(), 1024, 260, 64)


def refusal(body, chat: bool = False) -> ApiError:
    with pytest.raises(ApiError) as e:
        parse(body, TARGET, chat)
    return e.value


@pytest.mark.parametrize("param,value", [("n", 2), ("best_of", 3), ("presence_penalty", 0.5),
                                         ("frequency_penalty", -1), ("repetition_penalty", 1.1),
                                         ("logit_bias", {"5": 10}), ("logprobs", 1), ("logprobs", 0), ("echo", True),
                                         ("suffix", "end"), ("top_logprobs", 2), ("response_format",
                                                                                   {"type": "json_object"}),
                                         ("tools", [{"type": "function"}]), ("tool_choice", "auto"),
                                         ("functions", []), ("guided_json", {})])
def test_a_parameter_the_server_cannot_honour_is_refused_by_name(param, value):
    chat = param in CHAT - COMPLETIONS
    body = {"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"}
    e = refusal({**body, param: value}, chat)
    assert e.status == 400 and e.param == param and param in e.message
    assert set(e.body()["error"]) == {"message", "type", "param", "code"}
    if param in NEUTRAL:  # its neutral value is taken (the client asked for nothing the server cannot give)
        neutral = NEUTRAL[param][0][0]
        parse({**body, param: neutral}, TARGET, chat)


WRONG = {  # per parameter of PARAMETERS, a value the server must refuse (a wrong type, range or a non-neutral value)
    "model": "other", "stream": "yes", "stream_options": "x", "max_tokens": 0, "temperature": "hot", "top_p": 0,
    "top_k": 1.5, "seed": True, "stop": [1], "user": 7, "ignore_eos": "x", "return_token_ids": 1,
    "n": 2, "presence_penalty": 0.5, "frequency_penalty": -1, "repetition_penalty": 1.1, "logit_bias": {"5": 10},
    "logprobs": 1, "prompt": "", "suffix": "end", "echo": True, "best_of": 3, "messages": [],
    "max_completion_tokens": -1, "parallel_tool_calls": "x", "top_logprobs": 2,
    "response_format": {"type": "json_object"}, "tools": [{"type": "function"}], "tool_choice": "auto",
}


@pytest.mark.parametrize("param", sorted(PARAMETERS))
def test_every_parameter_the_server_takes_is_honoured_or_refused(param):
    """The one list of parameters (goose.serving.params.PARAMETERS), each sent a wrong value on every endpoint that
    takes it: refused in OpenAI's shape naming it (404 for an unknown model), never taken and ignored; a neutral
    one is taken at its neutral value."""
    where, how = PARAMETERS[param]
    assert how in ("honoured", "neutral") and (how == "neutral") == (param in NEUTRAL)
    for chat in (False, True):
        if ("chat" if chat else "completions") not in where:
            assert param not in (CHAT if chat else COMPLETIONS)
            continue
        body = {"messages": [{"role": "user", "content": "hi"}]} if chat else {"prompt": "hi"}
        stream = {"stream": True} if param == "stream_options" else {}
        e = refusal({**body, **stream, param: WRONG[param]}, chat)
        assert e.status == (404 if param == "model" else 400) and e.param == param, (param, e.message)
        assert set(e.body()["error"]) == {"message", "type", "param", "code"}
        if how == "neutral":
            parse({**body, param: NEUTRAL[param][0][0]}, TARGET, chat)
    assert set(WRONG) == set(PARAMETERS) == CHAT | COMPLETIONS and set(NEUTRAL) <= set(PARAMETERS)


def test_parallel_tool_calls_is_true_or_false():
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    for v in (True, False, None):
        parse({**chat, "parallel_tool_calls": v}, TARGET, True)
    e = refusal({**chat, "parallel_tool_calls": "x"}, True)
    assert e.status == 400 and e.param == "parallel_tool_calls" and "true or false" in e.message


@pytest.mark.parametrize("body,param", [({"prompt": "x", "max_tokens": 0}, "max_tokens"),
                                        ({"prompt": "x", "max_tokens": "9"}, "max_tokens"),
                                        ({"prompt": "x", "temperature": -1}, "temperature"),
                                        ({"prompt": "x", "temperature": "hot"}, "temperature"),
                                        ({"prompt": "x", "temperature": 1e-5}, "temperature"),
                                        ({"prompt": "x", "top_p": 0}, "top_p"),
                                        ({"prompt": "x", "top_k": 1.5}, "top_k"),
                                        ({"prompt": "x", "seed": True}, "seed"),
                                        ({"prompt": "x", "stop": ""}, "stop"),
                                        ({"prompt": "x", "stop": [1]}, "stop"),
                                        ({"prompt": "x", "stream": "yes"}, "stream"),
                                        ({"prompt": "x", "stream_options": {"include_usage": True}},
                                         "stream_options"),
                                        ({"prompt": ""}, "prompt"),
                                        ({"prompt": [1, 999]}, "prompt"),
                                        ({"prompt": ["a", "b"]}, "prompt"),
                                        ({}, "prompt")])
def test_a_bad_value_is_a_400_naming_the_parameter(body, param):
    e = refusal(body)
    assert e.status == 400 and e.param == param, e.message


def test_sampling_settings_are_the_harness_s_own():
    ask = parse({"prompt": "x", "temperature": 0.7, "top_p": 0.9, "top_k": -1, "seed": 3}, TARGET, False)
    s = ask.sampling
    assert (s.temperature, s.top_p, s.top_k, s.seed) == (0.7, 0.9, 0, 3)  # top_k -1: off, as vLLM says it
    assert parse({"prompt": "x", "top_p": 0.5, "seed": 9}, TARGET, False).sampling is None  # temperature 0: greedy
    ask = parse({"prompt": "hi", "stop": "\n", "ignore_eos": True, "model": "tiny"}, TARGET, False)
    assert ask.stops == ("\n",) and ask.ignore_eos and ask.max_tokens == 64
    assert ask.prompt == TOK("hi").input_ids


def test_the_context_bounds_prompt_and_max_tokens():
    assert parse({"prompt": [1] * 1000}, TARGET, False).max_tokens == 24  # the default, cut to what fits
    assert refusal({"prompt": [1] * 1024}).code == "context_length_exceeded"
    e = refusal({"prompt": [1] * 1000, "max_tokens": 25})
    assert e.code == "context_length_exceeded" and e.param == "max_tokens" and "24 or fewer" in e.message
    assert parse({"prompt": [1] * 1000, "max_tokens": 24}, TARGET, False).max_tokens == 24


@pytest.mark.parametrize("n,asked", [(1000, 24), (1000, 25), (1023, 1), (1024, 1), (1024, None), (1023, None),
                                     (10, 1014), (10, 1015), (1100, 5)])
def test_the_server_and_run_py_hold_one_length_rule(n, asked):
    """#71: the length rule exists once (goose.running.inputs.Length); the server answers what it decides in OpenAI's
    shape, run.py and the API in their GooseError, so both refuse exactly the same prompts and max_tokens."""
    from goose.errors import GooseError
    from goose.running.inputs import check_length

    body = {"prompt": [1] * n, **({} if asked is None else {"max_tokens": asked})}
    try:
        parse(body, TARGET, False)
        served = True
    except ApiError as e:
        assert e.code == "context_length_exceeded"
        served = False
    try:
        check_length("prompt", n, 1024, asked if asked is not None else 1)
        offline = True
    except GooseError as e:
        assert "exceeds the model's context of 1024" in str(e)
        offline = False
    assert served == offline == (n + (asked or 1) <= 1024)


def test_chat_messages_are_checked_and_formatted_by_the_template():
    ask = parse({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                            {"type": "text", "text": "b"}]}],
                 "max_completion_tokens": 5}, TARGET, True)
    assert TOK.decode(ask.prompt) == "<user>ab\n<assistant>" and ask.max_tokens == 5
    assert refusal({"messages": []}, True).param == "messages"
    assert refusal({"messages": [{"role": "tool", "content": "x"}]}, True).param == "messages[0]"
    assert refusal({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, True).param == "messages[0].name"
    image = [{"type": "image_url", "image_url": {"url": "x"}}]
    assert refusal({"messages": [{"role": "user", "content": image}]}, True).param == "messages[0].content"
    assert refusal({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                    "max_completion_tokens": 4}, True).param == "max_tokens"
    bare = Target("tiny", byte_tokenizer(), TARGET.lock, 1024, 260, 64)
    with pytest.raises(ApiError) as e:
        parse({"messages": [{"role": "user", "content": "x"}]}, bare, True)
    assert e.value.code == "no_chat_template"


@pytest.mark.integration
def test_every_refusal_over_http_has_its_status_and_the_server_goes_on(tiny):
    p = many_prompts()[0]
    good = {"model": "tiny", "prompt": p, "max_tokens": 8}
    cases = [  # (method, path, body, status, code)
        ("POST", "/v1/completions", b"{not json", 400, "invalid_json"),
        ("POST", "/v1/completions", b"\xff\xfe", 400, "invalid_json"),
        ("POST", "/v1/completions", b"[1, 2]", 400, None),
        ("POST", "/v1/completions", {**good, "model": "gpt-4"}, 404, "model_not_found"),
        ("POST", "/v1/completions", {**good, "prompt": [1] * 1100}, 400, "context_length_exceeded"),
        ("POST", "/v1/completions", {**good, "max_tokens": 2000}, 400, "context_length_exceeded"),
        ("POST", "/v1/completions", {**good, "logprobs": 1}, 400, "unsupported_parameter"),
        ("POST", "/v1/completions", {**good, "n": 3}, 400, "unsupported_parameter"),
        ("POST", "/v1/completions", {**good, "temperature": -0.5}, 400, "invalid_parameter"),
        ("POST", "/v1/chat/completions", {"messages": "hi"}, 400, "invalid_parameter"),
        ("POST", "/v1/embeddings", good, 404, "404"),
        ("GET", "/v1/completions", None, 405, "405"),
        ("POST", "/v1/completions", b"x" * 10000, 413, "body_too_large"),
    ]
    with Live(tiny_served(tiny, "goose", rows=2), max_body_bytes=8192) as live:
        for method, path, body, status, code in cases:
            got, headers, raw = live.request(method, path, body)
            err = json.loads(raw)["error"]
            assert (got, err["code"]) == (status, code), (path, body, raw)
            assert set(err) == {"message", "type", "param", "code"} and err["message"]
            assert headers["content-type"] == "application/json"
            ok, answer = live.post("/v1/completions", good)  # and the server goes on
            assert ok == 200 and answer["usage"]["completion_tokens"] == 8
        assert live.idle()  # every request's bookkeeping done (a busy machine may read the metrics before it)
        m = live.metrics()
        assert m["goose_requests_total{outcome=invalid}"] == len(cases)
        assert m["goose_requests_total{outcome=finished}"] == len(cases)


@pytest.mark.integration
def test_an_api_key_guards_the_v1_endpoints_only(tiny):
    with Live(tiny_served(tiny, "ar", rows=1), api_key="sesame") as live:
        body = {"prompt": many_prompts()[0], "max_tokens": 4}
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sesame"}):
            status, h, raw = live.request("POST", "/v1/completions", body, headers)
            assert status == 401 and b"invalid_api_key" in raw and h["www-authenticate"] == "Bearer"
        assert live.request("GET", "/v1/models", None)[0] == 401
        assert live.request("POST", "/v1/completions", body, {"Authorization": "Bearer sesame"})[0] == 200
        assert live.request("GET", "/v1/models", None, {"Authorization": "Bearer sesame"})[0] == 200
        assert live.request("GET", "/health", None)[0] == 200 and live.request("GET", "/metrics", None)[0] == 200
