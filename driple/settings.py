"""Settings: where a job runs (device, strategy, workers, servers, network).

An inspector is trained per setting. A setting has a structured descriptor and a short id:

    cpu-ddp-w2-lo        DDP all-reduce, 2 workers, CPU, loopback
    cpu-ddp-w2-1g        DDP, 2 workers, each on an emulated host linked at 1 Gbit/s
    cpu-ps-p1w2-1g       parameter server, 1 server + 2 workers, 1 Gbit/s links, synchronous
    cpu-ps-p1w2-1g-async the same with asynchronous updates
    gpu-ddp-w4-10g       GPU workers, 10 Gbit/s

Network: ``lo`` (plain loopback, one host) or ``<rate>`` — ``100m``, ``1g``, ``10g``, ``40g`` — for
emulated hosts in network namespaces whose links are rate-limited with ``tc tbf``. The strategy
part (``ddp-w2``, ``ps-p1w2``) and its rules come from the strategy's registration
(:mod:`driple.strategies`).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from driple.errors import DripleError
from driple.hardware.devices import DEVICES  # the device words a setting may use
from driple.strategies import describe_strategies, find_strategy, get_strategy

_RATE_UNITS = {"m": 1e6, "g": 1e9}
_ID_RE = re.compile(
    r"^(?P<device>[a-z]+)-(?P<strategy>[a-z][a-z0-9_]*)-(?P<ranks>[a-z0-9]+)"
    r"-(?P<network>lo|\d+[mg])(?P<async>-async)?$"
)


@dataclass(frozen=True)
class Setting:
    """Where a job runs. ``link_bps`` is the emulated link rate in bit/s (None on loopback)."""

    device: str = "cpu"
    strategy: str = "ddp"
    workers: int = 2
    servers: int = 0
    network: str = "lo"
    synchronous: bool = True

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise DripleError(f"unknown device {self.device!r}; use one of {', '.join(DEVICES)}")
        strategy = find_strategy(self.strategy)
        if strategy is None:
            raise DripleError(f"unknown strategy {self.strategy!r}; use {describe_strategies()}")
        if self.workers < 1:
            raise DripleError("a setting needs at least one worker")
        strategy.check(self)
        if self.network != "lo" and not re.fullmatch(r"\d+[mg]", self.network):
            raise DripleError(
                f"unknown network {self.network!r}; use 'lo' or a link rate such as 100m, 1g, 10g"
            )

    @property
    def id(self) -> str:
        tail = "" if self.synchronous else "-async"
        ranks = get_strategy(self.strategy).id_part(self)
        return f"{self.device}-{self.strategy}-{ranks}-{self.network}{tail}"

    @property
    def single_process(self) -> bool:
        """True when the job is one process (one worker, no server): nothing to communicate."""
        return self.workers + self.servers == 1

    @property
    def emulated(self) -> bool:
        """True when workers/servers run on emulated hosts (network namespaces)."""
        return self.network != "lo"

    @property
    def link_bps(self) -> float | None:
        if not self.emulated:
            return None
        return float(self.network[:-1]) * _RATE_UNITS[self.network[-1]]

    def to_dict(self) -> dict:
        return {**asdict(self), "id": self.id}

    def __str__(self) -> str:
        return self.id


def parse_setting(text: str | Setting) -> Setting:
    """Parse a setting id such as ``cpu-ddp-w2-lo``; a clear :class:`DripleError` otherwise."""
    if isinstance(text, Setting):
        return text
    m = _ID_RE.match(text.strip().lower())
    strategy = find_strategy(m["strategy"]) if m else None
    ranks = re.fullmatch(strategy.ranks, m["ranks"]) if strategy else None
    if not ranks:
        raise DripleError(
            f"cannot read setting {text!r}. A setting id looks like 'cpu-ddp-w2-lo' "
            "(device-strategy-workers-network), 'cpu-ps-p1w2-1g' (1 server, 2 workers, 1 Gbit/s "
            "links) or 'cpu-ps-p1w2-1g-async'."
        )
    fields = ranks.groupdict()
    return Setting(
        device=m["device"],
        strategy=m["strategy"],
        workers=int(fields["workers"]),
        servers=int(fields.get("servers") or 0),
        network=m["network"],
        synchronous=m["async"] is None,
    )
