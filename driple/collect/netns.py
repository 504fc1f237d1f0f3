"""Emulated cluster: one network namespace per host, veth links to a bridge, ``tc tbf`` rates.

Each emulated host ``i`` is a namespace ``driple-<id>-h<i>`` whose only interface ``eth0``
(address ``10.211.0.<i+1>/24``, private to the namespaces) is one end of a veth pair; the
other end, ``driple-<id>v<i>`` on the host, is a port of the bridge ``driple-<id>b`` (no
address: traffic never leaves the bridge). Both ends of every link are shaped with a token
bucket (``tc qdisc ... tbf``, no netem) at the setting's link rate, so each host has a
full-duplex link of that rate. ``<id>`` is the owner's pid in base 36, so links fit the
15-character interface name limit and a later run can tell leftovers of a dead run apart.

The cluster is always removed: by :meth:`EmulatedCluster.remove` (``with`` block), by an
``atexit`` hook, and at the next start (:func:`remove_stale` deletes ``driple-`` namespaces and
links whose owner process is gone). Needs root; :func:`require_root` says so clearly.
"""
from __future__ import annotations

import atexit
import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass

from driple.collect.interrupts import raise_interrupt
from driple.errors import DripleError

PREFIX = "driple-"
SUBNET = "10.211.0"  # /24, exists only inside the namespaces
IFNAME = "eth0"  # the host's interface inside its namespace
_OWNED = re.compile(r"^driple-([0-9a-z]{1,5})(?:-h\d+|b|v\d+|p\d+)$")
_ACTIVE: set = set()
_LOCK = threading.Lock()


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


def require_root() -> None:
    """Raise a :class:`DripleError` unless this process may create namespaces (root)."""
    if os.geteuid() != 0:
        raise DripleError(
            "emulated-network settings (e.g. cpu-ddp-w2-1g) create network namespaces, veth "
            "links and tc rate limits, which needs root. Run as root, or use a loopback "
            "setting such as cpu-ddp-w2-lo."
        )
    for tool in ("ip", "tc"):
        if subprocess.run(["which", tool], capture_output=True).returncode:
            raise DripleError(f"the emulated cluster needs the '{tool}' command (package iproute2)")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(list(args), capture_output=True, text=True)
    if check and proc.returncode:
        raise DripleError(f"'{' '.join(args)}' failed: {proc.stderr.strip()}")
    return proc


def tbf_args(link_bps: float) -> list[str]:
    """``tc`` arguments of a token bucket at ``link_bps`` bit/s: burst of 1 ms (>= 64 KiB), 50 ms queue."""
    burst = max(64 * 1024, int(link_bps / 8 * 1e-3))
    return ["tbf", "rate", f"{int(link_bps)}bit", "burst", str(burst), "latency", "50ms"]


@dataclass
class EmulatedHost:
    index: int
    netns: str
    veth: str  # host-side end of this host's link (its counters are the host's traffic, swapped)
    address: str

    def wrap(self, cmd: list[str]) -> list[str]:
        """``cmd`` run inside this host's namespace (same pid: ``ip netns exec`` execs)."""
        return ["ip", "netns", "exec", self.netns, *cmd]

    def env(self) -> dict[str, str]:
        """Environment that makes gloo and TensorPipe use this host's link."""
        return {"GLOO_SOCKET_IFNAME": IFNAME, "TP_SOCKET_IFNAME": IFNAME}


