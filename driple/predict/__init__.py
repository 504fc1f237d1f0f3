"""What schedulers call: a shipped inspector per setting turned into resource profiles.

Data flow: :mod:`registry` (which trained inspectors ship, by setting) -> :mod:`predictor`
(build the job's graph, run the inspector, attach :mod:`intervals`; for a model of a family it
did not train on, those of :mod:`unseen`) -> :mod:`profile`
(:class:`ResourceProfile`: the 13 targets, i.e. 12 burst/idle metrics and the step time; duty
cycles, expected series) -> :mod:`colocate`
(combined load and burst collisions of jobs sharing a device or link).

``driple.predict.colocate`` is the module; the function is ``driple.colocate``.
Importing this package is cheap; torch is imported when a prediction is first made.
"""
from __future__ import annotations

from driple._lazy import lazy_attributes

_LAZY = {
    "Predictor": "driple.predict.predictor",
    "ResourceProfile": "driple.predict.profile",
    "list_settings": "driple.predict.registry",
    "ConformalIntervals": "driple.predict.intervals",
    "rank_pairs": "driple.predict.colocate",
}


__getattr__, __all__ = lazy_attributes(__name__, _LAZY)
