"""The co-run start gate: workers that finish warming up early wait for the others."""
from __future__ import annotations

import threading
import time

from driple.collect.workers.common import wait_at_start_gate


def test_no_gate_passes_at_once():
    t0 = time.monotonic()
    assert wait_at_start_gate({}, "worker0") is True
    assert time.monotonic() - t0 < 0.05


def test_early_worker_waits_for_a_late_one(tmp_path):
    gate = {"dir": str(tmp_path), "parties": 2, "timeout_s": 10.0}
    passed = {}

    def worker(name, delay):
        time.sleep(delay)
        ok = wait_at_start_gate({"start_gate": gate}, name, "warm")
        passed[name] = (ok, time.monotonic())

    threads = [threading.Thread(target=worker, args=("worker0", 0.0)),
               threading.Thread(target=worker, args=("worker1", 0.3))]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert passed["worker0"][0] and passed["worker1"][0]
    # the early one passed only once the late one arrived, and both within a few polls of it
    assert passed["worker0"][1] - t0 >= 0.3
    assert abs(passed["worker0"][1] - passed["worker1"][1]) < 0.1
    assert sorted(p.name.split(".")[0] for p in (tmp_path / "warm").iterdir()) == ["worker0", "worker1"]


def test_stages_are_separate_gates(tmp_path):
    gate = {"dir": str(tmp_path), "parties": 1, "timeout_s": 0.2}
    assert wait_at_start_gate({"start_gate": gate}, "worker0", "ready")
    # a second party at "warm" does not count the one at "ready"
    gate2 = dict(gate, parties=2)
    assert wait_at_start_gate({"start_gate": gate2}, "worker1", "warm") is False


def test_gate_gives_up_after_its_timeout(tmp_path):
    t0 = time.monotonic()
    ok = wait_at_start_gate({"start_gate": {"dir": str(tmp_path), "parties": 2, "timeout_s": 0.2}}, "worker0")
    assert ok is False and 0.2 <= time.monotonic() - t0 < 1.0
