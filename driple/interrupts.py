"""Which signal interrupted the command, for its exit status.

The collector turns SIGTERM and SIGHUP into a ``KeyboardInterrupt`` (as Ctrl-C is), so every
process and namespace is cleaned up and finished rows are kept. The handlers :func:`note` the
signal; the CLI then exits with the usual ``128 + signal number`` (:func:`exit_status`): 130
for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP.
"""
from __future__ import annotations

import signal
import threading
from typing import Optional

_received: Optional[int] = None


def note(signum: int) -> None:
    """Record a signal that is being turned into an interrupt (a termination signal is kept
    over a later Ctrl-C)."""
    global _received
    if _received is None or _received == signal.SIGINT:
        _received = int(signum)


def received() -> Optional[int]:
    """The signal noted since :func:`reset`, if any."""
    return _received


def reset() -> None:
    global _received
    _received = None


def exit_status() -> int:
    """``128 + signal``: 130 after Ctrl-C (or nothing noted), 143 after SIGTERM."""
    return 128 + int(_received or signal.SIGINT)


def restore_ctrl_c() -> None:
    """Let SIGINT stop a command started in the background. A job started with ``cmd &`` or
    ``nohup`` inherits SIGINT *ignored*, so ``kill -INT`` (and a supervisor's Ctrl-C) did
    nothing to a background sweep; with Python's handler back it stops like Ctrl-C in a
    terminal (finished rows kept, everything cleaned up). Main thread only."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
