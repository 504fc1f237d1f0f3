"""What a machine is: a versioned :class:`HardwareSpec`, measured by :mod:`driple.hardware.probe`.

A dataset row, an inspector and a prediction each name the machine they describe with one of
these. The spec holds the figures a prediction is scaled by (the peaks of the roofline, whose
fitted rates are fractions of them) and the facts that tell two machines apart:

- per-dtype matmul FLOP/s at the worker's thread count (``matmul_flops_per_s``);
- copy bandwidth, bytes read + written per second (``copy_bytes_per_s``);
- logical CPUs, the cores a job can really use (affinity and cgroup quota), threads per worker;
- cache sizes where the kernel shows them, host memory;
- each network interface's rate where the kernel knows it (loopback and veth have none);
- the code path of the BLAS on this CPU (``blas_path``, :func:`~driple.hardware.probe.blas_code_path`):
  the buffers it keeps move a worker's memory by up to 20 MB;
- on a GPU host, one :class:`GpuSpec` per GPU (name, SMs, memory, memory bandwidth, peak FLOPS).

Specs are plain JSON (``to_dict``/``from_dict``); a spec of another version, or one without
the fields a prediction needs, is refused with a one-line :class:`~driple.errors.DripleError`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from driple.errors import DripleError
from driple.hardware.host_speed import LOOPBACK_BYTES_PER_S, HostSpeed

SPEC_VERSION = 1
#: The dtype whose matmul rate is the compute peak of the roofline (the zoo trains in float32).
PEAK_DTYPE = "float32"


@dataclass(frozen=True)
class GpuSpec:
    """One GPU (units in the names). ``peak_flops_per_s`` is per dtype, dense, no sparsity;
    ``memory_bandwidth_bytes_per_s`` is the memory's peak (bus width x clock x 2)."""

    index: int
    name: str
    sms: int
    memory_bytes: int
    memory_bandwidth_bytes_per_s: float
    peak_flops_per_s: dict = field(default_factory=dict)
    compute_capability: str = ""
    driver: str = ""

    @classmethod
    def from_dict(cls, record: dict) -> "GpuSpec":
        _require(record, ("index", "name", "sms", "memory_bytes", "memory_bandwidth_bytes_per_s"), "GPU spec")
        known = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        return cls(**known)


