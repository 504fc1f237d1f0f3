"""Co-runs: start two or more jobs at the same moment on this host and measure them together.

:func:`run_corun` launches every job exactly as ``driple collect run`` would --
:func:`~driple.collect.launcher.run_job` in a collector process of its own, with its own ranks,
its own sampler and (emulated settings) its own cluster -- all at once, waits for all of them,
and records in the dataset directory:

- each job's usual row in ``results.csv`` and its raw files ``raw/<job_id>.*``. Its ``job_id``
  is ``<corun_id>-<k>-<base_job_id>``; the columns ``corun_id``, ``corun_job`` (k) and
  ``base_job_id`` (the id the job has in a sweep of the same setting and seconds, to join with
  solo measurements) are added;
- one row per co-run in ``coruns.csv`` (:data:`CORUN_COLUMNS`).

**Combined mean load** (``compute_mean`` ... ``rx_mean``): for each job, the mean over its
*workers* (servers left out, as in ``results.csv``) of each worker's mean rate over the overlap
window, summed over the jobs. Units as the series: compute in % of one core (two jobs whose
workers each keep 0.8 core busy give 160), memory in % of host memory, tx/rx in MB/s; all per
worker, summed over jobs. It is the quantity that
:func:`driple.predict.colocate.colocate` predicts as ``combined_mean`` from one profile per job.

**Overlap window**: a job's measurement window runs from the start of the first measured
iteration (after warm-up) on any of its workers to the end of the last one; the overlap is the
intersection of the jobs' windows (CLOCK_MONOTONIC, one clock for every process of the host).
Times in ``coruns.csv`` and in :func:`read_corun` are seconds since the co-run's *origin*, the
earliest start of the jobs' samplers. The jobs are launched together, but each finishes its
start-up at its own pace (seconds apart on a busy host): every worker waits at a gate before
its warm-up (so the warm-up, which sets how many iterations are measured, runs under the
co-run's load) and after it until all workers of all jobs are there
(:func:`~driple.collect.workers.common.wait_at_start_gate`), so the windows start together and
the overlap is about the shortest job's measurement. :func:`read_corun` gives each job's series on that axis,
ready for :func:`measured_combined` (measured burst collisions).

Why a process per job: the launcher's signal handling and its emulated cluster (one per
process, named after the pid) are made for one job per process. On loopback the co-run picks
each job's rendezvous port itself -- distinct free ports, held until the collectors start --
so the jobs never pick the same one. In an emulated setting each job gets a cluster of its
own (own bridge and links): the jobs share the host's CPUs and memory, not a link.

Failures: when a job fails, the others are stopped (SIGTERM: they clean up as after Ctrl-C)
and the co-run is recorded ``failed`` with the job's reason. Ctrl-C, SIGTERM or SIGHUP: every
collector is told to stop, each kills its ranks and sampler and removes its namespaces, all
rows are recorded, then :class:`CoRunInterrupted` (a ``KeyboardInterrupt``) is raised. A
collector that does not exit within ``STOP_GRACE_S`` is killed, and so are the ranks found
with its work directory on their command line.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing numpy here would cost every import of this module
    import numpy as np

import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Mapping
from datetime import datetime, timezone
from pathlib import Path

from driple.collect.files import write_json
from driple.collect.interrupts import deferred_interrupts, signals_as_interrupt
from driple.collect.job import JobInterrupted, JobResult, JobSpec, job_id as base_job_id
from driple.collect.results import ResultTable
from driple.collect.workers.common import parent_death_hook
from driple.csvtable import read_csv
from driple.errors import DripleError
from driple.metrics import resource, resource_names
from driple.settings import Setting, parse_setting
from driple.sharing import SharedLoad, check_capacity, collision_probability, overload_level

POLL_S = 0.1
STOP_GRACE_S = 45.0  # a stopped collector kills its ranks (3 s grace) and saves its samples
MIN_OVERLAP_S = 1.0  # a co-run whose jobs were measured together for less has failed
CORUN_COLUMNS = (
    "corun_id", "setting", "seconds", "n_jobs", "job_ids", "base_job_ids", "models",
    "origin_ns", "overlap_start_s", "overlap_end_s", "overlap_s",
    *(f"{r}_mean" for r in resource_names()), "per_job",
    "status", "reason", "started", "duration_s",
)


class CoRunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM/SIGHUP) during a co-run; ``result`` holds the rows, already recorded."""

    def __init__(self, result: "CoRunResult"):
        super().__init__("co-run interrupted")
        self.result = result


