"""In-worker timeline recording: marks that cost microseconds, not a profiler.

A worker calls :meth:`TimelineRecorder.begin_iteration` / :meth:`end_iteration` around each
training step, :meth:`compute_off` / :meth:`compute_on` where its training thread starts and
stops waiting for communication, and :meth:`add_comm` for every transfer it times. With
:meth:`watch` it also samples the allocator's in-use bytes at every module's forward entry and
exit and at every parameter's gradient accumulation (and learns when the last gradient of a
step was ready: the end of backward compute).

Why marks and not ``torch.profiler`` on CPU hosts: the profiler records every ATen op; on the
dev VM that cost ~20 % of a CIFAR ResNet step (2,600 ops per step). On a CPU worker with one
compute thread, the training thread *is* the device: it computes whenever it is not waiting for
a collective or an RPC, and those waits are exactly where the worker code already is. On GPUs
kernels run asynchronously, so :mod:`driple.collect.timeline.profiler` reads CUDA kernels and
NCCL from a profiler window instead; the labels are computed by the same code.

Memory: glibc ``mallinfo2()`` in-use bytes (arena + mmapped chunks; ~1 us a call) on CPU
hosts — torch's CPU allocator is plain malloc, so this is the allocated-bytes curve, which RSS
is not (freed heap pages stay resident); ``torch.cuda.memory_allocated`` on GPUs.
"""
from __future__ import annotations

import os
import threading
import time
from array import array
from pathlib import Path
from typing import Callable, Optional

from driple.hardware.allocator import allocated_bytes_reader




def schedstat(pid: int | str = "self", tid: Optional[int] = None) -> tuple[int, int]:
    """``(cpu_ns, wait_ns)``: time on a CPU and time runnable but waiting for one, summed over
    the process's threads, or of thread ``tid`` only (``/proc/<pid>/task/*/schedstat``);
    (0, 0) where unreadable."""
    cpu = wait = 0
    base = Path(f"/proc/{pid}/task")
    try:
        tasks = [base / str(tid)] if tid is not None else list(base.iterdir())
    except OSError:
        return 0, 0
    for task in tasks:
        try:
            fields = (task / "schedstat").read_text().split()
            cpu += int(fields[0])
            wait += int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    return cpu, wait


