"""The Python API's arguments (issue #46 item 7, a new user's trial): each mistake is one line naming goose.generate,
goose.load or goose.make_method, what is wrong and how to fix it, before anything runs; numpy's integers and bools
taken, an empty prompt said for what it was, the real prompt limit given."""

import pytest

from goose.errors import GooseError

TEXT = "abcabcabd abcabcabd abcabcab"


@pytest.fixture(scope="module")
def model(tiny_folder):
    import goose

    return goose.load(str(tiny_folder), quiet=True)


@pytest.mark.parametrize("kwargs, says", [
    (dict(chat_template="no"), "chat_template must be True or False (got 'no', a str)"),
    (dict(stop_at_eos="False"), "stop_at_eos must be True or False (got 'False', a str)"),
    (dict(stop_at_eos=None), "stop_at_eos must be True or False (got None)"),
    (dict(max_new_tokens=4.0), "max_new_tokens must be an integer >= 1 (got 4.0, a float)"),
    (dict(top_k="3"), "top_k must be an integer >= 0"),
    (dict(seed=1.5), "seed must be an integer"),
    (dict(temperature="0.7"), "temperature must be a number"),
    (dict(top_p=None), "top_p must be a number"),
    (dict(budget="60"), "budget must be an integer number of draft nodes >= 1 or 'auto' (got '60', a str)"),
    (dict(budget=True), "budget must be an integer"),
    (dict(memory=True), "memory must be None (the method's default), 'prompt' or 'run'"),
    (dict(method=3), "method must be a method name such as 'goose' or a Drafter instance (got 3, an int)"),
])
def test_every_api_argument_is_type_checked(model, kwargs, says):
    import goose

    with pytest.raises(GooseError) as e:
        goose.generate(model, TEXT, **{"max_new_tokens": 4, **kwargs})
    assert str(e.value).startswith("goose.generate: ") and says in str(e.value)


def test_api_load_and_make_method_check_their_arguments_too(model, tiny_folder):
    import goose

    for call, says in ((lambda: goose.generate("smollm2-135m", TEXT), "model must be what goose.load returns"),
                       (lambda: goose.make_method(model, "goose", budget="60"), "goose.make_method: budget"),
                       (lambda: goose.load(str(tiny_folder), quiet="yes"), "goose.load: quiet must be True or False"),
                       (lambda: goose.load(str(tiny_folder), device=0), "goose.load: device must be a str"),
                       (lambda: goose.load(7), "goose.load: name must be a str")):
        with pytest.raises(GooseError, match=says):
            call()


def test_api_integers_of_any_integer_type_are_taken(model):
    import numpy as np

    import goose

    ids = model.tokenizer(TEXT).input_ids
    want = goose.generate(model, ids, method="ar", max_new_tokens=6)
    got = goose.generate(model, ids, method="ar", max_new_tokens=np.int64(6), top_k=np.int64(0), seed=np.int32(0),
                         budget=np.int64(16))
    assert got.tokens == want.tokens


def test_api_prompt_messages_speak_of_the_api(model):
    import goose

    with pytest.raises(GooseError) as e:
        goose.generate(model, "x" * 1000, method="ar", max_new_tokens=100)
    msg = str(e.value)
    assert msg.startswith("goose.generate: the prompt has 1000 tokens; with max_new_tokens=100")
    assert "prompt '" not in msg
    assert "Lower max_new_tokens to 24 or less" in msg
    with pytest.raises(GooseError, match="goose.generate: the prompt is an empty string"):
        goose.generate(model, "", method="ar", max_new_tokens=4)


def test_api_takes_numpy_bools_and_names_numpy_types_when_refusing(model):
    import numpy as np

    import goose

    ids = model.tokenizer(TEXT).input_ids
    want = goose.generate(model, ids, method="ar", max_new_tokens=4)
    got = goose.generate(model, ids, method="ar", max_new_tokens=4, stop_at_eos=np.bool_(True),
                         chat_template=np.bool_(False))
    assert got.tokens == want.tokens
    with pytest.raises(GooseError, match=r"stop_at_eos must be True or False \(got .*, a numpy.float64\)"):
        goose.generate(model, ids, method="ar", max_new_tokens=4, stop_at_eos=np.float64(1.0))


def test_api_says_what_an_empty_prompt_was(model):
    import numpy as np
    import torch

    import goose

    for prompt, says in ((torch.tensor([], dtype=torch.long), "got an empty tensor of shape (0,)"),
                         (np.array([], dtype=np.int64), "got an empty numpy array of shape (0,)"),
                         ([], "got an empty list"), ([1, "a"], "got a list holding 'a', not a token id")):
        with pytest.raises(GooseError) as e:
            goose.generate(model, prompt, method="ar", max_new_tokens=4)
        assert says in str(e.value), str(e.value)


def test_api_gives_the_real_prompt_limit(model):
    """The tiny model holds 1024 positions: with max_new_tokens=4 a prompt of 1020 tokens fits, 1021 does not, and the
    message for a prompt of 1024 or more says 1020, not 'fewer than 1024'."""
    import goose

    for n in (1023, 2000):
        with pytest.raises(GooseError) as e:
            goose.generate(model, [1] * n, method="ar", max_new_tokens=4)
        msg = str(e.value)
        assert "shorten the prompt to 1020 tokens or fewer" in msg.lower() and "fewer than 1024" not in msg, msg
    assert len(goose.generate(model, [1] * 1020, method="ar", max_new_tokens=4, stop_at_eos=False).tokens) == 4


@pytest.mark.parametrize("kwargs, says", [
    (dict(method="gooose"), "goose.generate: unknown method 'gooose' (did you mean goose?); choose from ar,"),
    (dict(top_p=2), "goose.generate: top_p must be a number in (0, 1]"),
    (dict(budget=-5), "goose.generate: budget must be a whole number of nodes >= 1 or auto (got -5)"),
    (dict(prompt=[99999]), "goose.generate: prompt: token ids [99999] are outside this model's vocabulary"),
])
def test_every_refusal_names_the_function_typed_and_a_near_method(model, kwargs, says):
    """The fresh-clone trial of 2026-12-06: a range refused by the shared rules came without 'goose.generate:', and
    an unknown method without the close match run.py and goose-serve give."""
    import goose

    with pytest.raises(GooseError) as e:
        goose.generate(model, kwargs.pop("prompt", TEXT), max_new_tokens=4, **kwargs)
    assert str(e.value).startswith(says), str(e.value)
    with pytest.raises(GooseError, match=r"^goose\.make_method: budget must be a whole number"):
        goose.make_method(model, "pld", budget=0)
