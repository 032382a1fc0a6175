"""What a value of each kind is, judged once: a whole number, a number, a flag (never a bool taken for a number, nor
a truthy "no" for true). run.py's settings (goose.running.spec), the Python API (goose.api) and goose-serve's
requests (goose.serving.params) ask these and only word the refusal in their own form: Hydra's one line, a
GooseError naming the argument, an OpenAI-shaped 400 naming the parameter.

numpy's scalars count as what they are (an numpy.int64 is a whole number, a numpy.bool_ a flag), so a value computed
with numpy is taken as Python's own would be.
"""

from __future__ import annotations

import numbers


def is_whole(value, low: int | None = None) -> bool:
    """An integer (Python's or numpy's), not a bool, and at least `low` where given."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and (low is None or value >= low)


def is_number(value) -> bool:
    """A real number (an integer or a float, Python's or numpy's), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_flag(value) -> bool:
    """True or False (Python's bool or numpy's bool_); nothing truthy stands in for them."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"))


def got(value) -> str:
    """What was given, for a refusal: the value and, where its text does not say it, its type (numpy's as
    numpy.NAME)."""
    if value is None or isinstance(value, bool):
        return f"got {value!r}"
    kind = type(value).__name__
    if type(value).__module__ == "numpy":
        kind = f"numpy.{kind}"
    return f"got {value!r}, {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
