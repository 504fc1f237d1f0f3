"""What a process's allocator holds right now: the memory a worker's timeline samples.

glibc ``mallinfo2()`` in-use bytes (arena + mmapped chunks; ~1 us a call) on CPU hosts: torch's
CPU allocator is plain malloc, so this is the allocated-bytes curve, which RSS is not (freed
heap pages stay resident); ``torch.cuda.memory_allocated`` on GPUs.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable, Optional

#: Host threads that call cuBLAS in a training step: the one running the forward pass and the
#: optimizer, and autograd's device thread running the backward pass. PyTorch keeps one cuBLAS
#: handle per thread and one workspace per (handle, stream), from the caching allocator.
CUBLAS_THREADS = 2


class _MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def allocated_bytes_reader(device: str = "cpu", index: int = 0) -> tuple[Optional[Callable[[], int]], str]:
    """``(reader, name)``: a function returning the process's allocated bytes now, and what it
    reads; ``(None, reason)`` where nothing suitable exists (e.g. a libc without mallinfo2)."""
    from driple.hardware.devices import device_kind

    if device_kind(device).torch_type == "cuda":
        import torch

        dev = torch.device("cuda", index)
        return (lambda: int(torch.cuda.memory_allocated(dev))), "torch.cuda.memory_allocated"
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None, "unavailable: this C library has no mallinfo2 (glibc >= 2.33 needed)"
    fn.restype = _MallInfo2
    fn.argtypes = []

    def in_use() -> int:
        m = fn()
        return int(m.uordblks + m.hblkhd)

    return in_use, "glibc mallinfo2 (uordblks + hblkhd)"


def cublas_workspace_bytes(compute_capability: str) -> int:
    """PyTorch's default cuBLAS workspace for a GPU of ``compute_capability`` (``"9.0"``): 32 MiB
    on Hopper and later (``:4096:8``), else ``:4096:2:16:8`` (8 MiB + 128 KiB); the environment
    variable ``CUBLAS_WORKSPACE_CONFIG`` overrides both, as in PyTorch."""
    import os
    import re

    config = os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
    pairs = re.findall(r":(\d+):(\d+)", config)
    if pairs:
        return sum(int(kib) * 1024 * int(count) for kib, count in pairs)
    try:
        major = int(str(compute_capability).split(".")[0])
    except ValueError:
        major = 0
    return 4096 * 1024 * 8 if major >= 9 else 4096 * 1024 * 2 + 16 * 1024 * 8


def cuda_runtime_bytes(compute_capability: str) -> int:
    """What a CUDA training worker's ``torch.cuda.memory_allocated`` holds beyond its tensors:
    one cuBLAS workspace for each thread that runs matrix products (:data:`CUBLAS_THREADS`)."""
    return CUBLAS_THREADS * cublas_workspace_bytes(compute_capability)
