"""Run a grid of jobs one after another into a dataset directory; stop and resume at will.

A grid (YAML) lists jobs::

    seconds: 10            # measurement per job after warm-up (s); the command line may override
    warmup: 5              # warm-up iterations (optional)
    jobs:
      - {model: resnet, knobs: {depth: 20}, batch_size: 32, optimizer: sgd}
      - {model: gpt_tiny, batch_size: 16, optimizer: adam}

:func:`write_grid` makes one from :func:`driple.zoo.sweep_configs`. :func:`run_sweep` writes
``results.csv`` (one row per job, rewritten atomically after each job), ``raw/<job_id>.*``,
``provenance.json`` and a copy of the grid (``grid.yaml``) into the dataset directory.

Resuming: each job has a stable id (spec + setting + seconds). A restarted sweep skips jobs
whose last row is ``ok`` or ``failed`` (a crash or a hang would fail again; ``retry_failed``
runs them anyway). A job stopped by Ctrl-C is recorded as ``failed`` with a reason starting
with ``interrupted`` and **is run again** by the next sweep; its new row supersedes the old
one (:meth:`ResultTable.read` keeps the last row per job). Rows of finished jobs are never lost.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import os
import time
from pathlib import Path

from driple.collect.files import write_text
from driple.collect.job import JobInterrupted, JobSpec, job_id
from driple.collect.results import ResultTable
from driple.errors import DripleError
from driple.settings import parse_setting


def read_grid_file(path: str | os.PathLike, what: str, key: str, hint: str = "") -> dict:
    """The YAML mapping of a grid file whose ``key`` is a non-empty list (a bare list is taken
    as that list); a :class:`DripleError` naming ``what`` (e.g. "grid") otherwise."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise DripleError(f"cannot read {what} {path}: {err.strerror}") from err
    except yaml.YAMLError as err:
        raise DripleError(f"{what} {path} is not valid YAML: {err}") from err
    if isinstance(data, list):
        data = {key: data}
    if not isinstance(data, dict) or not isinstance(data.get(key), list) or not data[key]:
        raise DripleError(f"{what} {path} needs a non-empty '{key}:' list{hint}")
    return data


def load_grid(path: str | os.PathLike) -> dict:
    """Read a grid file: ``{"seconds", "warmup", "setting", "jobs": [JobSpec, ...]}``."""
    path = Path(path)
    data = read_grid_file(path, "grid", "jobs", " (see `driple collect grid --help`)")
    warmup = data.get("warmup")
    jobs = []
    for i, entry in enumerate(data["jobs"]):
        if not isinstance(entry, dict):
            raise DripleError(f"grid {path}: job {i} must be a mapping with at least 'model'")
        entry = dict(entry)
        if warmup is not None:
            entry.setdefault("warmup", warmup)
        try:
            jobs.append(JobSpec.from_dict(entry))
        except (DripleError, TypeError) as err:
            raise DripleError(f"grid {path}: job {i}: {err}") from err
    return {"seconds": data.get("seconds"), "setting": data.get("setting"), "warmup": warmup, "jobs": jobs,
            "max_seconds": data.get("max_seconds"), "min_iterations": data.get("min_iterations")}


def write_grid(path: str | os.PathLike, n: int | None = None, seed: int = 0,
               seconds: float | None = None, warmup: int | None = None) -> Path:
    """Write a grid of the zoo's sweep configurations (the first ``n``) to ``path``."""
    import yaml

    from driple.zoo import sweep_configs

    try:
        configs = list(sweep_configs(seed=seed, n=n))
    except TypeError:  # a sweep_configs without ``n``
        configs = list(sweep_configs(seed=seed))
    except NotImplementedError as err:
        raise DripleError("the zoo cannot draw sweep configurations yet (driple.zoo.sweep_configs)") from err
    if n is not None:
        configs = configs[: int(n)]
    jobs = []
    for c in configs:
        job = {"model": c["name"], "knobs": dict(c.get("knobs") or {}), "batch_size": c.get("batch_size"),
               "optimizer": c.get("optimizer", "sgd")}
        if "est_seconds" in c:  # the zoo's step-time estimate: informative only
            job["est_seconds"] = c["est_seconds"]
        jobs.append(job)
    doc = {"seed": seed, "jobs": jobs}
    if seconds is not None:
        doc["seconds"] = float(seconds)
    if warmup is not None:
        doc["warmup"] = int(warmup)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, f"# driple collect grid: {len(jobs)} jobs from driple.zoo.sweep_configs(seed={seed})\n"
                      + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))


