"""Raw sampler output -> per-target rate time series (the input of the labeller).

:func:`read_raw` loads the ``.npz`` written by a :class:`~driple.collect.sampling.SamplerProcess`;
:meth:`RawSeries.rates` gives one column per declared resource (:mod:`driple.metrics`), each
computed from the sampler's counters as the resource's ``rate`` says (:data:`RATE_KINDS`):

- ``compute`` (%): CPU: d(cpu_ns) / d(t_ns) / cores x 100 (100 = every allotted core busy);
  GPU: NVML utilization.gpu, time-averaged over the interval.
- ``memory`` (%): CPU: tree RSS at the end of the interval / host memory x 100;
  GPU: NVML utilization.memory (memory-controller busy %), time-averaged over the interval.
- ``tx``, ``rx`` (MB/s, 1 MB = 1e6 bytes): d(bytes) / d(t).

The index ``t`` (s since the sampler's first sample) is the *end* of each interval, so row i
covers (t[i-1], t[i]]. A target that exited mid-run simply has fewer rows.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from driple.errors import DripleError

FORMAT = "driple-raw-1"


def _integrate_steps(t_ns: np.ndarray, values: np.ndarray, at_ns: np.ndarray) -> np.ndarray:
    """Integral (value x ns) of a step series at times ``at_ns``; NaN outside its span.

    Driver sample i (time ``t_ns[i]``) holds the mean over the interval since sample i-1; the
    first one is taken to cover one median interval before it.
    """
    if len(t_ns) == 0:
        return np.full(len(at_ns), np.nan)
    order = np.argsort(t_ns, kind="stable")
    t_ns, values = t_ns[order].astype(np.float64), values[order].astype(np.float64)
    first = np.median(np.diff(t_ns)) if len(t_ns) > 1 else 0.0
    knots = np.concatenate([[t_ns[0] - first], t_ns])
    cum = np.concatenate([[0.0], np.cumsum(values * np.diff(knots))])
    out = np.interp(at_ns.astype(np.float64), knots, cum)
    out[(at_ns < knots[0]) | (at_ns > knots[-1])] = np.nan
    return out


@dataclass
class RawSeries:
    """Cumulative counters of every target of one sampler run (see module docstring)."""

    meta: dict
    arrays: dict[str, np.ndarray] = field(repr=False)

    @property
    def names(self) -> list[str]:
        """Target names, in the order they were given."""
        return [t["name"] for t in self.meta["targets"]]

    @property
    def start_ns(self) -> int:
        """Monotonic time (ns) of the first sample: t = 0 of every series."""
        return int(self.meta["start_ns"] or 0)

    @property
    def period_s(self) -> float:
        return float(self.meta["period_s"])

    def target(self, name: str) -> dict:
        """The target's description: name, pid, cores, veth, gpu_index, net_source, ended_ns."""
        for t in self.meta["targets"]:
            if t["name"] == name:
                return t
        raise DripleError(f"no target named {name!r} in this sampling run; it has {', '.join(self.names)}")

    def ended(self, name: str) -> float | None:
        """When the target's root process exited (s since start), or None if it outlived sampling."""
        e = self.target(name)["ended_ns"]
        return None if e is None else (e - self.start_ns) / 1e9

    def counters(self, name: str) -> pd.DataFrame:
        """Raw cumulative counters of one target, indexed by ``t`` (s since start)."""
        self.target(name)
        prefix = f"{name}/"
        cols = {k[len(prefix):]: v for k, v in self.arrays.items() if k.startswith(prefix)}
        t = (cols.pop("t_ns") - self.start_ns) / 1e9
        return pd.DataFrame(cols, index=pd.Index(t, name="t"))

    def gpu_samples(self, name: str, kind: str = "gpu") -> pd.Series:
        """The driver's utilization samples (``kind`` 'gpu' or 'memory', %) of the target's GPU."""
        gi = self.target(name)["gpu_index"]
        key = f"gpu{gi}/{kind}_t_us"
        if gi is None or key not in self.arrays:
            raise DripleError(f"target {name!r} has no GPU samples (sampled with device='cpu'?)")
        t_ns = self.arrays[key] * 1000 - int(self.meta["clock_offset_ns"])
        return pd.Series(
            self.arrays[f"gpu{gi}/{kind}_util"], index=pd.Index((t_ns - self.start_ns) / 1e9, name="t"), name=kind
        )

    def rates(self, target_name: str) -> pd.DataFrame:
        """Rates of one target: one column per declared resource (compute %, memory %, tx MB/s,
        rx MB/s), index t (s)."""
        from driple.metrics import resources

        tgt = self.target(target_name)
        t_ns = self.arrays[f"{target_name}/t_ns"].astype(np.int64)
        index = pd.Index((t_ns[1:] - self.start_ns) / 1e9, name="t")
        if len(t_ns) < 2:
            return pd.DataFrame({r.name: np.zeros(0) for r in resources()}, index=index)
        dt_ns = np.diff(t_ns).astype(np.float64)
        device = self.meta["device"]
        out = {}
        for r in resources():
            kind, counter = r.rate[device]
            out[r.name] = RATE_KINDS[kind](self, tgt, counter, t_ns, dt_ns)
        return pd.DataFrame(out, index=index)

    def interface_rates(self) -> pd.DataFrame:
        """Cross-check: rx/tx of every host interface (MB/s), columns ``<iface>_rx``, ``<iface>_tx``.

        Read every 10th sample (10 Hz at the default period) and once more at the end.
        """
        t_ns = self.arrays["iface/t_ns"]
        dt_ns = np.diff(t_ns).astype(np.float64)
        cols = {}
        for i, name in enumerate(self.meta["interfaces"]):
            for d in ("rx", "tx"):
                cols[f"{name}_{d}"] = np.diff(self.arrays[f"iface/{d}_bytes"][i]) / dt_ns * 1e3
        return pd.DataFrame(cols, index=pd.Index((t_ns[1:] - self.start_ns) / 1e9, name="t"))


