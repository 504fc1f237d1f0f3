"""User-facing errors.

A :class:`DripleError` carries a message written for the person at the terminal: what went
wrong and what to do. The CLI prints it without a traceback and exits with status 2.
"""


class DripleError(Exception):
    """An error caused by the user's input or environment, explained in plain words."""
