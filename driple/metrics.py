"""The 12 predicted metrics: four resources x (burst amount, burst duration, idle duration).

Column names are ``<resource>_<metric>``, e.g. ``tx_burst_amount``. Every stage (labeller,
dataset table, inspector outputs, predictions) uses this order.

Units:
- compute: % of the device (GPU: NVML utilization.gpu; CPU: process-tree CPU time / wall time /
  cores allotted to the worker, x100)
- memory: % (GPU: NVML utilization.memory; CPU: worker RSS as % of host memory)
- tx, rx: MB/s (1 MB = 1e6 bytes) sent / received by one worker
- burst_duration, idle_duration: seconds (mean length of a run of burst / idle samples)
"""
from __future__ import annotations

RESOURCES = ("compute", "memory", "tx", "rx")
KINDS = ("burst_amount", "burst_duration", "idle_duration")
METRICS = tuple(f"{r}_{k}" for r in RESOURCES for k in KINDS)
UNITS = {
    "compute": "%",
    "memory": "%",
    "tx": "MB/s",
    "rx": "MB/s",
}


def unit(metric: str) -> str:
    """Unit of a metric column, e.g. ``unit('tx_burst_amount') == 'MB/s'``."""
    resource, kind = metric.split("_", 1)
    return UNITS[resource] if kind == "burst_amount" else "s"
