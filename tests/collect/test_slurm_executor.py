"""Sweeps through a real Slurm: a one-machine cluster started by ``scripts/slurm_local.py``.

The points are real collector jobs (the tiny MLP, 20 iterations). The tests check that every
point becomes one row, that killing the controller halfway loses no row and runs no point
twice, that a cancelled job becomes a failed row with Slurm's reason, and that nothing is left
behind. Without Slurm, munge or root they skip, saying so; CI installs them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm_local.py"


def _why_not() -> str | None:
    if shutil.which("slurmctld") is None and not Path("/usr/sbin/slurmctld").exists():
        return "Slurm is not installed (apt-get install slurm-wlm munge)"
    if not Path("/etc/munge/munge.key").exists():
        return "munge has no key (apt-get install munge)"
    if os.geteuid() != 0:
        return "slurmd needs root"
    try:
        import submitit  # noqa: F401
    except ImportError:
        return "submitit is not installed"
    return None


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    why = _why_not()
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("slurm")
    out = subprocess.run([sys.executable, str(SCRIPT), "start", "--dir", str(d)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(d / "slurm.conf")
    yield d
    subprocess.run([sys.executable, str(SCRIPT), "stop", "--dir", str(d)], check=True)
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old
    left = subprocess.run(["pgrep", "-f", str(d)], capture_output=True, text=True).stdout.split()
    assert left == [], f"daemons left behind: {left}"


def _grid(path: Path, tiny_model: str, n: int) -> Path:
    jobs = [{"model": tiny_model, "knobs": {"width": 64 + 16 * i}, "batch_size": 8, "optimizer": "sgd",
             "warmup": 2, "iterations": 20} for i in range(n)]
    path.write_text(yaml.safe_dump({"setting": "cpu-ddp-w2-lo", "seconds": 1.0, "jobs": jobs}))
    return path


def _sweep(grid: Path, out: Path, **kw) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "driple", "collect", "sweep", "--executor", "slurm", "--grid", str(grid),
           "--out", str(out), "--poll-seconds", "1", "--no-progress"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def _rows(out: Path) -> list[dict]:
    from driple.collect.results import ResultTable

    return ResultTable(out).raw_rows()[1]


def _queue() -> list[str]:
    return subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split()


def _drained(seconds: float = 30.0) -> list[str]:
    """The queue once it is empty, or what is left after ``seconds``: slurmctld drops a finished
    job from the queue a moment after the driver has its result, longer on a busy host."""
    deadline = time.monotonic() + seconds
    while _queue() and time.monotonic() < deadline:
        time.sleep(0.5)
    return _queue()


@pytest.fixture
def drivers():
    """Sweep drivers started by a test; any still running at its end is stopped."""
    started = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.communicate()


def test_twelve_points_survive_a_controller_restart(slurm, tiny_model, tmp_path, drivers):
    grid, out = _grid(tmp_path / "grid.yaml", tiny_model, 12), tmp_path / "ds"
    driver = _sweep(grid, out)
    drivers.append(driver)
    deadline = time.monotonic() + 300
    while len(_rows(out)) < 4 and time.monotonic() < deadline:  # halfway or so: kill the controller
        time.sleep(1)
    ctld = int((slurm / "slurmctld.pid").read_text().split()[0])
    os.kill(ctld, 15)  # killed as a restart does (it saves its state); the jobs on the node go on
    time.sleep(3)
    assert subprocess.run([sys.executable, str(SCRIPT), "start", "--dir", str(slurm)]).returncode == 0
    output, _ = driver.communicate(timeout=600)
    assert driver.returncode == 0, output
    rows = _rows(out)
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows), output
    assert len({r["job_id"] for r in rows}) == 12  # no point measured twice
    assert all(r["node"] and r["slurm_job_id"] for r in rows) and all(r["hardware"] for r in rows)
    again = _sweep(grid, out)  # everything done: nothing submitted
    drivers.append(again)
    text, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and "12 done before, 0 submitted now" in text, text
    assert _drained() == []


def test_a_cancelled_point_is_a_failed_row_with_slurms_reason(slurm, tiny_model, tmp_path, drivers):
    grid, out = _grid(tmp_path / "grid.yaml", tiny_model, 2), tmp_path / "ds"
    subprocess.run(["scontrol", "update", "nodename=ALL", "state=drain", "reason=test"], check=True,
                   capture_output=True)  # the points wait in the queue
    try:
        driver = _sweep(grid, out)
        drivers.append(driver)
        deadline = time.monotonic() + 60
        while len(_queue()) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        first = sorted(_queue(), key=int)[0]
        subprocess.run(["scancel", first], check=True)
    finally:
        subprocess.run(["scontrol", "update", "nodename=ALL", "state=resume"], check=True, capture_output=True)
    output, _ = driver.communicate(timeout=300)
    rows = {r["slurm_job_id"]: r for r in _rows(out)}
    assert rows[first]["status"] == "failed" and "CANCELLED" in rows[first]["reason"], output
    assert [r["status"] for k, r in rows.items() if k != first] == ["ok"]
    assert _drained() == []


def test_local_only_options_are_refused(tmp_path, tiny_model):
    from driple.cli import main

    grid = _grid(tmp_path / "grid.yaml", tiny_model, 1)
    assert main(["collect", "sweep", "--executor", "slurm", "--grid", str(grid), "--out", str(tmp_path / "d"),
                 "--wait-quiet", "10"]) == 2
