"""Measure this machine into a :class:`~driple.hardware.spec.HardwareSpec` in a few seconds.

- matmul FLOP/s per dtype (float32, float64, bfloat16) of a 512 x 512 product on the worker's
  thread count (the collector runs each worker on one thread), best of several runs so that a
  busy host lowers it little;
- copy bandwidth of a 32 MiB tensor, bytes read + written per second;
- the cores a job can really use: the CPU affinity mask, capped by a cgroup CPU quota (v2
  ``cpu.max`` or v1 ``cpu.cfs_quota_us``), as container-aware runtimes read it; a quota halves
  a job's compute while a one-thread matmul reads the same;
- cache sizes from ``/sys/devices/system/cpu/cpu0/cache``, interface rates from
  ``/sys/class/net/*/speed``;
- the code path this torch's BLAS takes on this CPU (:func:`blas_code_path`): MKL dispatches on
  the CPU vendor, and the buffers it keeps between matrix products differ by path;
- GPUs from ``torch.cuda.get_device_properties`` and NVML (memory bus width and clocks give the
  memory bandwidth; SMs x clock x the FLOPs an SM issues per clock give the peaks).

Every reader takes the files or modules it reads as arguments, so tests run it on fakes.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

from driple.hardware.host_speed import COPY_BYTES, LOOPBACK_BYTES_PER_S, MATMUL_SIZE, copy_rate, cpu_model, matmul_rates
from driple.hardware.spec import GpuSpec, HardwareSpec

SYS_CPU = Path("/sys/devices/system/cpu")
SYS_NET = Path("/sys/class/net")
CGROUP_ROOT = Path("/sys/fs/cgroup")

#: Dense FLOPs one SM issues per clock, by compute capability (vendor whitepapers: FP32 FMA
#: lanes x 2; BF16 through the tensor cores, no sparsity). A capability not listed gets no peak.
SM_FLOPS_PER_CLOCK = {
    "7.0": {"float32": 128, "float64": 64, "bfloat16": 1024},   # V100 (fp16 tensor rate)
    "8.0": {"float32": 128, "float64": 64, "bfloat16": 2048},   # A100
    "8.6": {"float32": 256, "float64": 4, "bfloat16": 512},     # GA10x
    "8.9": {"float32": 256, "float64": 4, "bfloat16": 1024},    # AD10x, L4/L40
    "9.0": {"float32": 256, "float64": 128, "bfloat16": 4096},  # H100, H200
}


def cgroup_quota_cores(proc_cgroup: Path = Path("/proc/self/cgroup"), root: Path = CGROUP_ROOT) -> Optional[float]:
    """Cores this process's cgroup CPU quota allows (quota / period), or None without a quota.

    Reads cgroup v2's ``cpu.max`` ("max 100000" or "50000 100000") of this process's group and
    its parents, else cgroup v1's ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; the tightest wins."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    limits = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        controllers, path = parts[1], parts[2].lstrip("/")
        if controllers == "":  # v2 unified hierarchy
            for d in _ancestors(root, path):
                limits.append(_v2_limit(d / "cpu.max"))
        elif "cpu" in controllers.split(","):
            base = next((root / n for n in ("cpu,cpuacct", "cpu", "cpuacct,cpu") if (root / n).exists()), None)
            if base is not None:
                for d in _ancestors(base, path):
                    limits.append(_v1_limit(d))
    limits = [x for x in limits if x is not None]
    return min(limits) if limits else None


