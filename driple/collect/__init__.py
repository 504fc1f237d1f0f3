"""The collector: run real distributed training jobs, sample them, label burst/idle.

Data flow: :mod:`job` (what to run) -> :mod:`launcher` (start workers, optionally in
:mod:`netns` emulated hosts, sample them) -> ``sampling`` / ``series`` / ``timeline`` (raw
counters -> rates; the ranks' timelines) -> :mod:`labels` (burst/idle labels) -> :mod:`results`
(one row per job in ``results.csv``) -> :mod:`sweep` (many jobs, resumable), :mod:`corun` (jobs
run together), :mod:`labels.relabel` (labels recomputed from the raw files) and :mod:`plot`
(see the burst/idle split).

Importing this package is cheap; torch is imported only when a job is run.
"""
from __future__ import annotations

from driple._lazy import lazy_attributes

_LAZY = {
    "JobSpec": "driple.collect.job",
    "JobResult": "driple.collect.job",
    "JobInterrupted": "driple.collect.job",
    "run_job": "driple.collect.launcher",
    "ResultTable": "driple.collect.results",
    "load_results": "driple.collect.results",
    "run_sweep": "driple.collect.sweep",
    "load_grid": "driple.collect.sweep",
    "write_grid": "driple.collect.sweep",
    "plot_job": "driple.collect.plot",
    "EmulatedCluster": "driple.collect.netns",
    "run_corun": "driple.collect.corun",
    "read_corun": "driple.collect.corun",
    "load_coruns": "driple.collect.corun",
    "check_dataset": "driple.collect.labels.relabel",
}


__getattr__, __all__ = lazy_attributes(__name__, _LAZY)