def _cpu_time(series: RawSeries, tgt: dict, counter: str, t_ns, dt_ns) -> np.ndarray:
    """% of the allotted cores: d(CPU ns) / d(t ns) / cores x 100."""
    return np.diff(series.arrays[f"{tgt['name']}/{counter}"]) / dt_ns / float(tgt["cores"]) * 100.0


def _host_share(series: RawSeries, tgt: dict, counter: str, t_ns, dt_ns) -> np.ndarray:
    """% of host memory held at the end of each interval (counter in bytes)."""
    host = float(series.meta["host_mem_bytes"]) or np.nan
    return series.arrays[f"{tgt['name']}/{counter}"][1:] / host * 100.0


def _bytes(series: RawSeries, tgt: dict, counter: str, t_ns, dt_ns) -> np.ndarray:
    """MB/s: d(bytes) / d(t)."""
    return np.diff(series.arrays[f"{tgt['name']}/{counter}"]) / dt_ns * 1e3  # bytes/ns -> MB/s


def _nvml(series: RawSeries, tgt: dict, kind: str, t_ns, dt_ns) -> np.ndarray:
    """NVML utilisation (%, ``kind`` gpu or memory) of the target's GPU, time-averaged over each
    interval."""
    gi = tgt["gpu_index"]
    ts = series.arrays[f"gpu{gi}/{kind}_t_us"] * 1000 - int(series.meta["clock_offset_ns"])
    integral = _integrate_steps(ts, series.arrays[f"gpu{gi}/{kind}_util"], t_ns)
    return np.diff(integral) / dt_ns


#: How a rate column is computed from a target's counters (a resource's ``rate`` names one).
RATE_KINDS = {"cpu_time": _cpu_time, "host_share": _host_share, "bytes": _bytes, "nvml": _nvml}


def host_busy_cores(series: RawSeries, t0: float, t1: float) -> float | None:
    """Mean number of host CPUs busy (all processes) between ``t0`` and ``t1`` (s since start).

    From /proc/stat jiffies read at 10 Hz; ``None`` for files written before this was recorded.
    """
    busy = series.arrays.get("host/busy_jiffies")
    total = series.arrays.get("host/total_jiffies")
    if busy is None or len(busy) < 2:
        return None
    t = (series.arrays["iface/t_ns"] - series.start_ns) / 1e9
    i0 = int(np.clip(np.searchsorted(t, t0), 0, len(t) - 2))
    i1 = int(np.clip(np.searchsorted(t, t1), i0 + 1, len(t) - 1))
    cpus = os.cpu_count() or 1
    d_total = float(total[i1] - total[i0])
    return float(busy[i1] - busy[i0]) / d_total * cpus if d_total > 0 else None


def read_raw(path: str | Path) -> RawSeries:
    """Load a sampler ``.npz`` into a :class:`RawSeries`."""
    path = Path(path)
    if not path.exists():
        raise DripleError(f"no sampler output at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as e:
        raise DripleError(f"{path} is not a readable sampler file ({e})") from None
    if "meta" not in arrays:
        raise DripleError(f"{path} is not a driple sampler file (no 'meta' entry)")
    meta = json.loads(str(arrays.pop("meta")))
    if meta.get("format") != FORMAT:
        raise DripleError(f"{path} has format {meta.get('format')!r}; this driple reads {FORMAT!r}")
    return RawSeries(meta, arrays)
