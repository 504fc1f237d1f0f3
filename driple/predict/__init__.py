"""What schedulers call: a shipped inspector per setting turned into resource profiles.

Data flow: :mod:`registry` (which trained inspectors ship, by setting) -> :mod:`predictor`
(build the job's graph, run the inspector, attach :mod:`intervals`) -> :mod:`profile`
(:class:`ResourceProfile`: the 12 metrics, duty cycles, expected series) -> :mod:`colocate`
(combined load and burst collisions of jobs sharing a device or link).

``driple.predict.colocate`` is the module; the function is ``driple.colocate``.
Importing this package is cheap; torch is imported when a prediction is first made.
"""
from __future__ import annotations

_LAZY = {
    "Predictor": "driple.predict.predictor",
    "ResourceProfile": "driple.predict.profile",
    "list_settings": "driple.predict.registry",
    "ConformalIntervals": "driple.predict.intervals",
    "rank_pairs": "driple.predict.colocate",
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'driple.predict' has no attribute {name!r}")


__all__ = sorted(_LAZY)
