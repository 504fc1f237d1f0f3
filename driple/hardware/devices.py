"""The device kinds a setting runs on, and what each one means for the collector.

A setting names its device by a word (``cpu``, ``gpu``: the first part of ``cpu-ddp-w2-lo``);
everything that differs between them lives in one :class:`DeviceKind` here rather than in a
``device == "gpu"`` branch at every place that cares. Adding a device kind is one entry here
plus its readers (NVML for NVIDIA GPUs).
"""
from __future__ import annotations

from dataclasses import dataclass

from driple.errors import DripleError


@dataclass(frozen=True)
class DeviceKind:
    """One device kind.

    Args:
        name: The word a setting id uses.
        torch_type: The ``torch.device`` type a worker trains on.
        one_per_worker: Each worker needs a device of its own (``gpu``), indexed from 0.
        samples_nvml: The sampler reads NVML utilisation and memory for each worker's device.
        collective_backend: The process-group backend its workers' collectives run on.

    A rank's allocated bytes are read by its ``torch_type``
    (:func:`driple.hardware.allocator.allocated_bytes_reader`).
    """

    name: str
    torch_type: str
    one_per_worker: bool
    samples_nvml: bool
    collective_backend: str


DEVICES = {
    "cpu": DeviceKind("cpu", "cpu", one_per_worker=False, samples_nvml=False, collective_backend="gloo"),
    "gpu": DeviceKind("gpu", "cuda", one_per_worker=True, samples_nvml=True, collective_backend="nccl"),
}


def device_kind(name: str) -> DeviceKind:
    """The :class:`DeviceKind` a setting's device word names; a clear error for an unknown one."""
    try:
        return DEVICES[str(name)]
    except KeyError:
        raise DripleError(f"unknown device {name!r}; known devices: {', '.join(DEVICES)}") from None
