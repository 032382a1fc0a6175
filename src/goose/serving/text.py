"""A request's text as its tokens arrive: incremental detokenization and stop strings.

Tokens are decoded with a small window of the tokens before them (the prefix/read offsets of Hugging Face's TGI and
vLLM): a character split over several byte-level tokens is held back until its last byte arrives (the decoded window
then ends in U+FFFD), and a SentencePiece token keeps the leading space that decoding it alone would drop. Text that
could still become the start of a stop string is held back too, so a stream never shows text that a later token
turns into a stop; a stop string cuts the text exactly where it begins and ends the request. What is streamed joins
to exactly what a non-streaming answer returns: both are this object's output.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

REPLACEMENT = "\ufffd"  # what decoding gives for bytes that do not yet make a whole character
CONTEXT_TOKENS = 5  # prompt tokens decoded before the first new one (a SentencePiece token's leading space)


class TextStream:
    """The text of one request's new tokens. `push(token)` one token at a time (True when a stop string has ended
    the text), `take()` what can be shown now, `finish()` everything not yet shown. `lock` guards the tokenizer:
    the engine thread decodes while the HTTP thread encodes the next request's prompt."""

    def __init__(self, tokenizer, prompt: Sequence[int], stops: Sequence[str] = (), lock: threading.Lock | None = None):
        self.tok, self.stops, self.lock = tokenizer, tuple(stops), lock or threading.Lock()
        tail = list(prompt[-CONTEXT_TOKENS:])
        # A prompt given as token ids may end inside a character: then the new tokens are decoded on their own
        # (their text must not complete the prompt's character).
        if tail and self._decode(tail).endswith(REPLACEMENT):
            tail = []
        self.ids = tail
        self.prefix = 0  # the window: ids[prefix:read] is text already taken into `text`
        self.read = len(tail)
        self.text = ""  # the new tokens' text so far (cut at a stop string)
        self.shown = 0  # characters of `text` handed out
        self.stopped = False
        self.longest_stop = max((len(s) for s in self.stops), default=0)

    def _decode(self, ids: list[int]) -> str:
        with self.lock:
            return self.tok.decode(ids, skip_special_tokens=True)

    def _advance(self, final: bool = False) -> None:
        """Take the window's new text into `text` when it ends in whole characters (or always, at the end)."""
        before = self._decode(self.ids[self.prefix : self.read])
        after = self._decode(self.ids[self.prefix :])
        if len(after) > len(before) and (final or not after.endswith(REPLACEMENT)):
            self.text += after[len(before) :]
            self.prefix, self.read = self.read, len(self.ids)

    def _cut_at_stop(self) -> bool:
        if not self.stops:
            return False
        start = max(0, self.shown - self.longest_stop)  # a stop can only begin in what was held back
        found = [i for i in (self.text.find(s, start) for s in self.stops) if i >= 0]
        if found:
            self.text = self.text[: min(found)]
            self.stopped = True
        return self.stopped

    def push(self, token: int) -> bool:
        """One new token; returns True when a stop string ended the text (push no more)."""
        if self.stopped:
            return True
        self.ids.append(int(token))
        self._advance()
        return self._cut_at_stop()

    def _held(self) -> int:
        """How many trailing characters could still begin a stop string."""
        end = self.text[max(self.shown, len(self.text) - self.longest_stop + 1) :]
        for k in range(len(end), 0, -1):
            if any(s.startswith(end[-k:]) for s in self.stops):
                return k
        return 0

    def take(self) -> str:
        """The text that no later token can change: everything new but a possible stop string's beginning."""
        upto = len(self.text) - (0 if self.stopped else self._held())
        out = self.text[self.shown : upto]
        self.shown = max(self.shown, upto)
        return out

    def finish(self) -> str:
        """The request ended: decode what was held back (a last partial character shows as U+FFFD, as a
        non-streaming decode shows it) and hand out the rest."""
        if not self.stopped and self.read < len(self.ids):
            self._advance(final=True)
            self._cut_at_stop()
        out = self.text[self.shown :]
        self.shown = len(self.text)
        return out
