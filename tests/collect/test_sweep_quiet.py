"""--wait-quiet: a sweep holds each job until the host is quiet enough."""
from driple.collect import sweep


def test_wait_for_quiet_host_waits_until_below_threshold(monkeypatch):
    readings = iter([80.0, 40.0, 12.0, 5.0])
    monkeypatch.setattr(sweep, "host_busy_pct", lambda window_s=3.0: next(readings))
    seen = []
    sweep.wait_for_quiet_host(10.0, on_wait=lambda busy, t: seen.append(busy))
    assert seen == [80.0, 40.0, 12.0]


def test_host_busy_pct_is_a_percentage():
    busy = sweep.host_busy_pct(0.2)
    assert 0.0 <= busy <= 100.0
