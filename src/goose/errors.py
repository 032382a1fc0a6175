class GooseError(Exception):
    """A problem the user can fix (bad config, missing weights or data); printed without a traceback."""


class MissingLibrary(GooseError):
    """A method's own library is not installed; every other method still works."""


class NonFiniteLogits(GooseError):
    """A verified forward's logits hold NaN or inf: no token is chosen from them and the run stops (goose.engine.single
    says which forward, the dtype and the fix). `row`: the batch row whose logits they were (a batched forward);
    `tokens`: what the request had committed before that forward, when known: nothing after it is ever returned."""

    def __init__(self, message: str = "NaN or inf logits", row: int | None = None, tokens: list[int] | None = None):
        super().__init__(message)
        self.row, self.tokens = row, tokens
