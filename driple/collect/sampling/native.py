"""The optional native reads (``_fastread``, built from ``_fastread.c`` at install), or None.

They make the same readings as the Python loops in :mod:`.proctree` and :mod:`.tcpinfo`, with
less CPU per sample; without a C compiler the package installs and samples in pure Python.
``DRIPLE_SAMPLER_NATIVE=0`` forces the Python path (tests compare the two).
"""
from __future__ import annotations

import os

ABI = 3  # must match ABI in _fastread.c: a stale build (older source) is not used


def load():
    """The ``_fastread`` module if it is built, current and not disabled, else None."""
    if os.environ.get("DRIPLE_SAMPLER_NATIVE", "1") == "0":
        return None
    try:
        from driple.collect.sampling import _fastread
    except ImportError:
        return None
    return _fastread if getattr(_fastread, "ABI", None) == ABI else None


fastread = load()