def _ancestors(base: Path, path: str) -> list[Path]:
    parts = [p for p in path.split("/") if p]
    return [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _v2_limit(path: Path) -> Optional[float]:
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _v1_limit(directory: Path) -> Optional[float]:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period


def usable_cores(affinity: Optional[int] = None, quota: Optional[float] = None) -> float:
    """Cores a job can really use: the affinity mask's CPUs, capped by the cgroup quota."""
    if affinity is None:
        affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if quota is None:
        quota = cgroup_quota_cores()
    return float(min(affinity, quota)) if quota is not None else float(affinity)


def torch_cpu_library():
    """torch's ``libtorch_cpu`` loaded with ctypes (the MKL it links sits in it), or None for a
    build without it (a macOS wheel)."""
    import ctypes

    import torch

    try:
        return ctypes.CDLL(str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"))
    except OSError:
        return None


def blas_code_path(library=None) -> str:
    """The code path this torch's MKL takes on this CPU, ``"mkl-<n>"`` (``mkl_serv_cpu_detect``:
    MKL picks it by CPU vendor as well as instruction set, so an AMD EPYC with AVX-512 and an
    Intel Xeon get different ones); ``""`` without MKL. Why a spec names it: MKL keeps the
    packing buffers of its matrix products between calls, and their sizes depend on the path.
    The same parameter-server jobs hold 0 to 20 MB more per worker on an Intel Xeon than on an
    AMD EPYC, and exactly as much more on the AMD host with MKL made to take its Intel path
    (``docs/memory.md``). ``library``: the loaded library that holds MKL (default: torch's
    ``libtorch_cpu``)."""
    library = torch_cpu_library() if library is None else library
    detect = getattr(library, "mkl_serv_cpu_detect", None)
    if detect is None:
        return ""
    try:
        return f"mkl-{int(detect())}"
    except (TypeError, ValueError, OSError):
        return ""


def cache_sizes(cpu_dir: Path = SYS_CPU / "cpu0" / "cache") -> dict:
    """``{"L1d": bytes, "L1i": …, "L2": …, "L3": …}`` of CPU 0, as the kernel shows them."""
    out = {}
    for index in sorted(cpu_dir.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except OSError:
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        out[name] = _parse_size(size)
    return {k: v for k, v in out.items() if v}


def _parse_size(text: str) -> int:
    units = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
    text = text.strip().upper()
    try:
        return int(text[:-1]) * units[text[-1]] if text and text[-1] in units else int(text)
    except ValueError:
        return 0


def link_rates(net_dir: Path = SYS_NET) -> dict:
    """``{interface: bits/s}`` of the interfaces whose rate the kernel knows (a physical NIC);
    loopback, veth and a NIC that is down have none and are left out."""
    out = {}
    for iface in sorted(net_dir.glob("*")):
        try:
            mbit = int((iface / "speed").read_text().strip())
        except (OSError, ValueError):
            continue
        if mbit > 0:
            out[iface.name] = mbit * 1_000_000
    return out


def gpu_specs(cuda=None, nvml=None) -> list[GpuSpec]:
    """One :class:`GpuSpec` per visible GPU (``cuda``: ``torch.cuda``; ``nvml``: an initialised
    ``pynvml``, or None to skip the memory bandwidth and clocks). [] without CUDA."""
    if cuda is None:
        import torch

        cuda = torch.cuda
    if not cuda.is_available():
        return []
    driver = ""
    if nvml is not None:
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001 - a fact missing, not an error
            driver = ""
    out = []
    for i in range(cuda.device_count()):
        props = cuda.get_device_properties(i)
        cc = f"{props.major}.{props.minor}"
        bandwidth, sm_clock_hz = 0.0, 0.0
        if nvml is not None:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                mem_mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_MEM)
                bus_bits = nvml.nvmlDeviceGetMemoryBusWidth(handle)
                bandwidth = mem_mhz * 1e6 * bus_bits * 2 / 8  # double data rate
                sm_clock_hz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM) * 1e6
            except Exception:  # noqa: BLE001 - an old driver without these queries
                pass
        per_clock = SM_FLOPS_PER_CLOCK.get(cc, {})
        peaks = {d: props.multi_processor_count * sm_clock_hz * f for d, f in per_clock.items()} if sm_clock_hz else {}
        out.append(GpuSpec(index=i, name=props.name, sms=int(props.multi_processor_count),
                           memory_bytes=int(props.total_memory), memory_bandwidth_bytes_per_s=float(bandwidth),
                           peak_flops_per_s=peaks, compute_capability=cc, driver=driver))
    return out


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_or_none():
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no NVML: the GPU spec has no bandwidth or peaks
        return None


def probe_gpus() -> list[GpuSpec]:
    """This machine's GPUs (:func:`gpu_specs`, with NVML where it loads): what a probe records,
    without its CPU measurements. [] without CUDA."""
    nvml = _nvml_or_none()
    try:
        return gpu_specs(nvml=nvml)
    finally:
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass


def probe(threads: int = 1, repeats: int = 5, gpus: bool = True) -> HardwareSpec:
    """This machine's :class:`HardwareSpec` (module docstring); a few seconds, one thread at a
    time unless ``threads`` says otherwise."""
    import psutil

    t0 = time.perf_counter()
    rates = matmul_rates(threads=threads, repeats=repeats)
    copy = copy_rate(threads=threads, repeats=repeats)
    gpu_list = probe_gpus() if gpus else []
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return HardwareSpec(
        cpu_model=cpu_model(), logical_cpus=os.cpu_count() or 0, cores_available=usable_cores(),
        threads_per_worker=int(threads), matmul_flops_per_s=rates, copy_bytes_per_s=copy,
        memory_bytes=int(psutil.virtual_memory().total), caches_bytes=cache_sizes(),
        links_bits_per_s=link_rates(), loopback_bytes_per_s=LOOPBACK_BYTES_PER_S, gpus=tuple(gpu_list),
        blas_path=blas_code_path(),
        probed_at=stamp,
        how=f"probe {stamp} ({MATMUL_SIZE}^2 matmul and {COPY_BYTES >> 20} MiB copy on {threads} thread(s), "
            f"best of {repeats}; {time.perf_counter() - t0:.1f} s)")
