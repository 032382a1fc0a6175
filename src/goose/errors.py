class GooseError(Exception):
    """A problem the user can fix (bad config, missing weights or data); printed without a traceback."""