def _copy_grid(grid_path: Path, out_dir: Path) -> None:
    """Keep the grid with the dataset; an older, different grid is kept as grid-<n>.yaml."""
    dest = out_dir / "grid.yaml"
    text = grid_path.read_text()
    if dest.exists():
        if dest.resolve() == grid_path.resolve() or dest.read_text() == text:
            return
        n = 1
        while (out_dir / f"grid-{n}.yaml").exists():
            n += 1
        os.replace(dest, out_dir / f"grid-{n}.yaml")
    write_text(dest, text)


def host_busy_pct(window_s: float = 3.0) -> float:
    """Share (%) of the host's CPU time that was busy over the next ``window_s`` seconds."""
    def read():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields[:8]), idle

    total0, idle0 = read()
    time.sleep(window_s)
    total1, idle1 = read()
    dt = max(total1 - total0, 1)
    return 100.0 * (dt - (idle1 - idle0)) / dt


def wait_for_quiet_host(max_busy_pct: float, window_s: float = 3.0, on_wait=None) -> float:
    """Block until the host was at most ``max_busy_pct`` % busy over ``window_s``; returns the
    seconds waited. Between jobs the sweep itself is idle, so what is measured is other work."""
    start = time.monotonic()
    while True:
        busy = host_busy_pct(window_s)
        if busy <= max_busy_pct:
            return time.monotonic() - start
        if on_wait is not None:
            on_wait(busy, time.monotonic() - start)


@dataclass
class SweepPlan:
    """What a sweep is about to do, whichever executor runs its jobs: the setting and
    measurement parameters, the result table, the pending ``(spec, job_id)`` pairs in grid
    order and the counts so far."""

    setting: object
    seconds: float
    max_seconds: float
    min_iterations: int
    table: ResultTable
    pending: list
    counts: dict


def plan_sweep(grid, out_dir, setting=None, *, seconds=None, max_seconds=None, min_iterations=None,
               retry_failed=False, retry_contended=None, retry_delayed=None, max_jobs=None,
               allow_other_hardware=False) -> SweepPlan:
    """Read the grid, check its models and the dataset's hardware, record the provenance and
    find the jobs not yet done in ``out_dir`` (see :func:`run_sweep` for the options)."""
    from driple.collect.launcher import DEFAULT_MAX_SECONDS, MIN_ITERATIONS
    from driple.collect.provenance import record

    out_dir = Path(out_dir)
    grid_path = None
    if not isinstance(grid, dict):
        grid_path = Path(grid)
        grid = load_grid(grid_path)
    setting = parse_setting(setting or grid.get("setting") or _missing_setting())
    seconds = float(seconds or grid.get("seconds") or 10.0)
    max_seconds = float(max_seconds or grid.get("max_seconds") or DEFAULT_MAX_SECONDS)
    min_iterations = int(min_iterations or grid.get("min_iterations") or MIN_ITERATIONS)
    ResultTable(out_dir).check_hardware(allow=allow_other_hardware)
    from driple.zoo.workload import check_models

    check_models([spec.model for spec in grid["jobs"]])
    out_dir.mkdir(parents=True, exist_ok=True)
    if grid_path is not None:
        _copy_grid(grid_path, out_dir)
    record(out_dir, setting=setting.id, seconds=seconds, jobs=len(grid["jobs"]))

    table = ResultTable(out_dir)
    done = table.done_ids(retry_failed=retry_failed, max_contention=retry_contended,
                          max_run_delay=retry_delayed)
    jobs = [(spec, job_id(spec, setting.id, seconds)) for spec in grid["jobs"]]
    pending = [(s, j) for s, j in jobs if j not in done]
    counts = {"total": len(jobs), "skipped": len(jobs) - len(pending), "ok": 0, "failed": 0}
    if max_jobs is not None:
        if max_jobs < 0:
            raise DripleError(f"--max-jobs must be >= 0, not {max_jobs}")
        pending = pending[:max_jobs]  # the rest is left for a later run, not "done before"

    return SweepPlan(setting, seconds, max_seconds, min_iterations, table, pending, counts)


