"""Jobs to simulate: read from a public DL cluster trace (or driple's own trace CSV), cut to a
subsample, and each mapped to a measured job of the catalogue.

Formats read (``read_trace`` tells them apart by name and header):

- **SenseTime Helios** ``cluster_log.csv`` (S-Lab-System-Group/HeliosData, CC BY 4.0): columns
  ``job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,
  queue``; times ``YYYY-MM-DD HH:MM:SS``, ``duration`` in s. Jobs with ``gpu_num`` 0 (CPU jobs)
  or a duration of 0 are left out.
- **Microsoft Philly** ``cluster_job_log`` (msr-fiddle/philly-traces, CC BY 4.0): a JSON list of
  ``{"jobid", "submitted_time", "status", "attempts": [{"start_time", "end_time", "detail":
  [{"ip", "gpus": [...]}]}], ...}``; the duration is the sum of the attempts' run times, the size
  the GPUs of the last attempt. Jobs without a finished attempt are left out.
- **driple trace CSV**: ``job_id,arrival_s,gpus,duration_s`` (what :func:`write_trace` writes).

A trace job's GPUs become workers (one node each, at most the cluster's nodes); its duration
is the job's run time alone (the solo time the simulator slows down); its arrival is its submit
time from the first job's. **Mapping rule**: trace job ``j`` runs catalogue job number
``int(sha1(job_id), 16) mod len(catalogue)``: a fixed, uniform draw that does not depend on
the job's size or duration (the catalogue's jobs were measured for seconds, not hours).

:func:`synthetic_trace` makes a workload when no trace file is at hand; it is labelled
``synthetic`` everywhere it is reported and its distributions are assumptions, not trace
figures.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from driple.errors import DripleError

HELIOS_COLUMNS = ("job_id", "gpu_num", "submit_time", "duration")
DRIPLE_COLUMNS = ("job_id", "arrival_s", "gpus", "duration_s")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace: ``arrival_s`` from the trace's first submit, ``gpus`` (workers),
    ``duration_s`` (run time alone)."""

    job_id: str
    arrival_s: float
    gpus: int
    duration_s: float


@dataclass
class Trace:
    """Jobs sorted by arrival, and where they came from (``source``: a path or ``synthetic``)."""

    jobs: list
    source: str
    kind: str  # helios | philly | driple | synthetic

    def __len__(self) -> int:
        return len(self.jobs)


def read_trace(path: str | os.PathLike) -> Trace:
    """Read a Helios, Philly or driple trace file (module doc); raises :class:`DripleError` with
    the file and row for anything malformed."""
    path = Path(path)
    if not path.is_file():
        raise DripleError(f"no trace file at {path}")
    with open(path, newline="") as f:
        head = f.read(4096)
    if head.lstrip().startswith("["):
        return Trace(_read_philly(path), str(path), "philly")
    header = next(csv.reader([head.splitlines()[0] if head else ""]), [])
    if all(c in header for c in DRIPLE_COLUMNS):
        return Trace(_read_csv(path, "driple"), str(path), "driple")
    if all(c in header for c in HELIOS_COLUMNS):
        return Trace(_read_csv(path, "helios"), str(path), "helios")
    raise DripleError(f"{path} is not a trace: expected a Helios cluster_log.csv (columns "
                      f"{', '.join(HELIOS_COLUMNS)}, ...), a Philly cluster_job_log (JSON list) or a "
                      f"driple trace CSV ({','.join(DRIPLE_COLUMNS)}); its header is {header[:6]}")