class TimelineRecorder:
    """Timeline of one rank, kept in flat ``array('q')`` buffers and saved once at the end.

    Args:
        name: The rank's name (``worker0``, ``server0``, ...).
        warmup: Iterations before measurement; intervals are kept only after them.
        device: ``"cpu"`` or ``"gpu"`` (chooses the allocated-bytes reader).
        role: ``"worker"`` or ``"server"``.
        memory: Sample allocated bytes in :meth:`watch` hooks.
    """

    def __init__(self, name: str, warmup: int, device: str = "cpu", role: str = "worker",
                 memory: bool = True, device_index: int = 0, **meta):
        self.name, self.warmup, self.device, self.role = name, int(warmup), device, role
        self.iteration = -1
        self._iters = array("q")
        self._compute = array("q")
        self._comm = array("q")
        self._serve = array("q")
        self._mem = array("q")
        self._on: Optional[int] = None  # start of the open compute run
        self.marks_compute = True  # False when a profiler window supplies the compute runs
        self.last_grad_ns: Optional[int] = None
        self._hooks: list = []
        reader, what = allocated_bytes_reader(device, device_index) if memory else (None, "off")
        self._read_memory = reader
        self._last_mem: Optional[int] = None
        self._sched0: Optional[tuple] = None
        self._main_tid = threading.get_native_id()  # the training thread: the one that computes
        self.meta = {"name": name, "role": role, "warmup": self.warmup, "device": device,
                     "source": "marks", "memory_reader": what, **meta}

    # ------------------------------------------------------------------ iterations
    @property
    def recording(self) -> bool:
        """True during measured (post-warm-up) iterations."""
        return self.iteration >= self.warmup

    def begin_iteration(self) -> int:
        """Start the next iteration (its compute run opens now); returns the timestamp (ns)."""
        now = time.monotonic_ns()
        self.iteration += 1
        if self.iteration == self.warmup:
            self._sched0 = (*schedstat(), *schedstat(tid=self._main_tid), now)
        self._iters.extend((now, 0))
        self.last_grad_ns = None
        self.compute_on(now)
        self.sample_memory(now)
        return now

    def end_iteration(self) -> int:
        """End the current iteration (closing its compute run); returns the timestamp (ns)."""
        now = time.monotonic_ns()
        self.compute_off(now)
        self.sample_memory(now)
        self._iters[-1] = now
        return now

    def set_iteration_bounds(self, start: int, end: int) -> None:
        """Record an iteration (a server's round) whose bounds are known only afterwards."""
        self.iteration += 1
        if self.iteration == self.warmup:
            self._sched0 = (*schedstat(), *schedstat(tid=self._main_tid), start)
        self._iters.extend((start, end))

    # ------------------------------------------------------------------ compute runs
    def compute_on(self, t: Optional[int] = None) -> None:
        """The training thread computes from ``t`` (now) on."""
        if self._on is None and self.marks_compute:
            self._on = time.monotonic_ns() if t is None else t

    def compute_off(self, t: Optional[int] = None) -> None:
        """The training thread stops computing at ``t`` (now): it waits, or the step ended."""
        if self._on is None:
            return
        end = time.monotonic_ns() if t is None else t
        if self.recording and end > self._on:
            self._compute.extend((self._on, end))
        self._on = None

    def add_compute(self, start: int, end: int) -> None:
        """A compute interval timed elsewhere (a server's optimizer step)."""
        if self.recording and end > start:
            self._compute.extend((start, end))

    # ------------------------------------------------------------------ communication
    def add_comm(self, kind: int, start: int, end: int, tx_bytes: int = 0, rx_bytes: int = 0,
                 peer: int = -1, iteration: Optional[int] = None) -> None:
        """One transfer of ``kind`` (:data:`~driple.collect.timeline.record.COMM_KINDS`)."""
        it = self.iteration if iteration is None else iteration
        if it >= self.warmup:
            self._comm.extend((it, peer, kind, start, end, int(tx_bytes), int(rx_bytes)))

    def add_serve(self, worker: int, seq: int, entry: int, release: int) -> None:
        """A server had ``worker``'s push number ``seq`` at ``entry`` and answered at ``release``."""
        self._serve.extend((worker, seq, entry, release))

    # ------------------------------------------------------------------ memory
    def sample_memory(self, t: Optional[int] = None) -> None:
        """Add an allocated-bytes sample (dropped when equal to the previous one)."""
        if self._read_memory is None or not self.recording:
            return
        value = self._read_memory()
        if value != self._last_mem:
            self._mem.extend((time.monotonic_ns() if t is None else t, value))
            self._last_mem = value

    def add_memory(self, t: int, value: int) -> None:
        """An allocated-bytes sample read elsewhere (a profiler's memory events)."""
        if value != self._last_mem:
            self._mem.extend((int(t), int(value)))
            self._last_mem = value

    def _grad_ready(self, _param) -> None:
        now = time.monotonic_ns()
        self.last_grad_ns = now
        self.sample_memory(now)

    def watch(self, params) -> None:
        """Sample memory at every module's forward entry/exit (global hooks) and at every
        gradient accumulation of ``params``; the latter also set :attr:`last_grad_ns`."""
        from torch.nn.modules import module as module_hooks

        def _pre(mod, args):
            self.sample_memory()

        def _post(mod, args, out):
            self.sample_memory()

        self._hooks.append(module_hooks.register_module_forward_pre_hook(_pre))
        self._hooks.append(module_hooks.register_module_forward_hook(_post))
        for p in params:
            if p.requires_grad:
                self._hooks.append(p.register_post_accumulate_grad_hook(self._grad_ready))

    def unwatch(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()

    # ------------------------------------------------------------------ save
    def timeline(self):
        """The recorded :class:`~driple.collect.timeline.record.RankTimeline`."""
        import numpy as np

        from driple.collect.timeline.record import COMM_COLUMNS, SERVE_COLUMNS, RankTimeline

        meta = dict(self.meta)
        if self._sched0 is not None:
            cpu, wait = schedstat()
            main_cpu, main_wait = schedstat(tid=self._main_tid)
            meta["schedstat"] = {"cpu_ns": cpu - self._sched0[0], "wait_ns": wait - self._sched0[1],
                                 "main_cpu_ns": main_cpu - self._sched0[2],
                                 "main_wait_ns": main_wait - self._sched0[3],
                                 "window_ns": time.monotonic_ns() - self._sched0[4]}

        def rows(buf, width):
            return np.frombuffer(buf, dtype=np.int64).reshape(-1, width).copy() if len(buf) else np.zeros((0, width), np.int64)

        iters = rows(self._iters, 2)
        if len(iters) and iters[-1, 1] == 0:  # an iteration that never ended (crash, cap)
            iters = iters[:-1]
        return RankTimeline(meta, iters=iters, compute=rows(self._compute, 2),
                            comm=rows(self._comm, len(COMM_COLUMNS)),
                            serve=rows(self._serve, len(SERVE_COLUMNS)), mem=rows(self._mem, 2))

    def save(self, workdir: str | os.PathLike) -> Path:
        """Write ``<workdir>/<name>.timeline.npz`` (atomically)."""
        from driple.collect.timeline.record import save_job_timelines

        self.unwatch()
        return save_job_timelines(Path(workdir) / f"{self.name}.timeline.npz", {self.name: self.timeline()})
