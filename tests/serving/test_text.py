"""A request's text as its tokens arrive (goose.serving.text.TextStream), on the byte-level tokenizer: a character
split over tokens shows once whole, what is shown joins to the tokenizer's own decode of the tokens (invalid bytes,
a prompt ending inside a character included), and stop strings cut the text exactly where they begin, never
showing a stop's beginning that a later token completes."""

import random

import pytest
from tiny import byte_tokenizer

from goose.serving.text import TextStream

TOK = byte_tokenizer()


def ids(text: str) -> list[int]:
    return TOK(text).input_ids


def shown(stream: TextStream, tokens: list[int]) -> tuple[list[str], bool]:
    """What each push shows, then the finish; and whether a stop string ended it."""
    out = []
    for t in tokens:
        stopped = stream.push(t)
        out.append(stream.take())
        if stopped:
            break
    out.append(stream.finish())
    return out, stream.stopped


def test_a_character_split_over_tokens_shows_once_whole():
    tokens = ids("aé€😀b")
    assert len(tokens) == 1 + 2 + 3 + 4 + 1  # one token per byte
    parts, _ = shown(TextStream(TOK, ids("x")), tokens)
    assert parts == ["a", "", "é", "", "", "€", "", "", "", "😀", "b", ""]


@pytest.mark.parametrize("seed", range(20))
def test_what_is_shown_joins_to_the_tokenizers_decode(seed):
    rng = random.Random(seed)
    sample = ids("naïve café ☕ 🚀 ok") + [rng.randrange(256) for _ in range(40)]  # any byte, valid UTF-8 or not
    rng.shuffle(sample)
    prompt = ids("héllo")[:2]  # ends inside "é": the new tokens must not complete it
    parts, _ = shown(TextStream(TOK, prompt), sample)
    assert "".join(parts) == TOK.decode(sample, skip_special_tokens=True)


def test_a_stop_string_cuts_exactly_and_its_beginning_is_held_back():
    tokens = ids("say hello world")
    parts, stopped = shown(TextStream(TOK, ids(">"), ["lo w", "zzz"]), tokens)
    assert stopped and "".join(parts) == "say hel"
    assert not any("lo" in p for p in parts)  # never shown, not even before the stop completed
    parts, stopped = shown(TextStream(TOK, ids(">"), ["say"]), tokens)  # at the very start
    assert stopped and "".join(parts) == ""
    parts, stopped = shown(TextStream(TOK, ids(">"), ["hello!"]), tokens)  # a beginning that never completes
    assert not stopped and "".join(parts) == "say hello world"
    parts, _ = shown(TextStream(TOK, ids(">"), ["é"]), ids("caé"))  # a stop inside a split character
    assert "".join(parts) == "ca"


def test_nothing_more_shows_after_a_stop():
    s = TextStream(TOK, ids(">"), ["b"])
    assert [s.push(t) for t in ids("ab")] == [False, True]
    assert s.push(ids("c")[0]) and s.take() == "a" and s.finish() == "" and s.text == "a"