def _read_csv(path: Path, kind: str) -> list:
    jobs = []
    with open(path, newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            try:
                if kind == "driple":
                    job = TraceJob(str(row["job_id"]), float(row["arrival_s"]), int(row["gpus"]),
                                   float(row["duration_s"]))
                else:
                    job = TraceJob(str(row["job_id"]), _seconds(row["submit_time"]), int(float(row["gpu_num"])),
                                   float(row["duration"]))
            except (TypeError, ValueError, KeyError) as err:
                raise DripleError(f"{path}, line {line}: malformed {kind} trace row ({err})") from None
            if job.gpus > 0 and job.duration_s > 0:
                jobs.append(job)
    return _from_first(jobs, path)


def _read_philly(path: Path) -> list:
    try:
        with open(path) as f:
            entries = json.load(f)
    except ValueError as err:
        raise DripleError(f"{path} is not a Philly cluster_job_log (JSON): {err}") from None
    if not isinstance(entries, list):
        raise DripleError(f"{path} is not a Philly cluster_job_log: expected a JSON list of jobs")
    jobs = []
    for k, e in enumerate(entries):
        try:
            runs = [(a.get("start_time"), a.get("end_time"), a.get("detail") or []) for a in e["attempts"]]
            done = [(s, t, d) for s, t, d in runs if s not in (None, "None") and t not in (None, "None")]
            if not done:
                continue
            duration = sum(_seconds(t) - _seconds(s) for s, t, _ in done)
            gpus = sum(len(m.get("gpus") or []) for m in done[-1][2])
            job = TraceJob(str(e["jobid"]), _seconds(e["submitted_time"]), int(gpus), float(duration))
        except (TypeError, ValueError, KeyError, AttributeError) as err:
            raise DripleError(f"{path}, job {k}: malformed Philly entry ({err!r})") from None
        if job.gpus > 0 and job.duration_s > 0:
            jobs.append(job)
    return _from_first(jobs, path)


def _seconds(text) -> float:
    if isinstance(text, (int, float)):
        return float(text)
    # read as UTC: only differences count, and no daylight-saving hour may creep into them
    return datetime.strptime(str(text).strip(), TIME_FORMAT).replace(tzinfo=timezone.utc).timestamp()


def _from_first(jobs: list, path) -> list:
    if not jobs:
        raise DripleError(f"{path} holds no job with GPUs and a run time")
    jobs.sort(key=lambda j: (j.arrival_s, j.job_id))
    t0 = jobs[0].arrival_s
    return [replace(j, arrival_s=j.arrival_s - t0) for j in jobs]


def write_trace(trace: Trace, path: str | os.PathLike) -> None:
    """Write ``trace`` as a driple trace CSV."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(DRIPLE_COLUMNS)
        for j in trace.jobs:
            w.writerow([j.job_id, f"{j.arrival_s:.3f}", j.gpus, f"{j.duration_s:.3f}"])


def subsample(trace: Trace, n: int | None, seed: int = 0) -> Trace:
    """``n`` consecutive jobs from a random start (seeded), arrival times from the first of
    them: the trace's own arrival pattern, shortened. All jobs when ``n`` is None or larger."""
    if n is None or n >= len(trace):
        return trace
    if n < 1:
        raise DripleError(f"a subsample needs at least 1 job, got {n}")
    start = int(np.random.default_rng(seed).integers(0, len(trace) - n + 1))
    jobs = trace.jobs[start:start + n]
    t0 = jobs[0].arrival_s
    return Trace([replace(j, arrival_s=j.arrival_s - t0) for j in jobs], trace.source, trace.kind)


def offered_load(jobs: list, nodes: int) -> float:
    """Worker-seconds asked for / (nodes x span of arrivals + mean duration)."""
    span = max(j.arrival_s for j in jobs) - min(j.arrival_s for j in jobs)
    work = sum(min(j.gpus, nodes) * j.duration_s for j in jobs)
    return work / (nodes * (span + float(np.mean([j.duration_s for j in jobs]))))


def scale_to_load(trace: Trace, nodes: int, load: float | None) -> Trace:
    """Arrival times scaled so that the offered load on ``nodes`` is ``load`` (a trace's whole
    cluster is far larger than a simulated one); unchanged when ``load`` is None."""
    if load is None:
        return trace
    if load <= 0:
        raise DripleError(f"load must be > 0, got {load}")
    jobs = trace.jobs
    span = max(j.arrival_s for j in jobs)
    if span <= 0:
        return trace
    work = sum(min(j.gpus, nodes) * j.duration_s for j in jobs)
    mean = float(np.mean([j.duration_s for j in jobs]))
    factor = max((work / (load * nodes) - mean) / span, 1e-6)
    return Trace([replace(j, arrival_s=j.arrival_s * factor) for j in jobs], trace.source, trace.kind)


def synthetic_trace(n: int = 1000, seed: int = 0) -> Trace:
    """A synthetic workload (not a trace): Poisson arrivals (mean gap 60 s; rescale with
    :func:`scale_to_load`), log-normal run times (median 10 min, sigma 1.2, clipped to 1 min-1
    day), 1/2/4/8 GPUs with probabilities 0.6/0.2/0.15/0.05. Every figure here is an assumption."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(60.0, n))
    arrivals -= arrivals[0]
    durations = np.clip(rng.lognormal(np.log(600.0), 1.2, n), 60.0, 86400.0)
    gpus = rng.choice([1, 2, 4, 8], size=n, p=[0.6, 0.2, 0.15, 0.05])
    return Trace([TraceJob(f"syn-{k}", float(a), int(g), float(d))
                  for k, (a, g, d) in enumerate(zip(arrivals, gpus, durations))], "synthetic", "synthetic")


def catalogue_index(job_id: str, size: int) -> int:
    """The mapping rule: catalogue job number ``sha1(job_id) mod size``."""
    return int(hashlib.sha1(str(job_id).encode()).hexdigest(), 16) % size
