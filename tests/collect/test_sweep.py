"""Grids and sweeps: resumable runs, Ctrl-C that loses nothing."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

import driple.collect.launcher as launcher
from driple.collect.job import JobInterrupted, JobResult, job_id
from driple.collect.results import ResultTable
from driple.collect.sweep import load_grid, run_sweep, write_grid
from driple.errors import DripleError

TINY = f"{Path(__file__).with_name('conftest.py')}:tiny_mlp"


def _grid(tmp_path, n=3, seconds=2):
    jobs = [{"model": TINY, "knobs": {"width": 64}, "batch_size": 8 * (i + 1), "optimizer": "sgd"} for i in range(n)]
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump({"seconds": seconds, "warmup": 2, "jobs": jobs}))
    return path


def test_write_grid_from_zoo_configs(tmp_path, monkeypatch):
    import driple.zoo

    configs = [{"name": "mlp", "knobs": {"hidden": 64}, "batch_size": 8, "optimizer": "adam"},
               {"name": "resnet", "knobs": {}, "batch_size": 4, "optimizer": "sgd"}]
    monkeypatch.setattr(driple.zoo, "sweep_configs", lambda seed=0, **kw: list(configs))
    path = write_grid(tmp_path / "g.yaml", n=1, seed=3, seconds=5)
    grid = load_grid(path)
    assert grid["seconds"] == 5 and len(grid["jobs"]) == 1
    job = grid["jobs"][0]
    assert (job.model, job.knobs, job.batch_size, job.optimizer) == ("mlp", {"hidden": 64}, 8, "adam")


def test_bad_grids_are_explained(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs: []\n")
    with pytest.raises(DripleError, match="non-empty"):
        load_grid(bad)
    bad.write_text("jobs:\n  - {model: mlp, optimizer: lbfgs}\n")
    with pytest.raises(DripleError, match="job 0"):
        load_grid(bad)
    with pytest.raises(DripleError, match="cannot read grid"):
        load_grid(tmp_path / "missing.yaml")
    grid = load_grid(_grid(tmp_path))
    assert [j.warmup for j in grid["jobs"]] == [2, 2, 2]
    with pytest.raises(DripleError, match="no setting"):
        run_sweep(grid, tmp_path / "out", None, progress=False)


def test_sweep_resumes_where_it_stopped(tmp_path, monkeypatch):
    """ok and crashed jobs are kept; the job stopped by Ctrl-C is recorded, then run again."""
    calls = []

    def fake_run_job(spec, setting, seconds, out_dir, job_id, **kw):
        calls.append(spec.batch_size)
        row = {"job_id": job_id, "setting": setting.id, "model": spec.model, "batch_size": spec.batch_size}
        if spec.batch_size == 16 and len(calls) == 2:
            raise JobInterrupted(JobResult({**row, "status": "failed", "reason": "interrupted by Ctrl-C"}, None))
        if spec.batch_size == 8 and len(calls) == 1:
            return JobResult({**row, "status": "failed", "reason": "worker1 exited with code 1: boom"}, None)
        return JobResult({**row, "status": "ok", "reason": ""}, None)

    monkeypatch.setattr(launcher, "run_job", fake_run_job)
    grid, out = _grid(tmp_path), tmp_path / "ds"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(grid, out, "cpu-ddp-w2-lo", progress=False)
    assert calls == [8, 16]
    rows = ResultTable(out).read(history=True)
    assert list(rows["status"]) == ["failed", "failed"]

    counts = run_sweep(grid, out, "cpu-ddp-w2-lo", progress=False)
    assert calls == [8, 16, 16, 24]  # the crashed job is not retried, the interrupted one is
    assert counts == {"total": 3, "skipped": 1, "ok": 2, "failed": 0}
    assert set(ResultTable(out).read()["status"]) == {"ok", "failed"}
    assert len(ResultTable(out).read()) == 3 and len(ResultTable(out).read(history=True)) == 4

    counts = run_sweep(grid, out, "cpu-ddp-w2-lo", progress=False, retry_failed=True)
    assert calls[-1] == 8 and counts["skipped"] == 2
    assert (out / "grid.yaml").read_text() == grid.read_text()
    import json

    assert len(json.loads((out / "provenance.json").read_text())["runs"]) == 3


def test_max_jobs_leaves_the_rest_for_later(tmp_path, monkeypatch, capsys):
    """A slice of --max-jobs: the jobs it leaves are pending, not "done before" (they were
    counted as done, and the "left for a later run" line never showed)."""
    from driple.cli import main

    monkeypatch.setattr(launcher, "run_job", lambda spec, setting, seconds, out_dir, job_id, **kw: JobResult(
        {"job_id": job_id, "setting": setting.id, "model": spec.model, "batch_size": spec.batch_size,
         "status": "ok", "reason": ""}, None))
    grid, out = _grid(tmp_path, n=5), tmp_path / "ds"
    assert run_sweep(grid, out, "cpu-ddp-w2-lo", progress=False, max_jobs=2) == {
        "total": 5, "skipped": 0, "ok": 2, "failed": 0}
    assert main(["collect", "sweep", "--grid", str(grid), "--out", str(out), "--setting", "cpu-ddp-w2-lo",
                 "--max-jobs", "2", "--no-progress"]) == 0
    said = capsys.readouterr().out
    assert "5 jobs: 2 done before, 2 ok, 0 failed" in said and "1 job left for a later run (--max-jobs 2)" in said


@pytest.mark.slow
def test_ctrl_c_during_a_sweep_loses_nothing(tmp_path, pids_of, terminal_preexec):
    """SIGINT to the sweep's process group (a terminal's Ctrl-C) while its second job runs."""
    grid, out = _grid(tmp_path, n=3, seconds=2), tmp_path / "ds"
    proc = subprocess.Popen(
        [sys.executable, "-m", "driple", "collect", "sweep", "--grid", str(grid), "--out", str(out),
         "--setting", "cpu-ddp-w2-lo", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=terminal_preexec,
    )
    try:
        second = job_id(load_grid(grid)["jobs"][1], "cpu-ddp-w2-lo", 2.0)
        iters = out / "raw" / f"{second}.work" / "worker0.iters"
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            if iters.exists() and iters.stat().st_size > 0:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        assert iters.exists(), "the second job never started"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "Run the same command again" in err
    rows = ResultTable(out).read(history=True)
    assert list(rows["status"]) == ["ok", "failed"]
    assert rows["reason"][1].startswith("interrupted")
    assert rows["job_id"][1] == second
    assert pids_of(str(out)) == []  # no worker left
    assert not list((out / "raw").glob("*.work"))
    table = ResultTable(out)
    assert table.done_ids() == {rows["job_id"][0]}  # the next sweep re-runs the interrupted job
