class GooseError(Exception):
    """A problem the user can fix (bad config, missing weights or data); printed without a traceback."""


class MissingLibrary(GooseError):
    """A method's own library is not installed; every other method still works."""
