"""How fast the host is: the figures that turn a graph's FLOPs and bytes into seconds.

A hybrid inspector's physical priors (:mod:`driple.graph.summary_features`) divide FLOPs by
the host's compute throughput, bytes by its memory bandwidth and communicated bytes by the
link's rate. The hardware is part of the setting (an inspector is trained for one CPU model),
so these figures are measured once, on the host that measured the training jobs, and recorded
with the inspector (its checkpoint's ``host``): a prediction uses the figures of the hardware
the inspector was trained on, never those of the machine it happens to run on.

The benchmark is tiny (about half a second, one thread, best of several runs so that a busy
host lowers it little):

- **compute**: a 512 x 512 float32 matrix product (2 x 512^3 FLOPs) on one thread: the
  FLOP/s a worker of one core can reach in a GEMM, its practical peak;
- **memory**: a copy of a 32 MB float32 tensor on one thread: bytes read + written per second;
- **loopback**: not measured per call: :data:`LOOPBACK_BYTES_PER_S`, measured once (see there)
  with :func:`measure_loopback_rate`, as the link rate of a loopback setting.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Optional

from driple.errors import DripleError

#: Bytes per second one worker moves in a gloo all-reduce between 2 processes on loopback
#: (payload 25 MiB, DDP's bucket; ring: each worker sends and receives the payload once per
#: all-reduce), measured on this project's host (AMD EPYC, 2 cores, torch 2.13 CPU) with
#: ``python scripts/bench_host_speed.py --loopback --runs 3`` (2026-11-24, under the host lock):
#: 1.75, 1.19 and 1.91 GB/s (best of 5 all-reduces each); the round median is the link rate of
#: a loopback setting in the priors. (Same runs: GEMM 102-104 GFLOP/s, copy 26-33 GB/s.)
LOOPBACK_BYTES_PER_S = 1.6e9

MATMUL_SIZE = 512
COPY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class HostSpeed:
    """The host figures of a setting (units in the names).

    Args:
        flops_per_s: Single-thread float32 GEMM throughput (FLOP/s).
        memory_bytes_per_s: Single-thread copy bandwidth, bytes read + written per second.
        loopback_bytes_per_s: Rate of a loopback link (bytes/s per worker and direction).
        memory_bytes: Host memory (bytes): the cap of a memory amount in MB, and what a memory
            amount in % of the host is a share of.
        cpu_model: The CPU model the figures were measured on (as the collector names it).
        how: How they were obtained (``measured <date>``, ``given``).
    """

    flops_per_s: float
    memory_bytes_per_s: float
    loopback_bytes_per_s: float = LOOPBACK_BYTES_PER_S
    memory_bytes: float = 0.0
    cpu_model: str = ""
    how: str = "given"

    def __post_init__(self):
        for name in ("flops_per_s", "memory_bytes_per_s", "loopback_bytes_per_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value > 0):
                raise DripleError(f"host figure {name} must be a positive number, not {value!r}")

    @property
    def memory_mb(self) -> float:
        """Host memory in MB (1e6 bytes); 0 when unknown."""
        return float(self.memory_bytes) / 1e6

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict) -> "HostSpeed":
        if not isinstance(record, dict):
            raise DripleError(f"host figures must be a dict, not {type(record).__name__}")
        known = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        try:
            return cls(**known)
        except TypeError as exc:
            raise DripleError(f"host figures {record} are incomplete ({exc})") from None


def best_seconds(fn, repeats: int) -> float:
    """The fastest of ``repeats`` timed calls, after one untimed warm-up call."""
    fn()  # warm-up: first-touch page faults, kernel selection
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cpu_model() -> str:
    """This host's CPU model name (``model name`` of ``/proc/cpuinfo``, as the collector's
    provenance records it), or ``platform.processor()``."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


DTYPES = ("float32", "float64", "bfloat16")