@dataclass
class CoRunResult:
    """Outcome of one co-run: its ``coruns.csv`` row and each job's result (in launch order)."""

    row: dict
    jobs: list[JobResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.row.get("status") == "ok"

    @property
    def corun_id(self) -> str:
        return self.row["corun_id"]


def corun_id(specs: list[JobSpec], setting_id: str, seconds: float) -> str:
    """Stable id of a co-run: ``corun-<hash>`` of the jobs (in order), setting and seconds."""
    key = json.dumps({"jobs": [s.to_dict() for s in specs], "setting": setting_id, "seconds": float(seconds)},
                     sort_keys=True, default=str)
    return "corun-" + hashlib.sha1(key.encode()).hexdigest()[:10]


# -- the arithmetic ------------------------------------------------------------------------------

def overlap_window(windows: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Intersection ``(start, end)`` of ``[start, end]`` windows (any unit); None if empty."""
    if not windows:
        return None
    start = max(w[0] for w in windows)
    end = min(w[1] for w in windows)
    return (start, end) if end > start else None


def job_window(per_rank: dict) -> tuple[int, int]:
    """Measurement window (ns) of a job from its detail's ``per_rank``: first start to last end
    over its workers."""
    spans = [r["window_ns"] for name, r in per_rank.items() if name.startswith("worker")]
    if not spans:
        raise ValueError("the job's detail has no worker windows")
    return min(s[0] for s in spans), max(s[1] for s in spans)


def window_mean(df, t0: float, t1: float) -> dict[str, float]:
    """Mean of each resource column of ``df`` over samples with ``t0 < t <= t1`` (index t, s).

    A sample at ``t`` is the rate over the period ending at ``t``, so this is the samples whose
    period ends inside the window. NaN where no sample falls inside.
    """
    t = df.index.to_numpy(dtype=float)
    inside = (t > t0) & (t <= t1)
    return {r: (float(df[r].to_numpy(dtype=float)[inside].mean()) if inside.any() else math.nan)
            for r in resource_names()}


def combine(per_job: dict[str, dict[str, dict[str, float]]]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """``{job: {worker: {resource: mean}}}`` -> (combined, job means).

    A job's mean is the mean over its workers; the combined load of a resource is the sum of
    the jobs' means (per-worker load summed over jobs).
    """
    job_means = {}
    for job, workers in per_job.items():
        if not workers:
            raise ValueError(f"job {job} has no worker series")
        job_means[job] = {r: sum(w[r] for w in workers.values()) / len(workers) for r in resource_names()}
    combined = {r: sum(m[r] for m in job_means.values()) for r in resource_names()}
    return combined, job_means


def shifted_rates(series, name: str, origin_ns: int):
    """Rates of target ``name`` of a :class:`~driple.collect.series.RawSeries`, index in s since
    ``origin_ns`` (CLOCK_MONOTONIC) instead of since the series' own start."""
    df = series.rates(name)
    df.index = df.index + (series.start_ns - origin_ns) / 1e9
    return df


def measure(raws: dict, per_ranks: dict) -> dict:
    """Overlap window and combined mean loads of jobs that ran together.

    ``raws``: ``{job: RawSeries}``; ``per_ranks``: ``{job: detail["per_rank"]}``. Returns
    ``origin_ns``, ``overlap_ns`` (None if the windows do not meet), ``overlap_s`` (start, end
    since the origin), ``combined`` and ``job_means`` (``{resource: value}``, see the module).
    """
    origin = min(int(s.start_ns) for s in raws.values())
    ov = overlap_window([job_window(per_ranks[j]) for j in raws])
    out = {"origin_ns": origin, "overlap_ns": ov, "overlap_s": None,
           "combined": {r: math.nan for r in resource_names()}, "job_means": {}}
    if ov is None:
        return out
    t0, t1 = (ov[0] - origin) / 1e9, (ov[1] - origin) / 1e9
    out["overlap_s"] = (t0, t1)
    per_job = {}
    for j, series in raws.items():
        workers = [n for n in per_ranks[j] if n.startswith("worker")]
        per_job[j] = {w: window_mean(shifted_rates(series, w, origin), t0, t1) for w in workers}
    out["combined"], out["job_means"] = combine(per_job)
    return out


def corun_row(cid: str, setting: Setting, seconds: float, jobs: list[dict], measured: dict | None,
              status: str, reason: str, started: datetime, duration_s: float) -> dict:
    """The ``coruns.csv`` row. ``jobs``: the jobs' result rows (with ``base_job_id``)."""
    row = {
        "corun_id": cid, "setting": setting.id, "seconds": float(seconds), "n_jobs": len(jobs),
        "job_ids": [j["job_id"] for j in jobs], "base_job_ids": [j.get("base_job_id") for j in jobs],
        "models": [j.get("model") for j in jobs],
        "origin_ns": None, "overlap_start_s": math.nan, "overlap_end_s": math.nan, "overlap_s": 0.0,
        **{f"{r}_mean": math.nan for r in resource_names()}, "per_job": {},
        "status": status, "reason": reason,
        "started": started.isoformat(timespec="seconds"), "duration_s": round(duration_s, 3),
    }
    if measured:
        row["origin_ns"] = measured["origin_ns"]
        if measured["overlap_s"] is not None:
            t0, t1 = measured["overlap_s"]
            row.update(overlap_start_s=round(t0, 6), overlap_end_s=round(t1, 6), overlap_s=round(t1 - t0, 6))
        row.update({f"{r}_mean": v for r, v in measured["combined"].items()})
        row["per_job"] = measured["job_means"]
    return row


# -- the table ------------------------------------------------------------------------------------

class CoRunTable(ResultTable):
    """``<out_dir>/coruns.csv``: one row per co-run, rewritten atomically like ``results.csv``."""

    columns = CORUN_COLUMNS

    def __init__(self, out_dir: str | os.PathLike):
        super().__init__(out_dir)
        self.path = self.dir / "coruns.csv"

    def read(self, history: bool = False):
        """The table as a DataFrame: the last row of each co-run (``history=True``: every row)."""
        import pandas as pd

        if not self.path.exists():
            return pd.DataFrame(columns=list(CORUN_COLUMNS))
        df = read_csv(self.path)
        if not history and len(df):
            df = df.drop_duplicates("corun_id", keep="last").reset_index(drop=True)
        return df

    def done_ids(self) -> set[str]:
        """Co-runs whose last row is ``ok`` (a grid run skips them)."""
        _, rows = self._rows()
        last = {r["corun_id"]: r for r in rows}
        return {cid for cid, r in last.items() if r["status"] == "ok"}


def load_coruns(out_dir: str | os.PathLike, history: bool = False):
    """``coruns.csv`` of a dataset directory as a DataFrame (last row per co-run by default)."""
    return CoRunTable(out_dir).read(history=history)


# -- running ----------------------------------------------------------------------------------------

@dataclass
class _Child:
    corun_id: str
    k: int
    spec: JobSpec
    job_id: str
    base_job_id: str
    config: Path
    result: Path
    log: Path
    proc: subprocess.Popen | None = None
    done: bool = False
    stopped_by_us: bool = False


def run_corun(
    jobs: list[JobSpec | dict],
    setting: Setting | str,
    seconds: float = 10.0,
    out_dir: str | os.PathLike = "runs",
    *,
    timeout: float | None = None,
    period_s: float = 0.01,
    min_overlap_s: float = MIN_OVERLAP_S,
    record: bool = True,
) -> CoRunResult:
    """Run ``jobs`` (two or more) at the same time in ``setting`` for real; return the co-run.

    Each job measures ``seconds`` after its warm-up, as :func:`run_job` does; ``timeout`` is
    each job's (default 90 + 2 x seconds). Never raises for failed jobs: the co-run row then
    has ``status="failed"`` and a ``reason``; raises :class:`CoRunInterrupted` on Ctrl-C /
    SIGTERM / SIGHUP after cleaning up and recording, and :class:`DripleError` for unusable
    input. ``record=True`` appends the job rows to ``results.csv`` and the co-run row to
    ``coruns.csv`` in ``out_dir`` (and starts ``provenance.json``).
    """
    from driple.collect.launcher import default_timeout

    specs = [s if isinstance(s, JobSpec) else JobSpec.from_dict(s) for s in jobs]
    if len(specs) < 2:
        raise DripleError("a co-run needs at least two jobs")
    setting = parse_setting(setting)
    if float(seconds) <= 0:
        raise DripleError("seconds must be positive (length of each job's measurement after warm-up)")
    if setting.emulated:
        from driple.collect.netns import require_root

        require_root()
    from driple.zoo.workload import check_models

    check_models([s.model for s in specs])
    seconds = float(seconds)
    job_timeout = float(timeout) if timeout else default_timeout(seconds)
    out_dir = Path(out_dir)
    raw_dir = out_dir / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    cid = corun_id(specs, setting.id, seconds)
    work = out_dir / f".{cid}.corun"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    children = []
    for k, spec in enumerate(specs):
        base = base_job_id(spec, setting.id, seconds)
        jid = f"{cid}-{k}-{base}"
        children.append(_Child(cid, k, spec, jid, base, work / f"job{k}.json", work / f"result{k}.json",
                               work / f"collector{k}.log"))

    started = datetime.now(timezone.utc)
    t_start = time.monotonic()
    ports = _reserve_ports(len(children)) if not setting.emulated else []
    # every worker of every job waits for the others before and after its warm-up: the warm-up
    # (which sets the iterations measured) runs under the co-run's load, the measurements overlap
    gate = {"dir": str((work / "gate").resolve()), "parties": setting.workers * len(children),
            "timeout_s": job_timeout / 2}
    (work / "gate").mkdir()
    failure = ""
    interrupted = False
    try:
        with signals_as_interrupt():
            for child, port in zip(children, ports or [None] * len(children)):
                _launch(child, setting, seconds, out_dir, job_timeout, period_s,
                        port.getsockname()[1] if port else None, gate)
            _release(ports)
            failure = _supervise(children, deadline=time.monotonic() + job_timeout + 60.0)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        with deferred_interrupts() as pending:
            _release(ports)
            _stop(children, setting)
        interrupted = interrupted or pending.fired
    duration = time.monotonic() - t_start

    results = [_collect(child, setting, seconds) for child in children]
    failed = [(c, r) for c, r in zip(children, results) if r.row.get("status") != "ok"]
    if interrupted:
        status, reason = "failed", "interrupted by Ctrl-C/SIGTERM during the co-run"
    elif failure:
        status, reason = "failed", failure
    elif failed:
        c, r = failed[0]
        status, reason = "failed", f"job {c.job_id} failed: {r.row.get('reason')}"
    else:
        status, reason = "ok", ""
    if status == "failed" and not interrupted and failure:
        for c, r in zip(children, results):  # the partners we stopped: say why, not "interrupted"
            if c.stopped_by_us and r.row.get("status") != "ok":
                killed = c.proc.returncode < 0
                r.row["reason"] = f"stopped: {failure}" + (f" (then killed: {r.row.get('reason')})" if killed else "")
    measured = None
    if status == "ok":
        try:
            measured = _measure(results)
        except Exception as err:  # noqa: BLE001 - the jobs ran; say why the co-run has no figures
            status, reason = "failed", f"analysis failed: {type(err).__name__}: {err}"
        else:
            span = 0.0 if measured["overlap_s"] is None else measured["overlap_s"][1] - measured["overlap_s"][0]
            if span < min_overlap_s:
                status = "failed"
                reason = f"the jobs were measured together for {span:.2f} s only (< {min_overlap_s:g} s)"
    row = corun_row(cid, setting, seconds, [r.row for r in results], measured, status, reason, started, duration)
    result = CoRunResult(row=row, jobs=results)
    if record:
        from driple.collect.provenance import record as record_provenance

        table = ResultTable(out_dir)
        for r in results:
            table.append(r.row)
        CoRunTable(out_dir).append(row)
        if not (out_dir / "provenance.json").exists():
            record_provenance(out_dir, setting=setting.id)
    shutil.rmtree(work, ignore_errors=True)
    if interrupted:
        raise CoRunInterrupted(result)
    return result


def _reserve_ports(n: int) -> list[socket.socket]:
    """``n`` distinct free loopback ports, each held by a bound socket until :func:`_release`."""
    held = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        held.append(s)
    return held


def _release(ports: list[socket.socket]) -> None:
    for s in ports:
        s.close()


def _child_command(config: Path) -> list[str]:
    """The collector process of one job (tests replace it with a stand-in)."""
    return [sys.executable, "-m", "driple.collect.corun", "--child", str(config)]


def _launch(child: _Child, setting: Setting, seconds: float, out_dir: Path, timeout: float,
            period_s: float, port: int | None, start_gate: dict) -> None:
    child.config.write_text(json.dumps({
        "spec": child.spec.to_dict(), "setting": setting.id, "seconds": seconds,
        "out_dir": str(out_dir.resolve()), "job_id": child.job_id, "timeout": timeout,
        "period_s": period_s, "master_port": port, "result": str(child.result.resolve()),
        "start_gate": start_gate,
    }))
    log = open(child.log, "wb")
    try:  # same process group: a Ctrl-C in the terminal reaches the collectors too
        child.proc = subprocess.Popen(_child_command(child.config), stdin=subprocess.DEVNULL,
                                      stdout=log, stderr=subprocess.STDOUT, preexec_fn=_STOP_WITH_US)
    finally:
        log.close()


# a collector whose co-run is killed outright stops its job and cleans up (SIGTERM)
_STOP_WITH_US = parent_death_hook(signal.SIGTERM)


def _child_failed(child: _Child) -> str:
    """Reason a finished collector's job failed, "" if it is ok."""
    try:
        data = json.loads(child.result.read_text())
    except (OSError, ValueError):
        return f"collector exited with code {child.proc.returncode} without a result: {_tail(child.log)}"
    if "error" in data:
        return data["error"]
    row = data.get("row") or {}
    return "" if row.get("status") == "ok" else str(row.get("reason"))


def _supervise(children: list[_Child], deadline: float) -> str:
    """Wait for every collector; return why the co-run failed ("" when every job ended ok)."""
    while True:
        running = 0
        for c in children:
            if c.done:
                continue
            if c.proc.poll() is None:
                running += 1
                continue
            c.done = True
            why = _child_failed(c)
            if why:
                return f"job {c.job_id} failed: {why}"
        if not running:
            return ""
        if time.monotonic() > deadline:
            return "timeout: the co-run's jobs were still running long after their own timeout"
        time.sleep(POLL_S)


def _stop(children: list[_Child], setting: Setting) -> None:
    """Stop every collector still running (SIGTERM, then SIGKILL) and whatever it left. Never raises."""
    live = [c for c in children if c.proc is not None and c.proc.poll() is None]
    for c in live:
        c.stopped_by_us = True
        try:
            c.proc.send_signal(signal.SIGTERM)
        except OSError:
            pass
    end = time.monotonic() + STOP_GRACE_S
    for c in live:
        try:
            c.proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait()
    if any(c.proc is not None and c.proc.returncode < 0 for c in children):  # killed: no clean-up of its own
        _kill_leftovers([c.job_id for c in children])
        if setting.emulated:
            try:
                from driple.collect.netns import remove_stale

                remove_stale()
            except Exception:  # noqa: BLE001 - `driple collect cleanup` can still do it
                pass


def _kill_leftovers(job_ids: list[str]) -> None:
    """SIGKILL processes whose command line names one of the jobs' work directories (ranks of a
    collector that was killed before it could clean up)."""
    markers = [f"/raw/{j}.work/".encode() for j in job_ids]
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        try:
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        if any(m in cmd for m in markers):
            pid = int(d.name)
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def _collect(child: _Child, setting: Setting, seconds: float) -> JobResult:
    """The job's result from its collector; a failed row when the collector left none."""
    try:
        data = json.loads(child.result.read_text())
    except (OSError, ValueError):
        data = {"error": f"collector exited with code {child.proc.returncode if child.proc else None} "
                         f"without a result: {_tail(child.log)}"}
    if "row" in data:
        row = data["row"]
        raw = Path(data["raw_path"]) if data.get("raw_path") else None
        detail = Path(data["detail_path"]) if data.get("detail_path") else None
    else:
        row = {"job_id": child.job_id, "setting": setting.id, "seconds": seconds,
               "model": child.spec.model, "batch_size": child.spec.batch_size,
               "optimizer": child.spec.optimizer, "knobs": json.dumps(child.spec.knobs, sort_keys=True),
               "seed": child.spec.seed, "status": "failed", "reason": data["error"]}
        raw = detail = None
    row.update(corun_id=child.corun_id, corun_job=child.k, base_job_id=child.base_job_id)
    return JobResult(row=row, raw_path=raw, detail_path=detail)


def _measure(results: list[JobResult]) -> dict:
    from driple.collect.series import read_raw

    raws, per_ranks = {}, {}
    for r in results:
        if r.raw_path is None or r.detail_path is None:
            raise ValueError(f"job {r.job_id} left no raw series")
        raws[r.job_id] = read_raw(r.raw_path)
        per_ranks[r.job_id] = json.loads(r.detail_path.read_text())["per_rank"]
    return measure(raws, per_ranks)


def _tail(path: Path, n: int = 400) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "no output"
    return text[-n:].replace("\n", " | ") if text else "no output"


# -- many co-runs -----------------------------------------------------------------------------------

def load_corun_grid(path: str | os.PathLike) -> dict:
    """Read a co-run grid: ``{"setting", "seconds", "warmup", "coruns": [[JobSpec, ...], ...]}``.

    The YAML holds ``coruns:``, a list of co-runs, each a list of two or more jobs; a job is a
    mapping like a sweep grid entry (``{model, knobs, batch_size, optimizer}``) or a string in
    the command-line form ``MODEL[,knob=value...]`` (``bs=``, ``opt=``)::

        setting: cpu-ddp-w2-lo   # optional, as are seconds and warmup
        seconds: 6
        coruns:
          - ["resnet,depth=20,bs=32", "mlp,bs=256"]
          - [{model: resnet, knobs: {depth: 20}, batch_size: 32}, {model: gpt_tiny, batch_size: 16}]
    """
    from driple.collect.sweep import read_grid_file

    path = Path(path)
    data = read_grid_file(path, "co-run grid", "coruns", " of job lists")
    groups = data["coruns"]
    warmup = data.get("warmup")
    coruns = []
    for i, group in enumerate(groups):
        if not isinstance(group, list) or len(group) < 2:
            raise DripleError(f"co-run grid {path}: co-run {i} must be a list of at least two jobs")
        specs = []
        for entry in group:
            try:
                default = {} if warmup is None else {"warmup": warmup}
                if isinstance(entry, str):
                    specs.append(JobSpec.parse(entry, **default))
                else:
                    specs.append(JobSpec.from_dict({**default, **dict(entry)}))
            except (DripleError, TypeError, ValueError) as err:
                raise DripleError(f"co-run grid {path}: co-run {i}: job {entry!r}: {err}") from err
        coruns.append(specs)
    return {"setting": data.get("setting"), "seconds": data.get("seconds"), "warmup": warmup, "coruns": coruns}


def run_coruns(groups: list[list[JobSpec]], setting, seconds: float, out_dir: str | os.PathLike,
               *, skip_done: bool = True, on_result=None, host_lock=None, **kw) -> dict:
    """Run co-runs one after another; skip those whose last row is ok (``skip_done``).

    ``on_result(result)`` is called after each; ``kw`` go to :func:`run_corun`; ``host_lock``
    is held during each co-run (:func:`driple.collect.sweep.holding_host`). Returns counts
    ``total``, ``skipped``, ``ok``, ``failed``. Ctrl-C records the running co-run and re-raises.
    """
    from driple.collect.sweep import holding_host

    setting = parse_setting(setting)
    done = CoRunTable(out_dir).done_ids() if skip_done else set()
    counts = {"total": len(groups), "skipped": 0, "ok": 0, "failed": 0}
    for specs in groups:
        if corun_id(specs, setting.id, seconds) in done:
            counts["skipped"] += 1
            continue
        with holding_host(host_lock):
            result = run_corun(specs, setting, seconds, out_dir, **kw)
        counts["ok" if result.ok else "failed"] += 1
        if on_result is not None:
            on_result(result)
    return counts


# -- reading back ------------------------------------------------------------------------------------

@dataclass
class CoRunSeries:
    """One co-run's series on a common time axis (s since ``origin_ns``, CLOCK_MONOTONIC).

    ``series``: ``{job_id: DataFrame}`` (index t, columns compute, memory, tx, rx -- see
    :func:`read_corun`); ``overlap``: ``(t0, t1)`` when every job was in its measurement
    window (None if never). ``measured_combined(c.series, t0=c.overlap[0], t1=c.overlap[1])``
    gives the measured burst collisions.
    """

    corun_id: str
    setting: str
    status: str
    job_ids: list[str]
    origin_ns: int
    overlap: tuple[float, float] | None
    series: dict


def read_corun(out_dir: str | os.PathLike, corun: str | None = None, worker: str = "mean",
               include_failed: bool = False) -> dict[str, CoRunSeries]:
    """Each co-run of ``out_dir`` (or only ``corun``): every job's aligned series per resource.

    ``worker="mean"``: per sample, the mean over the job's workers (a job's workers share one
    sampler, hence the timestamps); a rank name (``"worker0"``) picks that rank. Failed co-runs
    are left out unless ``include_failed`` (a job without raw series is then missing).
    """
    from driple.collect.series import read_raw

    out_dir = Path(out_dir)
    table = load_coruns(out_dir)
    if corun is not None:
        table = table[table["corun_id"] == corun]
        if table.empty:
            raise DripleError(f"no co-run {corun!r} in {out_dir / 'coruns.csv'}")
    out = {}
    for _, row in table.iterrows():
        if row["status"] != "ok" and not include_failed:
            continue
        job_ids = json.loads(row["job_ids"])
        raws = {}
        for j in job_ids:
            path = out_dir / "raw" / f"{j}.npz"
            if path.exists():
                raws[j] = read_raw(path)
        if not raws:
            continue
        origin = int(row["origin_ns"]) if _is_number(row.get("origin_ns")) else min(int(s.start_ns) for s in raws.values())
        series = {}
        for j, raw in raws.items():
            names = [n for n in raw.names if n.startswith("worker")]
            if worker == "mean":
                import pandas as pd

                frames = [shifted_rates(raw, n, origin) for n in names]
                series[j] = pd.concat(frames).groupby(level=0).mean() if frames else None
            elif worker in names:
                series[j] = shifted_rates(raw, worker, origin)
            else:
                raise DripleError(f"job {j} has no rank {worker!r}; it has {', '.join(raw.names)}")
        overlap = None
        if _is_number(row.get("overlap_start_s")) and row["overlap_s"] > 0:
            overlap = (float(row["overlap_start_s"]), float(row["overlap_end_s"]))
        out[row["corun_id"]] = CoRunSeries(row["corun_id"], row["setting"], row["status"], job_ids,
                                           origin, overlap, series)
    return out


def _is_number(v) -> bool:
    try:
        return not math.isnan(float(v))
    except (TypeError, ValueError):
        return False


# -- measured burst collisions ---------------------------------------------------------------------


@dataclass(kw_only=True)
class MeasuredLoad(SharedLoad):
    """One resource of jobs measured running together, on a common time grid (fields of
    :class:`~driple.sharing.SharedLoad`, and): ``collision_fraction``, the share of grid points
    where two or more jobs are above their own burst ``thresholds``; ``independent_collision``,
    what :func:`~driple.sharing.collision_probability` predicts from the measured duty cycles (a
    gap between the two means the phases were not independent); ``overload_fraction``, the
    share of grid points whose summed demand exceeds the capacity. Units as :func:`read_corun`'s
    series (compute % of one core, memory % of host memory, MB/s).
    """

    collision_fraction: float
    independent_collision: float
    thresholds: dict
    overload_fraction: float | None = None


@dataclass
class MeasuredColocation:
    """:func:`measured_combined` result: the window (s), grid step (s) and per-resource loads."""

    jobs: list
    window_s: tuple
    dt_s: float
    n_samples: int
    resources: dict

    def to_dict(self) -> dict:
        return {"jobs": list(self.jobs), "window_s": list(self.window_s), "dt_s": self.dt_s,
                "n_samples": self.n_samples,
                "resources": {r: load.to_dict() for r, load in self.resources.items()}}


def measured_combined(series_by_job: Mapping, capacity: Mapping | None = None, thresholds: Mapping | None = None,
                      *, t0: float | None = None, t1: float | None = None, dt: float | None = None,
                      random_state: int | None = 0) -> MeasuredColocation:
    """Combined mean load, collision and overload fractions of jobs *measured* running together.

    ``series_by_job``: ``{job: {resource: (t, values)}}`` with ``t`` in s on a clock shared by
    the jobs, or ``{job: DataFrame}`` as returned by :meth:`RawSeries.rates` (index t, columns
    compute, memory, tx, rx). A value at ``t[k]`` is the rate over ``(t[k-1], t[k]]``, so every
    series is read on a common grid of step ``dt`` (default: the smallest median sampling step)
    over the time all jobs were measured (cut to ``[t0, t1]`` when given, e.g. the steady state).

    ``thresholds``: ``{job: {resource: value}}``, a sample above it is in burst. Missing ones
    are fitted per job and resource on its own samples in the window by the burst/idle labeller
    (:class:`driple.collect.labels.kmeans.BurstIdleLabeller`, 2-means, midpoint of the centres).
    ``capacity``: ``{resource: capacity}`` as for :func:`driple.predict.colocate.colocate`, for
    the overload fraction.
    """
    import numpy as np

    if not isinstance(series_by_job, Mapping) or len(series_by_job) < 2:
        raise DripleError("measured_combined needs {job: series} for at least 2 jobs")
    cap = check_capacity(capacity or {})
    thresholds = thresholds or {}
    jobs = [str(j) for j in series_by_job]
    data = {str(j): _as_series(s, str(j)) for j, s in series_by_job.items()}
    resources = [r for r in resource_names() if all(r in data[j] for j in jobs)]
    if not resources:
        raise DripleError(f"the jobs share no resource series; each needs some of {list(resource_names())}")

    lo = max(data[j][r][0][0] for j in jobs for r in resources)
    hi = min(data[j][r][0][-1] for j in jobs for r in resources)
    if t0 is not None:
        lo = max(lo, float(t0))
    if t1 is not None:
        hi = min(hi, float(t1))
    if dt is None:
        steps = [np.median(np.diff(data[j][r][0])) for j in jobs for r in resources if len(data[j][r][0]) > 1]
        dt = float(min(steps)) if steps else 0.0
    if not dt > 0:
        raise DripleError(f"the grid step dt must be positive, got {dt}")
    n = int(np.floor((hi - lo) / dt + 1e-9))
    if n < 2:
        raise DripleError(
            f"the jobs were measured together for {max(hi - lo, 0.0):.3g} s only (window {lo:.3g}..{hi:.3g} s): "
            "too short, or their clocks are not shared"
        )
    grid = lo + dt * (np.arange(n) + 0.5)

    out = {}
    for r in resources:
        values, above, thr_of = {}, {}, {}
        for j in jobs:
            t, v = data[j][r]
            on_grid = v[np.minimum(np.searchsorted(t, grid, side="left"), len(t) - 1)]
            thr = (thresholds.get(j) or {}).get(r)
            if thr is None:
                inside = (t > lo) & (t <= hi + dt)
                thr = _fit_threshold(t[inside], v[inside], r, random_state) if inside.sum() >= 2 else np.inf
            thr_of[j] = float(thr)
            values[j] = on_grid
            above[j] = on_grid > thr
        total = np.sum([values[j] for j in jobs], axis=0)
        count = np.sum([above[j] for j in jobs], axis=0)
        duty = {j: float(above[j].mean()) for j in jobs}
        load = MeasuredLoad(
            resource=r,
            unit=resource(r).unit,
            combined_mean=float(total.mean()),
            collision_fraction=float((count >= 2).mean()),
            independent_collision=collision_probability(list(duty.values())),
            duty_cycles=duty,
            mean_loads={j: float(values[j].mean()) for j in jobs},
            thresholds=thr_of,
        )
        if r in cap:
            load.capacity = cap[r]
            load.utilisation = load.combined_mean / cap[r]
            load.overload_fraction = float((total > overload_level(cap[r])).mean())
        out[r] = load
    return MeasuredColocation(jobs=jobs, window_s=(float(lo), float(hi)), dt_s=float(dt), n_samples=n,
                              resources=out)


def _as_series(s, job: str) -> dict:
    """``{resource: (t, values)}`` with NaNs dropped and t sorted, from a dict or a DataFrame."""
    import numpy as np

    if hasattr(s, "columns") and hasattr(s, "index"):
        t = np.asarray(s.index, dtype=np.float64)
        s = {c: (t, s[c].to_numpy(dtype=np.float64)) for c in s.columns if c in resource_names()}
    if not isinstance(s, Mapping):
        raise DripleError(f"series of job {job!r} must be {{resource: (t, values)}} or a rates DataFrame")
    out = {}
    for r, tv in s.items():
        if r not in resource_names():
            continue
        t, v = (np.asarray(x, dtype=np.float64).ravel() for x in tv)
        if len(t) != len(v):
            raise DripleError(f"job {job!r} {r}: {len(t)} times for {len(v)} values")
        ok = np.isfinite(t) & np.isfinite(v)
        t, v = t[ok], v[ok]
        if len(t) == 0:
            raise DripleError(f"job {job!r} has no valid {r} samples")
        order = np.argsort(t, kind="stable")
        out[r] = (t[order], v[order])
    return out


def _fit_threshold(t: np.ndarray, v: np.ndarray, resource: str, random_state) -> float:
    import numpy as np

    from driple.collect.labels.kmeans import BurstIdleLabeller, sample_durations
    from driple.metrics import resource as declared

    w = sample_durations(t)
    w = np.where(w > 0, w, w[0] if w[0] > 0 else 1.0)  # repeated timestamps: one median step
    lab = BurstIdleLabeller(random_state=random_state, min_gap=declared(resource).min_gap).fit(v, w)
    return float(lab.threshold_)


# -- the collector process of one job -------------------------------------------------------------

def _child_main(config_path: str) -> int:
    """Run one job of a co-run as ``driple collect run`` would and write its result as JSON.

    Signals: SIGTERM/SIGHUP stop the job (the launcher turns them into an interrupt while the
    job runs); before it starts they keep it from starting; after it they are ignored, and
    so is SIGINT throughout (the co-run forwards a terminal Ctrl-C as SIGTERM), so a finished
    job's row is always written.
    """
    cfg = json.loads(Path(config_path).read_text())
    stop = []

    def _note(signum, frame):
        stop.append(signum)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _note)
    from driple.collect.launcher import run_job

    if stop:  # told to stop while starting up: nothing was launched
        write_json(Path(cfg["result"]), {"error": "interrupted by Ctrl-C/SIGTERM before the job started"})
        return 130
    code = 0
    try:
        result = run_job(JobSpec.from_dict(cfg["spec"]), cfg["setting"], seconds=cfg["seconds"],
                         out_dir=cfg["out_dir"], timeout=cfg["timeout"], period_s=cfg["period_s"],
                         job_id=cfg["job_id"], record=False,
                         master_port=cfg.get("master_port"),  # the co-run's: one port per job
                         start_gate=cfg.get("start_gate"),
                         host_probe_on=False)  # two probes at once would measure each other
    except JobInterrupted as interrupted:
        result, code = interrupted.result, 130
    except DripleError as err:
        write_json(Path(cfg["result"]), {"error": str(err)})
        return 2
    write_json(Path(cfg["result"]), {
        "row": result.row,
        "raw_path": str(result.raw_path) if result.raw_path else None,
        "detail_path": str(result.detail_path) if result.detail_path else None,
    })
    return code


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(_child_main(sys.argv[2]))
    sys.exit("usage: python -m driple.collect.corun --child CONFIG.json (started by run_corun)")
