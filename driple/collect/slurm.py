"""Sweeps through Slurm: every grid point one exclusive Slurm job, submitted with submitit.

Measurement needs a quiet host, so each point asks for a whole node (``--exclusive``). The job
runs :func:`measure_point` on its node: the collector measures the point into the dataset
directory (a filesystem the nodes share, as on every Slurm cluster) and returns the row; only
the driver writes ``results.csv``, as the rows come back. What was submitted is kept in
``<out>/slurm/submitted.json`` (grid job id → Slurm job id) beside submitit's own folder, so a
driver stopped and started again attaches to the jobs still queued or running, gathers those
that finished meanwhile and never submits a point twice; a point with a row is never run again.

A job that ends without a result (``scancel``, a node failure, its time limit) becomes a failed
row with a reason: Slurm's state for it (``scontrol``, which works without an accounting
database), and the end of its error log. While the controller cannot be reached (restarted,
say), the driver waits and asks again; running jobs go on meanwhile.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from driple.errors import DripleError

FOLDER = "slurm"
SUBMITTED = "submitted.json"
LIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED"}
#: After a job leaves the queue, how long its result file may take to appear (shared filesystems).
RESULT_GRACE_S = 10.0


def measure_point(spec: dict, setting: str, seconds: float, out_dir: str, job_id: str,
                  timeout: float | None, max_seconds: float, min_iterations: int, launcher: str) -> dict:
    """What a Slurm job runs: one point measured by the collector on this node; its row, with the
    node's name and the Slurm job id."""
    from driple.collect.launcher import run_job

    result = run_job(spec, setting, seconds=seconds, out_dir=out_dir, job_id=job_id, record=False,
                     timeout=timeout, max_seconds=max_seconds, min_iterations=min_iterations,
                     launcher=launcher)
    return {**result.row, "node": socket.gethostname(), "slurm_job_id": os.environ.get("SLURM_JOB_ID")}


class Submitted:
    """``<out>/slurm/submitted.json``: the points submitted and not yet gathered."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / FOLDER / SUBMITTED
        self.jobs: dict[str, str] = json.loads(self.path.read_text()) if self.path.exists() else {}

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.jobs, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def slurm_states() -> dict[str, str] | None:
    """``{job id: state}`` of the jobs Slurm still lists, or None when the controller cannot be
    reached."""
    try:
        out = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return dict(line.split(None, 1) for line in out.stdout.splitlines() if line.strip())


def final_state(slurm_id: str) -> str:
    """Slurm's last word on a job that left the queue: ``CANCELLED``, ``FAILED``, ... or
    ``unknown`` (purged from the controller's memory and no accounting)."""
    try:
        out = subprocess.run(["scontrol", "show", "job", "-o", str(slurm_id)], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
    state = fields.get("JobState", "unknown")
    reason = fields.get("Reason")
    return f"{state} ({reason})" if reason and reason != "None" else state


def _log_tail(job, lines: int = 3) -> str:
    try:
        text = Path(job.paths.stderr).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(t.strip() for t in text[-lines:])


def run_slurm_sweep(grid, out_dir, setting=None, *, partition: str | None = None,
                    time_min: int | None = None, poll_s: float = 5.0, progress: bool = True,
                    launcher: str = "env", timeout: float | None = None, **plan_options) -> dict:
    """Run the grid's pending points as Slurm jobs (module docstring); returns the counts
    (``total``, ``skipped``, ``ok``, ``failed``, ``submitted`` now, ``attached`` from before).
    ``plan_options`` are :func:`driple.collect.sweep.plan_sweep`'s."""
    try:
        import submitit
    except ImportError:
        raise DripleError("the slurm executor needs submitit: pip install 'driple[slurm]'") from None
    from tqdm import tqdm

    from driple.collect.launcher import default_timeout
    from driple.collect.sweep import plan_sweep

    out_dir = Path(out_dir).resolve()
    plan = plan_sweep(grid, out_dir, setting, **plan_options)
    submitted = Submitted(out_dir)
    folder = out_dir / FOLDER / "jobs"
    executor = submitit.SlurmExecutor(folder=folder)  # not AutoExecutor: its plugin lookup needs setuptools
    job_timeout = timeout or default_timeout(plan.seconds, plan.max_seconds)
    params = {"time": int(time_min or max(5, job_timeout // 60 + 5)), "exclusive": True,
              "nodes": 1, "ntasks_per_node": 1}
    if partition:
        params["partition"] = partition
    executor.update_parameters(**params)

    counts = {**plan.counts, "submitted": 0, "attached": 0}
    jobs = {}
    for spec, jid in plan.pending:
        if jid in submitted.jobs:
            jobs[jid] = (spec, submitit.SlurmJob(folder=folder, job_id=submitted.jobs[jid]))
            counts["attached"] += 1
            continue
        executor.update_parameters(job_name=f"driple-{jid}")
        job = executor.submit(measure_point, spec.to_dict(), plan.setting.id, plan.seconds, str(out_dir),
                              jid, timeout, plan.max_seconds, plan.min_iterations, launcher)
        submitted.jobs[jid] = str(job.job_id)
        submitted.save()
        jobs[jid] = (spec, job)
        counts["submitted"] += 1

    bar = tqdm(total=counts["skipped"] + len(jobs), initial=counts["skipped"], unit="job",
               desc=f"{plan.setting.id} (slurm)", disable=not progress, dynamic_ncols=True)
    gone_since: dict[str, float] = {}
    try:
        while jobs:
            states = slurm_states()
            if states is None:
                bar.set_postfix_str("Slurm controller unreachable; asking again", refresh=True)
            for jid, (spec, job) in list(jobs.items()):
                row = _gathered(job, spec, plan, jid, states, gone_since)
                if row is None:
                    continue
                plan.table.append(row)
                del jobs[jid]
                submitted.jobs.pop(jid, None)
                submitted.save()
                counts["ok" if row["status"] == "ok" else "failed"] += 1
                if row["status"] != "ok":
                    bar.write(f"{jid}: failed: {row['reason']}")
                bar.update(1)
            if jobs:
                time.sleep(poll_s)
    except KeyboardInterrupt:
        bar.write(f"stopped; {len(jobs)} Slurm job(s) go on: run the same command again to gather them")
        raise
    finally:
        bar.close()
    return counts


def _gathered(job, spec, plan, jid, states, gone_since) -> dict | None:
    """The row of a finished job, or None while it is queued or running (or unknown)."""
    from driple.collect.results import unrun_row

    sid = str(job.job_id)
    if Path(job.paths.result_pickle).exists():
        try:
            return job.result()
        except Exception as err:  # noqa: BLE001 - the job's own failure becomes its row's reason
            text = str(err).strip().splitlines()
            return unrun_row(spec, plan.setting, jid, plan.seconds,
                             f"slurm job {sid} raised: {text[-1] if text else type(err).__name__}",
                             slurm_job_id=sid)
    if states is None or states.get(sid) in LIVE:
        return None
    first = gone_since.setdefault(jid, time.monotonic())
    if time.monotonic() - first < RESULT_GRACE_S:
        return None
    tail = _log_tail(job)
    return unrun_row(spec, plan.setting, jid, plan.seconds,
                     f"slurm job {sid} ended {final_state(sid)} without a result"
                     + (f": {tail}" if tail else ""), slurm_job_id=sid)
