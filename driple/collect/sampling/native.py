"""The optional native reads and sampling loop (``_fastread``, built from ``_fastread.c``), or None.

They take the same readings as the Python code in :mod:`.proctree`, :mod:`.tcpinfo` and
:mod:`.sampler` with less CPU per sample; without a C compiler the package installs and
samples in pure Python. ``DRIPLE_SAMPLER_NATIVE=0`` forces the Python path (tests compare both).
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
