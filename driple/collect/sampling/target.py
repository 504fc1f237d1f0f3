"""What a sampler watches: one process tree (a worker or a parameter server) and its devices."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from driple.errors import DripleError


@dataclass(frozen=True)
class Target:
    """One process tree to sample.

    ``pid`` is the root; its descendants are included (found again every 0.5 s). ``cores`` is
    the number of CPU cores allotted to the tree: compute % = CPU time / wall time / cores x 100.
    ``veth`` is the host-side veth of the target's network namespace (emulated hosts); its
    counters are swapped (host-side rx = bytes the target sent). ``gpu_index`` is the NVML
    index of the target's GPU (``device="gpu"`` only).
    """

    name: str
    pid: int
    cores: float = 1.0
    veth: str | None = None
    gpu_index: int | None = None

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise DripleError(f"target name {self.name!r} must be non-empty and contain no '/'")
        if not isinstance(self.pid, int) or self.pid <= 0:
            raise DripleError(f"target {self.name!r}: pid must be a positive integer, got {self.pid!r}")
        if not self.cores > 0:
            raise DripleError(f"target {self.name!r}: cores must be > 0, got {self.cores!r}")

    def to_dict(self) -> dict:
        return asdict(self)
