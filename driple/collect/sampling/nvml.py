"""The only module that talks to NVIDIA's NVML (package ``nvidia-ml-py``, imported as ``pynvml``).

Utilization comes from ``nvmlDeviceGetSamples``: the driver's own buffered samples, each with
its timestamp (us, wall clock), covering 1/6 s to 1 s each -- polling ``nvmlDeviceGetUtilizationRates``
faster than that only repeats values. ``utilization.gpu`` (% of time a kernel ran) and
``utilization.memory`` (% of time the memory controller was busy) are read; memory used (bytes)
is read directly. Tests replace ``pynvml`` with a fake module; nothing here needs a GPU to import.
"""
from __future__ import annotations

import importlib

from driple.errors import DripleError

KINDS = ("gpu", "memory")  # utilization.gpu, utilization.memory


def load():
    """Import and initialise pynvml; a :class:`DripleError` saying what to install otherwise."""
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError:
        raise DripleError(
            "GPU sampling needs NVIDIA's NVML bindings: pip install nvidia-ml-py "
            "(or install driple[gpu])"
        ) from None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # pynvml.NVMLError and its subclasses
        raise DripleError(
            f"cannot start NVML ({e}); is the NVIDIA driver installed and a GPU visible? "
            "Use device='cpu' on a host without GPUs"
        ) from None
    return pynvml


def shutdown(pynvml) -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception:
        pass


def device_count(pynvml) -> int:
    return int(pynvml.nvmlDeviceGetCount())


def _value(pynvml, value_type: int, sample) -> float:
    v = sample.sampleValue
    field = {
        getattr(pynvml, "NVML_VALUE_TYPE_DOUBLE", 0): "dVal",
        getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_INT", 1): "uiVal",
        getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_LONG", 2): "ulVal",
        getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG", 3): "ullVal",
        getattr(pynvml, "NVML_VALUE_TYPE_SIGNED_LONG_LONG", 4): "sllVal",
        getattr(pynvml, "NVML_VALUE_TYPE_SIGNED_INT", 5): "siVal",
        getattr(pynvml, "NVML_VALUE_TYPE_UNSIGNED_SHORT", 6): "usVal",
    }.get(value_type, "uiVal")
    return float(getattr(v, field))


class Gpu:
    """One GPU: new utilization samples since the last call, and memory used."""

    def __init__(self, pynvml, index: int) -> None:
        self._nvml = pynvml
        self.index = index
        count = device_count(pynvml)
        if not 0 <= index < count:
            raise DripleError(f"GPU index {index} does not exist: NVML sees {count} GPU(s)")
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self._types = {
            "gpu": pynvml.NVML_GPU_UTILIZATION_SAMPLES,
            "memory": pynvml.NVML_MEMORY_UTILIZATION_SAMPLES,
        }
        self._last_ts = {k: 0 for k in KINDS}

    def new_samples(self, kind: str) -> list[tuple[int, float]]:
        """Driver samples of ``kind`` newer than those already returned: ``[(timestamp_us, %)]``."""
        nv = self._nvml
        try:
            value_type, samples = nv.nvmlDeviceGetSamples(self._handle, self._types[kind], self._last_ts[kind])
        except nv.NVMLError as e:
            if getattr(e, "value", None) == getattr(nv, "NVML_ERROR_NOT_FOUND", 6):
                return []  # no sample newer than the last one seen
            raise
        last = self._last_ts[kind]
        out = sorted(
            (int(s.timeStamp), _value(nv, value_type, s)) for s in samples if int(s.timeStamp) > last
        )
        if out:
            self._last_ts[kind] = out[-1][0]
        return out

    def memory_used(self) -> int:
        """Device memory in use, bytes."""
        return int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)
