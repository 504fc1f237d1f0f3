"""The launcher's pure helpers: ranks by role, timeouts, why a rank failed (no processes started;
the real jobs are in test_launcher.py)."""
from __future__ import annotations

from driple.collect.launcher import _is_peer_loss, _last_error, default_timeout, roles
from driple.settings import parse_setting


def test_roles_put_servers_first():
    assert roles(parse_setting("cpu-ddp-w2-lo")) == ["worker0", "worker1"]
    assert roles(parse_setting("cpu-ps-p2w3-lo")) == ["server0", "server1", "worker0", "worker1", "worker2"]
    assert default_timeout(10) > 10


def test_failure_reason_prefers_the_root_cause(tmp_path):
    log = tmp_path / "w.log"
    log.write_text("Traceback (most recent call last):\n  File x\nRuntimeError: injected crash at 3\n")
    assert _last_error(log) == "RuntimeError: injected crash at 3"
    log.write_text("[rank1]: Traceback (most recent call last):\n[rank1]: ValueError: bad\n[rank1]:  \n")
    assert _last_error(log) == "ValueError: bad"
    assert _last_error(tmp_path / "none.log") == "no output"
    assert _is_peer_loss("worker0 exited with code 1: RuntimeError: Connection closed by peer")
    assert not _is_peer_loss("worker1 exited with code 1: RuntimeError: injected crash at 3")


def test_a_module_shadowed_by_a_file_in_the_start_directory_is_named_as_the_likely_cause(tmp_path):
    log = tmp_path / "w.log"
    log.write_text("Traceback (most recent call last):\nAttributeError: partially initialized module 'torch' has "
                   "no attribute 'distributed' (most likely due to a circular import)\n")
    reason = _last_error(log)
    assert reason.startswith("AttributeError: partially initialized module 'torch'")
    assert "start it from another directory" in reason
    log.write_text("AttributeError: 'NoneType' object has no attribute 'x'\n")
    assert "another directory" not in _last_error(log)
