"""No orphans: a collector killed outright takes its ranks with it, SIGTERM exits 143, and a job
never starts next to ranks of a dead collector."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from driple.collect.launcher import stale_ranks
from driple.collect.workers.common import DRIVER_ENV

root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def _ranks(pids_of, out: Path) -> list[int]:
    """Live rank processes of the jobs writing into ``out`` (their --job file lies there)."""
    pids = []
    for pid in pids_of(str(out)):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"driple.collect.workers." in cmd:
            pids.append(pid)
    return pids


def _start_collector(out: Path, tiny_model: str, setting: str = "cpu-ddp-w2-lo"):
    """`driple collect run` of a long tiny job; returns once both ranks train."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "driple", "collect", "run", tiny_model, "--setting", setting,
         "--batch-size", "8", "--set", "width=64", "--seconds", "120", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and proc.poll() is None:
        iters = list(out.glob("raw/*.work/worker*.iters"))
        if len(iters) == 2 and all(f.stat().st_size > 0 for f in iters):
            return proc
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"the job never trained: {proc.communicate()}")


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _gone_within(pids_of, out: Path, seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    while _ranks(pids_of, out) and time.monotonic() < end:
        time.sleep(0.05)
    return _ranks(pids_of, out)


@pytest.mark.slow
def test_sigkill_of_the_collector_takes_its_ranks_along(tmp_path, tiny_model, pids_of):
    out = tmp_path / "ds"
    proc = _start_collector(out, tiny_model)
    try:
        assert len(_ranks(pids_of, out)) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        left = _gone_within(pids_of, out, 2.0)
        assert left == [], f"ranks outlived their collector by more than 2 s: {left}"
    finally:
        _kill(_ranks(pids_of, out))
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_sigterm_exits_143_and_cleans_up(tmp_path, tiny_model, pids_of):
    out = tmp_path / "ds"
    proc = _start_collector(out, tiny_model)
    try:
        os.kill(proc.pid, signal.SIGTERM)  # the collector only, as `kill <pid>` would
        _, err = proc.communicate(timeout=60)
    finally:
        _kill(_ranks(pids_of, out))
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert _ranks(pids_of, out) == []
    assert "interrupted" in (out / "results.csv").read_text()


@root
@pytest.mark.slow
@pytest.mark.netns
def test_sigkill_of_an_emulated_collector(tmp_path, tiny_model, pids_of, leftovers):
    """Ranks sit in namespaces behind `ip netns exec` (which execs: the collector stays their
    parent); they die with it, and the next run of any setting removes its namespaces."""
    out = tmp_path / "ds"
    proc = _start_collector(out, tiny_model, setting="cpu-ddp-w2-1g")
    tag = None
    try:
        tag = f"driple-{_b36(proc.pid)}"
        assert any(n.startswith(tag) for n in leftovers()["netns"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert _gone_within(pids_of, out, 2.0) == []
        assert any(n.startswith(tag) for n in leftovers()["netns"])  # nobody removed them yet
        from driple.cli import main

        code = main(["collect", "run", tiny_model, "--batch-size", "8", "--set", "width=64",
                     "--seconds", "1", "--warmup", "2", "--out", str(tmp_path / "next")])
        assert code in (0, 1)  # it ran (ok, or failed on a busy host); it was not refused
        assert not any(n.startswith(tag) for n in leftovers()["netns"] + leftovers()["links"])
    finally:
        _kill(_ranks(pids_of, out))
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if tag:
            from driple.collect.netns import remove_stale

            remove_stale()


def _b36(n: int) -> str:
    from driple.collect.netns import _b36 as b36

    return b36(n)


def _sleeper(driver_pid: int | None) -> subprocess.Popen:
    """A process that looks like a rank (a driple.collect.workers argument) of ``driver_pid``."""
    env = dict(os.environ)
    if driver_pid is not None:
        env[DRIVER_ENV] = str(driver_pid)
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                             "driple.collect.workers.ddp"], env=env)


def test_a_job_refuses_to_start_next_to_ranks_of_a_dead_collector(tmp_path, tiny_model, capsys):
    dead = subprocess.Popen(["true"])
    dead.wait()  # a collector that is gone
    stale, live = _sleeper(dead.pid), _sleeper(os.getpid())
    try:
        deadline = time.monotonic() + 30
        while stale.pid not in stale_ranks() and time.monotonic() < deadline:
            time.sleep(0.1)  # until its command line is readable
        found = stale_ranks()
        assert stale.pid in found and live.pid not in found
        from driple.cli import main

        assert main(["collect", "run", tiny_model, "--out", str(tmp_path)]) == 2
        last = capsys.readouterr().err.splitlines()[-1]
        assert last.startswith("driple: error: ") and f"kill {' '.join(map(str, found))}" in last
        assert not (tmp_path / "raw").exists() or not list((tmp_path / "raw").iterdir())
    finally:
        for p in (stale, live):
            p.kill()
            p.wait()
