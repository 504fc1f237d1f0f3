"""SamplerProcess: run the sampler in a process of its own, and never leave it behind.

The sampler is a separate Python process (``python -m driple.collect.sampling.child``) so its
fixed-period loop is not slowed by the launcher, and its own CPU cost stays measurable. It is
stopped by :meth:`SamplerProcess.stop`, by leaving the ``with`` block (also on an exception or
Ctrl-C), at interpreter exit, or -- if the parent is killed outright -- by the end-of-file it
then reads on its stdin. Each of these saves what was collected.
"""
from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path

from driple.collect.sampling.sampler import check_config, check_target, net_source
from driple.hardware.devices import device_kind
from driple.collect.sampling.target import Target
from driple.errors import DripleError

START_TIMEOUT_S = 60.0  # Python start-up on a loaded 2-core host can take seconds
STOP_TIMEOUT_S = 120.0  # saving hours of samples takes a few seconds


def _shutdown(proc: subprocess.Popen, timeout: float) -> None:
    """Ask the child to save and exit (EOF on its stdin); kill it if it does not."""
    if proc.poll() is not None:
        return
    try:
        if proc.stdin and not proc.stdin.closed:
            try:
                proc.stdin.write(b"stop\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        pass
    finally:  # also reached on KeyboardInterrupt while waiting
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class SamplerProcess:
    """Sample ``targets`` every ``period_s`` s in a separate process; raw counters go to ``out_path``.

    ``device``: ``"cpu"`` or ``"gpu"`` (adds NVML utilization and memory used). ``net_mode``:
    ``"auto"`` (a target's ``veth`` if it has one, else per-socket tcp_info), ``"tcp_info"`` or
    ``"veth"``. Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        targets: list[Target],
        out_path: str | Path,
        period_s: float = 0.01,
        device: str = "cpu",
        net_mode: str = "auto",
    ) -> None:
        targets = list(targets)
        check_config(targets, period_s, device, net_mode)
        self.targets = targets
        self.out_path = Path(out_path)
        self.period_s = float(period_s)
        self.device = device
        self.net_mode = net_mode
        self._proc: subprocess.Popen | None = None
        self._stderr = None
        self._finalizer = None
        self.pid: int | None = None

    def __repr__(self) -> str:
        names = ", ".join(t.name for t in self.targets)
        return f"SamplerProcess([{names}], {str(self.out_path)!r}, period_s={self.period_s}, device={self.device!r})"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> "SamplerProcess":
        """Check the targets, spawn the sampler and return once it is sampling."""
        if self._proc is not None:
            raise DripleError("this sampler was already started; make a new SamplerProcess")
        for t in self.targets:
            check_target(t, self.device, net_source(t, self.net_mode))
        if device_kind(self.device).samples_nvml:
            from driple.collect.sampling import nvml

            nvml.shutdown(nvml.load())  # a clear error here rather than from the child
        try:
            self.out_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise DripleError(f"cannot create {self.out_path.parent} for the samples ({e.strerror})") from None
        if not os.access(self.out_path.parent, os.W_OK):
            raise DripleError(f"cannot write the samples to {self.out_path.parent}: permission denied")
        self._stderr = tempfile.TemporaryFile()
        config = {
            "targets": [t.to_dict() for t in self.targets],
            "out_path": str(self.out_path.resolve()),
            "period_s": self.period_s,
            "device": self.device,
            "net_mode": self.net_mode,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "driple.collect.sampling.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            close_fds=True,
        )
        self._proc = proc
        self.pid = proc.pid
        self._finalizer = weakref.finalize(self, _shutdown, proc, 30.0)
        try:
            proc.stdin.write((json.dumps(config) + "\n").encode())
            proc.stdin.flush()
            answer = self._read_answer(START_TIMEOUT_S)
        except BaseException:
            self._finalizer()
            raise
        if answer != "ready":
            self._finalizer()
            if answer.startswith("error "):
                raise DripleError(json.loads(answer[6:]))
            raise DripleError(f"the sampler process failed to start: {answer or self._stderr_tail()}")
        return self

    def _read_answer(self, timeout: float) -> str:
        fd = self._proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        data = b""
        while not data.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                return "timed out"
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
        return data.decode(errors="replace").strip()

    def _stderr_tail(self, n: int = 2000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-n:].strip()

    def stop(self) -> Path:
        """Stop sampling, let the sampler save, and return ``out_path``."""
        if self._proc is None:
            raise DripleError("the sampler was never started")
        proc = self._proc
        try:
            _shutdown(proc, STOP_TIMEOUT_S)
        finally:
            if self._finalizer is not None:
                self._finalizer.detach()
            if proc.stdout:
                proc.stdout.close()
        if proc.returncode != 0 or not self.out_path.exists():
            tail = self._stderr_tail()
            raise DripleError(
                f"the sampler process ended with status {proc.returncode} and "
                f"{'saved' if self.out_path.exists() else 'did not save'} {self.out_path}"
                + (f":\n{tail}" if tail else "")
            )
        return self.out_path

    def __enter__(self) -> "SamplerProcess":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._proc is None:
            return
        if exc_type is None:
            self.stop()
            return
        try:  # an error is already on its way: save what we can, raise nothing new
            self.stop()
        except Exception:
            pass