@dataclass(frozen=True)
class HardwareSpec:
    """A machine as a prediction sees it (module docstring; units in the names).

    ``how`` says where the figures come from: ``probe <date> …`` for a measurement,
    ``recorded …`` for the figures a dataset or checkpoint kept from before specs existed.
    """

    cpu_model: str
    logical_cpus: int
    cores_available: float
    threads_per_worker: int
    matmul_flops_per_s: dict
    copy_bytes_per_s: float
    memory_bytes: int
    caches_bytes: dict = field(default_factory=dict)
    links_bits_per_s: dict = field(default_factory=dict)
    loopback_bytes_per_s: float = LOOPBACK_BYTES_PER_S
    gpus: tuple = ()
    blas_path: str = ""
    probed_at: str = ""
    how: str = ""
    version: int = SPEC_VERSION

    def __post_init__(self):
        rate = self.matmul_flops_per_s.get(PEAK_DTYPE) if isinstance(self.matmul_flops_per_s, dict) else None
        if not _positive(rate):
            raise DripleError(f"a hardware spec needs a positive {PEAK_DTYPE} matmul rate, not {rate!r}")
        if not _positive(self.copy_bytes_per_s):
            raise DripleError(f"a hardware spec needs a positive copy bandwidth, not {self.copy_bytes_per_s!r}")
        object.__setattr__(self, "gpus", tuple(g if isinstance(g, GpuSpec) else GpuSpec.from_dict(g)
                                               for g in self.gpus))
        if not isinstance(self.blas_path, str):
            raise DripleError(f"a hardware spec's blas_path is a name such as \"mkl-0\", not {self.blas_path!r}")

    # ------------------------------------------------------------------ what a prediction uses
    @property
    def flops_per_s(self) -> float:
        """The compute peak the roofline divides FLOPs by: the float32 matmul rate."""
        return float(self.matmul_flops_per_s[PEAK_DTYPE])

    def core_share(self, ranks: Optional[int]) -> float:
        """The share of a core each of ``ranks`` one-thread ranks gets on this machine's usable
        cores (1 when the cores are unknown or enough)."""
        if not ranks or self.cores_available <= 0:
            return 1.0
        return min(1.0, float(self.cores_available) / int(ranks))

    def host_speed(self, ranks: Optional[int] = None) -> HostSpeed:
        """The figures the inspector's priors and roofline divide by (:class:`HostSpeed`); with
        ``ranks`` (one-thread processes sharing the machine) the compute and copy peaks are
        those of each rank's share of the usable cores (:meth:`core_share`)."""
        share = self.core_share(ranks)
        return HostSpeed(flops_per_s=self.flops_per_s * share,
                         memory_bytes_per_s=float(self.copy_bytes_per_s) * share,
                         loopback_bytes_per_s=float(self.loopback_bytes_per_s),
                         memory_bytes=float(self.memory_bytes or 0), cpu_model=self.cpu_model,
                         how=self.how or "hardware spec")

    @classmethod
    def from_host_speed(cls, host: HostSpeed, how: Optional[str] = None,
                        cores: Optional[float] = None) -> "HardwareSpec":
        """The spec of figures recorded before specs existed (a checkpoint's or dataset's
        :class:`HostSpeed`, and the usable ``cores`` where recorded): the facts it did not
        record are unknown (0 or empty)."""
        cores = float(cores or 0.0)
        return cls(cpu_model=host.cpu_model, logical_cpus=int(cores), cores_available=cores, threads_per_worker=1,
                   matmul_flops_per_s={PEAK_DTYPE: float(host.flops_per_s)},
                   copy_bytes_per_s=float(host.memory_bytes_per_s), memory_bytes=int(host.memory_bytes or 0),
                   loopback_bytes_per_s=float(host.loopback_bytes_per_s),
                   how=how or f"recorded: {host.how}")

    # ------------------------------------------------------------------ reading and writing
    def to_dict(self) -> dict:
        out = asdict(self)
        out["gpus"] = [asdict(g) for g in self.gpus]
        return out

    @classmethod
    def from_dict(cls, record) -> "HardwareSpec":
        if not isinstance(record, dict):
            raise DripleError(f"a hardware spec is a JSON object, not {type(record).__name__}")
        version = record.get("version")
        if version != SPEC_VERSION:
            raise DripleError(f"hardware spec version {version!r}; this driple reads version {SPEC_VERSION}")
        _require(record, ("cpu_model", "matmul_flops_per_s", "copy_bytes_per_s"), "hardware spec")
        known = {k: record[k] for k in cls.__dataclass_fields__ if k in record}
        defaults = {"logical_cpus": 0, "cores_available": 0.0, "threads_per_worker": 1, "memory_bytes": 0}
        try:
            return cls(**{**defaults, **known})
        except TypeError as exc:
            raise DripleError(f"hardware spec is malformed ({exc})") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def summary(self) -> str:
        """One line: CPU, usable cores, float32 matmul GFLOP/s, copy GB/s, GPUs."""
        gpus = ", ".join(f"{g.name}" for g in self.gpus)
        cores = f"{self.cores_available:g} usable cores, " if self.cores_available else ""
        return (f"{self.cpu_model or 'unnamed CPU'}: {cores}{self.flops_per_s / 1e9:.0f} GFLOP/s "
                f"{PEAK_DTYPE} matmul on {self.threads_per_worker} thread(s), "
                f"copy {self.copy_bytes_per_s / 1e9:.1f} GB/s" + (f"; GPUs: {gpus}" if gpus else ""))

    def ratios(self, other: "HardwareSpec") -> dict:
        """This spec's peaks over ``other``'s (above 1: this one is faster)."""
        return {"compute": self.flops_per_s / other.flops_per_s,
                "memory": self.copy_bytes_per_s / other.copy_bytes_per_s,
                "loopback": self.loopback_bytes_per_s / other.loopback_bytes_per_s}


def load_spec(path: str | Path) -> HardwareSpec:
    """A spec from a JSON file (``driple hardware probe --json > spec.json``)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise DripleError(f"no hardware spec at {path}") from None
    except (OSError, ValueError) as exc:
        raise DripleError(f"{path} is not a readable hardware spec ({exc})") from None
    try:
        return HardwareSpec.from_dict(record)
    except DripleError as exc:
        raise DripleError(f"{path}: {exc}") from None


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _require(record: dict, keys, what: str) -> None:
    if not isinstance(record, dict):
        raise DripleError(f"a {what} is a JSON object, not {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise DripleError(f"{what} lacks {', '.join(missing)}")
