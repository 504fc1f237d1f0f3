"""What a process's allocator holds right now: the memory a worker's timeline samples.

glibc ``mallinfo2()`` in-use bytes (arena + mmapped chunks; ~1 us a call) on CPU hosts: torch's
CPU allocator is plain malloc, so this is the allocated-bytes curve, which RSS is not (freed
heap pages stay resident); ``torch.cuda.memory_allocated`` on GPUs.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Callable, Optional


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