class EmulatedCluster:
    """``hosts`` emulated hosts on one bridge, every link shaped at ``link_bps`` bit/s.

    Use as a context manager; creation removes whatever it made if it fails half-way.
    """

    def __init__(self, hosts: int, link_bps: float):
        if hosts < 1 or hosts > 99:
            raise DripleError("an emulated cluster has 1 to 99 hosts")
        if not link_bps or link_bps <= 0:
            raise DripleError("an emulated cluster needs a positive link rate (bit/s)")
        self.n = hosts
        self.link_bps = float(link_bps)
        self.tag = _b36(os.getpid())
        self.bridge = f"{PREFIX}{self.tag}b"
        self.hosts = [
            EmulatedHost(i, f"{PREFIX}{self.tag}-h{i}", f"{PREFIX}{self.tag}v{i}", f"{SUBNET}.{i + 1}")
            for i in range(hosts)
        ]
        self._up = False

    def __enter__(self) -> "EmulatedCluster":
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def create(self) -> None:
        require_root()
        remove_stale()
        with _LOCK:
            if _ACTIVE:
                raise DripleError("this process already runs an emulated cluster; one at a time")
            _ACTIVE.add(self)
        self._up = True
        self._hook_signals()
        try:
            _ip("ip", "link", "add", self.bridge, "type", "bridge")
            _no_ipv6(self.bridge)
            _ip("ip", "link", "set", self.bridge, "up")
            tbf = tbf_args(self.link_bps)
            for h in self.hosts:
                peer = f"{PREFIX}{self.tag}p{h.index}"
                _ip("ip", "netns", "add", h.netns)
                _ip("ip", "netns", "exec", h.netns, "sysctl", "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
                _ip("ip", "link", "add", h.veth, "type", "veth", "peer", "name", peer)
                _no_ipv6(h.veth)
                _ip("ip", "link", "set", peer, "netns", h.netns)
                _ip("ip", "-n", h.netns, "link", "set", peer, "name", IFNAME)
                _ip("ip", "-n", h.netns, "addr", "add", f"{h.address}/24", "dev", IFNAME)
                _ip("ip", "-n", h.netns, "link", "set", IFNAME, "up")
                _ip("ip", "-n", h.netns, "link", "set", "lo", "up")
                _ip("ip", "link", "set", h.veth, "master", self.bridge)
                _ip("ip", "link", "set", h.veth, "up")
                _ip("tc", "qdisc", "add", "dev", h.veth, "root", *tbf)
                _ip("tc", "-n", h.netns, "qdisc", "add", "dev", IFNAME, "root", *tbf)
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        """Delete the namespaces (their links go with them) and the bridge; kill what is left inside."""
        if not self._up:
            return
        for h in self.hosts:
            _kill_inside(h.netns)
            _ip("ip", "netns", "del", h.netns, check=False)
            _ip("ip", "link", "del", h.veth, check=False)
        _ip("ip", "link", "del", self.bridge, check=False)
        self._up = False
        with _LOCK:
            _ACTIVE.discard(self)
        self._unhook_signals()

    def _hook_signals(self) -> None:
        """SIGTERM/SIGHUP with no handler would end the process without clean-up: make them
        raise KeyboardInterrupt (like Ctrl-C) so ``with`` blocks and ``finally`` run."""
        self._old_handlers = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is signal.SIG_DFL:
                self._old_handlers[sig] = signal.signal(sig, raise_interrupt)

    def _unhook_signals(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, old in getattr(self, "_old_handlers", {}).items():
            if signal.getsignal(sig) is raise_interrupt:
                signal.signal(sig, old)
        self._old_handlers = {}



def _no_ipv6(dev: str) -> None:
    """No IPv6 on driple links: router solicitations would add stray bytes to the counters."""
    try:
        with open(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6", "w") as f:
            f.write("1")
    except OSError:
        pass


def _kill_inside(netns: str) -> None:
    proc = _ip("ip", "netns", "pids", netns, check=False)
    for pid in proc.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ValueError, ProcessLookupError, PermissionError):
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(all_owners: bool = False) -> list[str]:
    """Remove ``driple-`` namespaces, bridges and veths left by runs whose process is gone.

    ``all_owners=True`` also removes those of live processes (``driple collect cleanup --all``).
    Returns the names removed.
    """
    if os.geteuid() != 0:
        return []
    removed = []

    def stale(name: str) -> bool:
        m = _OWNED.match(name)
        if not m:
            return False
        owner = int(m.group(1), 36)
        return all_owners or (owner != os.getpid() and not _alive(owner))

    for line in _ip("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if stale(name):
            _kill_inside(name)
            _ip("ip", "netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        if stale(name):
            _ip("ip", "link", "del", name, check=False)
            removed.append(name)
    return removed


@atexit.register
def _remove_active() -> None:
    for cluster in list(_ACTIVE):
        cluster.remove()
