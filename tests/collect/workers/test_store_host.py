"""Rank 0 hosts the rendezvous store: after ``rpc.shutdown()`` it waits for the other ranks."""
from __future__ import annotations

import threading
import time

from driple.collect.workers.common import hold_store_until_peers_leave


def test_rank0_waits_until_every_other_rank_has_left(tmp_path):
    left = {}

    def rank(r, delay):
        time.sleep(delay)
        hold_store_until_peers_leave(tmp_path, r, 3, timeout_s=10.0)
        left[r] = time.monotonic()

    threads = [threading.Thread(target=rank, args=(0, 0.0)), threading.Thread(target=rank, args=(1, 0.1)),
               threading.Thread(target=rank, args=(2, 0.4))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert left[0] >= left[2] >= left[1]  # rank 0 left last, after the latest rank
    assert sorted(p.name for p in tmp_path.iterdir()) == ["left.1", "left.2"]


def test_rank0_gives_up_after_its_timeout(tmp_path):
    t0 = time.monotonic()
    assert hold_store_until_peers_leave(tmp_path, 0, 2, timeout_s=0.2) is False
    assert 0.2 <= time.monotonic() - t0 < 2.0


def test_other_ranks_never_wait(tmp_path):
    t0 = time.monotonic()
    assert hold_store_until_peers_leave(tmp_path, 1, 2, timeout_s=30.0) is True
    assert time.monotonic() - t0 < 1.0