def run_sweep(
    grid: str | os.PathLike | dict,
    out_dir: str | os.PathLike,
    setting=None,
    *,
    seconds: float | None = None,
    timeout: float | None = None,
    retry_failed: bool = False,
    retry_contended: float | None = None,
    retry_delayed: float | None = None,
    progress: bool = True,
    launcher: str = "env",
    period_s: float = 0.01,
    max_jobs: int | None = None,
    wait_quiet: float | None = None,
    max_seconds: float | None = None,
    min_iterations: int | None = None,
    allow_other_hardware: bool = False,
    host_lock: str | os.PathLike | None = None,
    until: float | None = None,
    nodes: int | None = None,
) -> dict:
    """Run every job of ``grid`` in ``setting`` not yet done in ``out_dir``; return counts.

    ``max_jobs`` runs at most that many pending jobs (in grid order) and leaves the rest for a
    later run, so a long grid can be collected in budgeted slices. ``wait_quiet`` (% of host
    CPU) holds each job until other processes leave the host that quiet (shared machines).

    Counts: ``total`` jobs in the grid, ``skipped`` (done before), ``ok``, ``failed``. Ctrl-C
    records the running job as interrupted and re-raises ``KeyboardInterrupt``.
    ``retry_contended`` (% of host CPU) re-runs ok jobs during which other processes used more;
    ``retry_delayed`` (%) re-runs ok jobs whose ranks waited longer for a CPU (``run_delay_pct``).
    ``nodes``: measure each job as a multi-node job (:func:`~driple.collect.launcher.run_job`).
    """
    from driple.collect.launcher import run_job

    plan = plan_sweep(grid, out_dir, setting, seconds=seconds, max_seconds=max_seconds,
                      min_iterations=min_iterations, retry_failed=retry_failed,
                      retry_contended=retry_contended, retry_delayed=retry_delayed,
                      max_jobs=max_jobs, allow_other_hardware=allow_other_hardware)
    setting, seconds, max_seconds, min_iterations = plan.setting, plan.seconds, plan.max_seconds, plan.min_iterations
    table, pending, counts = plan.table, plan.pending, plan.counts
    if nodes is not None:  # refused before the first job, not as a failed row per job
        from driple.collect.multinode import check_nodes

        check_nodes(setting, nodes, launcher)

    from tqdm import tqdm

    bar = tqdm(total=counts["skipped"] + len(pending), initial=counts["skipped"], unit="job", desc=setting.id,
               disable=not progress, dynamic_ncols=True)
    try:
        for n, (spec, jid) in enumerate(pending):
            if until is not None and time.monotonic() > until:
                counts["left"] = len(pending) - n
                break
            if wait_quiet is not None:
                bar.set_postfix_str("waiting for a quiet host", refresh=True)
                waited = wait_for_quiet_host(
                    wait_quiet, on_wait=lambda busy, t: bar.set_postfix_str(
                        f"waiting for a quiet host ({busy:.0f}% busy, {t:.0f} s)", refresh=True))
                counts["waited_s"] = counts.get("waited_s", 0.0) + waited
            bar.set_postfix_str(f"{spec.model} bs={spec.batch_size}", refresh=True)
            try:
                with holding_host(host_lock):
                    result = run_job(spec, setting, seconds=seconds, out_dir=out_dir, timeout=timeout,
                                     launcher=launcher, period_s=period_s, job_id=jid, record=False,
                                     max_seconds=max_seconds, min_iterations=min_iterations, nodes=nodes)
            except JobInterrupted as stop:
                table.append(stop.result.row)
                counts["failed"] += 1
                raise KeyboardInterrupt from None
            table.append(result.row)
            counts["ok" if result.ok else "failed"] += 1
            if not result.ok:
                bar.write(f"{jid}: failed: {result.row['reason']}")
            bar.update(1)
    finally:
        bar.close()
    return counts


@contextlib.contextmanager
def holding_host(lock_path: str | os.PathLike | None, grace_s: float = 1.0):
    """Hold an exclusive ``flock`` on ``lock_path`` while a job is measured (no-op for None).

    Other work on the same host that takes the same lock (``flock LOCK command``) then never
    runs during a measurement, and a measurement never starts during it. After releasing, wait
    ``grace_s`` so that a command already waiting gets its turn before the next job."""
    if lock_path is None:
        yield
        return
    import fcntl

    Path(lock_path).parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    time.sleep(grace_s)


def _missing_setting():
    raise DripleError("no setting: give --setting (e.g. cpu-ddp-w2-lo) or 'setting:' in the grid")
