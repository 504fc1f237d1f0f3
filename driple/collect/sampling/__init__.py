"""Samplers: raw cumulative counters of worker process trees, read at a fixed period.

``SamplerProcess(targets, out_path).start()`` ... ``.stop()`` writes a compressed ``.npz``;
:func:`read_raw` turns it into per-target rates (:mod:`driple.collect.series`). Modules:
``target`` (what to watch), ``proctree`` (CPU clock + statm), ``tcpinfo`` (netlink inet_diag),
``netdev`` (veth and interface totals), ``nvml`` (the only GPU module), ``sampler`` (the loop),
``child`` (the sampler process), ``process`` (its handle in the launcher), ``native`` (the
optional C reads and loop of ``_fastread.c`` for the 100 Hz path; pure Python without them).
Importing this package stays light: no numpy or pandas until data is saved or read.
"""
from __future__ import annotations

from pathlib import Path

from driple.collect.sampling.process import SamplerProcess
from driple.collect.sampling.target import Target


def read_raw(path: str | Path):
    """Read a sampler's ``.npz``; see :func:`driple.collect.series.read_raw`."""
    from driple.collect.series import read_raw as _read_raw

    return _read_raw(path)


__all__ = ["Target", "SamplerProcess", "read_raw"]
