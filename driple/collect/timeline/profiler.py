"""Timeline from a ``torch.profiler`` window: the GPU path (and a CPU alternative to compare).

On GPUs kernels run asynchronously, so host-side marks do not say when the device computes.
A profiler window over the measured iterations records CUDA kernels and NCCL kernels (CUPTI)
and the caching allocator's events; :func:`apply_events` turns them into the recorder's
compute and communication intervals and allocated-bytes samples, which the labeller reads
exactly as it reads the CPU marks:

- compute: CUDA kernels whose name does not contain ``nccl`` (GPU); on a CPU host, the ATen
  ops of the training thread (the thread with the most ``aten::`` events);
- communication: NCCL kernels (GPU); ``gloo:*`` work (CPU), with bytes from the input shapes;
- memory: ``[memory]`` events of the device, accumulated from the allocated bytes at the
  start of the window.

Kineto stamps events in Unix-epoch ns; they are moved onto CLOCK_MONOTONIC with the offset
between the two clocks read around the window. Recording every op costs ~10-30 us per op on
the dev VM (see ``scripts/bench_timeline_overhead.py``), which is why CPU hosts use marks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from driple.collect.timeline.record import COMM_KINDS

_DTYPE_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8,
                "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1}


@dataclass(frozen=True)
class Event:
    """One profiler event on the monotonic clock: ``device`` is ``"cpu"`` or ``"cuda"``;
    ``nbytes`` is the allocation size of a ``[memory]`` event (negative: a free) or the bytes a
    communication event moves."""

    name: str
    device: str
    thread: int
    start_ns: int
    end_ns: int
    nbytes: int = 0


def clock_offset_ns() -> int:
    """Unix-epoch ns minus CLOCK_MONOTONIC ns, read as tightly as Python allows."""
    a = time.monotonic_ns()
    wall = time.time_ns()
    b = time.monotonic_ns()
    return wall - (a + b) // 2


def _shape_bytes(shapes, dtypes) -> int:
    total = 0
    for shape, dtype in zip(shapes or [], dtypes or []):
        if shape:
            total += int(np.prod(shape)) * _DTYPE_BYTES.get(dtype, 4)
    return total


def events_from_kineto(prof, offset_ns: int) -> list[Event]:
    """The window's events as :class:`Event` (kineto's own objects, moved onto monotonic ns)."""
    out = []
    for e in prof.profiler.kineto_results.events():
        device = "cuda" if "CUDA" in str(e.device_type()) else "cpu"
        start = int(e.start_ns()) - offset_ns
        nbytes = 0
        if e.name() == "[memory]":
            nbytes = int(e.nbytes())
        elif e.name().startswith("gloo:"):
            nbytes = _shape_bytes(e.shapes(), e.dtypes())
        out.append(Event(e.name(), device, int(e.start_thread_id()), start,
                         start + int(e.duration_ns()), nbytes))
    return out


def _iteration_of(iters: np.ndarray, t: int) -> int:
    i = int(np.searchsorted(iters[:, 0], t, side="right")) - 1
    return max(i, 0)


def apply_events(recorder, events: list[Event], cuda: bool, base_bytes: int = 0) -> None:
    """Add the window's compute and comm intervals and memory samples to ``recorder``.

    ``base_bytes`` is the device's allocated bytes when the window opened (memory events are
    deltas). Intervals are attributed to the recorder's iterations by their start time.
    """
    tl = recorder.timeline()
    iters = tl.iters if len(tl.iters) else np.zeros((1, 2), dtype=np.int64)
    if cuda:
        kernels = [e for e in events if e.device == "cuda" and not e.name.startswith("[memory]")]
        compute = [e for e in kernels if "nccl" not in e.name.lower()]
        comm = [e for e in kernels if "nccl" in e.name.lower()]
        mem_device = "cuda"
    else:
        ops = [e for e in events if e.device == "cpu" and e.name.startswith("aten::")]
        counts: dict[int, int] = {}
        for e in ops:
            counts[e.thread] = counts.get(e.thread, 0) + 1
        main = max(counts, key=counts.get) if counts else None
        compute = [e for e in ops if e.thread == main]
        comm = [e for e in events if e.name.startswith("gloo:")]
        mem_device = "cpu"
    for e in compute:
        recorder.add_compute(e.start_ns, e.end_ns)
    for e in comm:
        kind = COMM_KINDS["broadcast"] if "broadcast" in e.name else COMM_KINDS["allreduce"]
        recorder.add_comm(kind, e.start_ns, e.end_ns, e.nbytes, e.nbytes,
                          iteration=_iteration_of(iters, e.start_ns))
    level = int(base_bytes)
    for e in sorted((e for e in events if e.name == "[memory]" and e.device == mem_device),
                    key=lambda e: e.start_ns):
        level += e.nbytes
        recorder.add_memory(e.start_ns, level)
    recorder.meta["source"] = "torch.profiler (" + ("CUDA kernels, NCCL" if cuda else "ATen ops, gloo") + ")"
    recorder.meta["memory_reader"] = "torch.profiler [memory] events"


class ProfiledWindow:
    """``with ProfiledWindow(recorder, cuda=...):`` profile the measured iterations; on exit
    their intervals go into ``recorder`` (which then records no compute runs of its own)."""

    def __init__(self, recorder, cuda: bool):
        self.recorder, self.cuda = recorder, cuda

    def __enter__(self):
        import torch
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        if self.cuda:
            self.base = int(torch.cuda.memory_allocated())
        else:  # the CPU allocator keeps no statistics: the process's malloc in-use bytes
            from driple.hardware.allocator import allocated_bytes_reader

            reader, _ = allocated_bytes_reader("cpu")
            self.base = reader() if reader is not None else 0
        self.recorder.marks_compute = False
        self.prof = profile(activities=activities, profile_memory=True, record_shapes=not self.cuda)
        self.offset = clock_offset_ns()
        self.prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.prof.__exit__(*exc)
        if exc[0] is None:
            offset = (self.offset + clock_offset_ns()) // 2
            apply_events(self.recorder, events_from_kineto(self.prof, offset), self.cuda, self.base)
