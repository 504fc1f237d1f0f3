"""Does this host look like the one an inspector's labels were measured on?

An inspector predicts jobs on the hardware of its dataset: its priors divide FLOPs and bytes by
that host's measured figures (``HostSpeed``, in the checkpoint), and its labels were measured
there. On another CPU model, or the same VM on a slower day (1.14x between two days on one
host, 1.2x between an Intel and an AMD host), the predicted durations are off by about that
ratio. :func:`compare_hosts` puts the half-second benchmark of this host
(:func:`driple.hardware.host_speed.measure_host_speed`) beside the checkpoint's figures, so that
a scheduler knows before trusting a step time; ``driple predict --hardware this`` carries a
prediction to this host (:mod:`driple.hardware.scaling`, with its measured error).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from driple.hardware.host_speed import HostSpeed

#: % of the host's CPU other processes may use while a job (or a probe) is measured: above it
#: the host is "contended" (the collector flags the row, training leaves it out).
QUIET_HOST_PCT = 10.0

TOLERANCE = 0.15  # a ratio within 1 +- this is "the same speed": the benchmark repeats within ~5 %


@dataclass(frozen=True)
class HostComparison:
    """This host against the host an inspector's labels describe.

    ``compute_ratio`` and ``memory_ratio`` are this host's GEMM FLOP/s and copy bandwidth over
    the trained-on host's (above 1: this host is faster)."""

    setting: str
    trained_cpu: str
    here_cpu: str
    compute_ratio: float
    memory_ratio: float
    same_cpu: bool
    matches: bool
    advice: str
    busy_pct: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def compare_hosts(setting: str, trained: HostSpeed, here: HostSpeed,
                  tolerance: float = TOLERANCE, busy_pct: float | None = None) -> HostComparison:
    """Compare ``here`` (a fresh measurement) with ``trained`` (the checkpoint's figures);
    ``busy_pct``: the host's CPU use by others just before ``here`` was measured."""
    compute = here.flops_per_s / trained.flops_per_s
    memory = here.memory_bytes_per_s / trained.memory_bytes_per_s
    same_cpu = bool(trained.cpu_model) and cpu_family(trained.cpu_model) == cpu_family(here.cpu_model)
    fast_enough = all(abs(r - 1.0) <= tolerance for r in (compute, memory))
    matches = same_cpu and fast_enough
    if matches:
        advice = "same CPU model and speed: the predictions describe jobs on this host"
    else:
        why = [] if same_cpu else [f"another CPU model (labels measured on {trained.cpu_model or 'an unnamed CPU'})"]
        if not fast_enough:
            why.append("another speed")
        advice = (" and ".join(why) + ": the predictions describe the trained-on host; durations "
                  "here will differ by about these ratios (driple predict --hardware this carries a "
                  "prediction here, docs/hardware.md says how well; or fine-tune on jobs measured "
                  "here: driple collect, then driple finetune)")
    if busy_pct is not None and busy_pct > QUIET_HOST_PCT:
        advice += (f"; this host was busy ({busy_pct:.0f} % CPU used by other processes): "
                   "its figures are low, measure again when it is quiet")
    return HostComparison(setting, trained.cpu_model, here.cpu_model, compute, memory,
                          same_cpu, matches, advice, busy_pct)


def cpu_family(name: str) -> str:
    """``AMD EPYC 7B13`` and ``AMD EPYC`` name the same family: the datasets record the
    collector's short name, /proc/cpuinfo the full one. Compared on the first two words."""
    words = (name or "").replace("(R)", "").replace("(TM)", "").split()
    return " ".join(words[:2]).lower()
