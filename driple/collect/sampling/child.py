"""Entry point of the sampler process: ``python -m driple.collect.sampling.child``.

Protocol with :class:`~driple.collect.sampling.process.SamplerProcess` (the parent):
stdin line 1 is the JSON config; the child answers ``ready`` once it has taken its first sample
(or ``error <json message>``) on stdout, samples until it reads ``stop`` or end-of-file on stdin (the parent died), SIGTERM or
SIGHUP, or notices its parent changed; then it saves the ``.npz`` and exits 0. It ignores
SIGINT: a Ctrl-C in the terminal reaches the parent, which stops it and keeps the data.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback

from driple.errors import DripleError

_stop_requested = False


def _on_signal(signum, frame) -> None:
    global _stop_requested
    _stop_requested = True


def _read_line(fd: int) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def _say(text: str) -> None:
    os.write(1, (text + "\n").encode())


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    parent = os.getppid()
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)  # keep the period under CPU contention (root only)
    except OSError:
        pass

    from driple.collect.sampling.sampler import Sampler
    from driple.collect.sampling.target import Target

    try:
        config = json.loads(_read_line(0))
        targets = [Target(**t) for t in config["targets"]]
        sampler = Sampler(targets, config["period_s"], config["device"], config["net_mode"])
    except DripleError as e:
        _say("error " + json.dumps(str(e)))
        return 2
    except Exception as e:  # a bug, not a user error: keep the traceback for the parent
        traceback.print_exc()
        _say("error " + json.dumps(f"sampler failed to start: {type(e).__name__}: {e}"))
        return 1

    def wait(timeout: float) -> bool:
        """Sleep up to ``timeout`` s; True when it is time to stop."""
        if _stop_requested or os.getppid() != parent:
            return True
        try:
            ready, _, _ = select.select([0], [], [], max(timeout, 0.0))
        except InterruptedError:
            return _stop_requested
        if ready:
            data = os.read(0, 4096)
            if not data or b"stop" in data:
                return True
        return _stop_requested

    try:
        sampler.run(wait, on_first=lambda: _say("ready"), stop_fd=0)
    finally:  # even if sampling broke, keep what was collected
        sampler.save(config["out_path"])
        sampler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