def matmul_rates(threads: int = 1, size: int = MATMUL_SIZE, repeats: int = 5,
                 dtypes=DTYPES) -> dict:
    """``{dtype: FLOP/s}`` of a ``size`` x ``size`` matmul on ``threads`` torch threads; a dtype
    this torch cannot multiply on the CPU is left out. The thread count is restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(threads)))
    rates = {}
    try:
        for name in dtypes:
            dtype = getattr(torch, name)
            a = torch.randn(size, size).to(dtype)
            b = torch.randn(size, size).to(dtype)
            product = torch.empty(size, size, dtype=dtype)
            try:
                seconds = best_seconds(lambda: torch.mm(a, b, out=product), repeats)
            except RuntimeError:  # no kernel for this dtype on this build
                continue
            rates[name] = 2.0 * size ** 3 / seconds
    finally:
        torch.set_num_threads(before)
    return rates


def copy_rate(threads: int = 1, nbytes: int = COPY_BYTES, repeats: int = 5) -> float:
    """Bytes read + written per second copying a ``nbytes`` float32 tensor."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(threads)))
    try:
        src = torch.ones(nbytes // 4)
        dst = torch.empty_like(src)
        seconds = best_seconds(lambda: dst.copy_(src), repeats)
    finally:
        torch.set_num_threads(before)
    return 2.0 * (nbytes // 4) * 4 / seconds


def measure_host_speed(repeats: int = 10, matmul_size: int = MATMUL_SIZE,
                       copy_bytes: int = COPY_BYTES) -> HostSpeed:
    """Measure this host's single-thread GEMM FLOP/s and copy bandwidth (module docstring);
    about half a second. The torch thread count is restored after."""
    import psutil

    return HostSpeed(
        flops_per_s=matmul_rates(1, matmul_size, repeats, dtypes=("float32",))["float32"],
        memory_bytes_per_s=copy_rate(1, copy_bytes, repeats),
        memory_bytes=float(psutil.virtual_memory().total),
        cpu_model=cpu_model(),
        how=f"measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} "
            f"({matmul_size}^2 matmul, {copy_bytes >> 20} MiB copy, 1 thread, best of {repeats})")


def _allreduce_worker(rank: int, port: int, payload_bytes: int, repeats: int, queue) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        t = torch.ones(payload_bytes // 4)
        dist.all_reduce(t)  # warm-up: connections, buffers
        best = float("inf")
        for _ in range(repeats):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(t)
            best = min(best, time.perf_counter() - t0)
        if rank == 0:
            queue.put(best)
    finally:
        dist.destroy_process_group()


def measure_loopback_rate(payload_bytes: int = 25 * 1024 * 1024, repeats: int = 5,
                          port: Optional[int] = None) -> float:
    """Bytes/s one worker moves in a gloo all-reduce of ``payload_bytes`` between 2 processes
    on loopback (best of ``repeats``): how :data:`LOOPBACK_BYTES_PER_S` was measured. Starts two
    processes for a few seconds; both are joined before it returns."""
    import multiprocessing as mp
    import socket

    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_allreduce_worker, args=(r, port, payload_bytes, repeats, queue))
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        seconds = queue.get(timeout=120)
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
                p.join()
    ring = 2.0 * (2 - 1) / 2  # ring all-reduce over W=2 workers: the payload each way
    return ring * payload_bytes / seconds


def environment_host_speed() -> Optional[HostSpeed]:
    """Figures given in ``$DRIPLE_HOST_SPEED`` as ``flops_per_s,memory_bytes_per_s`` (tests and
    offline training), or None."""
    text = os.environ.get("DRIPLE_HOST_SPEED")
    if not text:
        return None
    try:
        flops, mem = (float(v) for v in text.split(","))
    except ValueError:
        raise DripleError(f"DRIPLE_HOST_SPEED={text!r}: give 'flops_per_s,memory_bytes_per_s'") from None
    import psutil

    return HostSpeed(flops, mem, memory_bytes=float(psutil.virtual_memory().total), how="given ($DRIPLE_HOST_SPEED)")
