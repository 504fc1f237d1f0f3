"""Signals during a job: SIGTERM and SIGHUP end it like Ctrl-C, and clean-up is never cut short.

The launcher and the co-run both run a job (or several) that must always be cleaned up: every
process killed, the sampler stopped, the namespaces removed. :func:`signals_as_interrupt` turns
SIGTERM/SIGHUP into ``KeyboardInterrupt`` while the job runs, so ``finally`` blocks run;
:func:`deferred_interrupts` holds Ctrl-C/SIGTERM/SIGHUP while cleaning up and says whether one
arrived. Both do nothing outside the main thread (Python delivers signals only there).
"""
from __future__ import annotations

import contextlib
import signal
import threading

from driple.interrupts import note as note_signal


def raise_interrupt(signum, frame):
    """Signal handler: raise ``KeyboardInterrupt`` named after the signal (noted for the exit status)."""
    note_signal(signum)
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def signals_as_interrupt():
    """SIGTERM and SIGHUP raise KeyboardInterrupt like Ctrl-C, so clean-up always runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, raise_interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class PendingInterrupt:
    """What :func:`deferred_interrupts` yields: ``fired`` is True once a signal was held."""

    fired = False


@contextlib.contextmanager
def deferred_interrupts():
    """Hold Ctrl-C/SIGTERM/SIGHUP while cleaning up; the yielded ``.fired`` says one arrived."""
    pending = PendingInterrupt()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return

    def _note(signum, frame):
        note_signal(signum)
        pending.fired = True

    old = {s: signal.signal(s, _note) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield pending
    finally:
        for s, h in old.items():
            signal.signal(s, h)
