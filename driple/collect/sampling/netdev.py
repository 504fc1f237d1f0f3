"""Interface byte counters: host-side veth of an emulated host, and /proc/net/dev totals.

Files are opened once and re-read with ``pread`` at offset 0 (the kernel regenerates them),
which costs a few us. Counters include Ethernet/IP/TCP headers, unlike tcp_info (payload only).
"""
from __future__ import annotations

import os

from driple.errors import DripleError


def _open(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_CLOEXEC)


class VethCounters:
    """Bytes sent and received by the namespace behind host-side veth ``name``.

    The host side sees the target's traffic mirrored: host rx = target tx, host tx = target rx.
    If the veth disappears (namespace deleted) the last values are kept.
    """

    def __init__(self, name: str) -> None:
        base = f"/sys/class/net/{name}/statistics"
        try:
            self._rx_fd = _open(f"{base}/rx_bytes")
            self._tx_fd = _open(f"{base}/tx_bytes")
        except FileNotFoundError:
            raise DripleError(
                f"network interface {name!r} does not exist on this host; give the host-side "
                "veth of the target's namespace (see `ip -br link`)"
            ) from None
        self.name = name
        self.last = (0, 0)
        self.read()

    @property
    def fds(self) -> tuple[int, int]:
        """The open host-side ``rx_bytes`` and ``tx_bytes`` files (for the native loop)."""
        return self._rx_fd, self._tx_fd

    def read(self) -> tuple[int, int]:
        """``(target_tx_bytes, target_rx_bytes)``, cumulative."""
        try:
            host_rx = int(os.pread(self._rx_fd, 32, 0))
            host_tx = int(os.pread(self._tx_fd, 32, 0))
        except (OSError, ValueError):
            return self.last
        self.last = (host_rx, host_tx)
        return self.last

    def close(self) -> None:
        for fd in (self._rx_fd, self._tx_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class InterfaceTotals:
    """Cumulative rx/tx bytes of every interface in ``/proc/net/dev`` present at start.

    A cross-check of per-target counters: on loopback, the sum of the targets' tx should be
    close to ``lo`` tx (which also counts headers and traffic of other processes).
    """

    def __init__(self) -> None:
        self._fd = _open("/proc/net/dev")
        self.names = sorted(self._parse())
        self.last = {n: (0, 0) for n in self.names}
        self.read()

    def _parse(self) -> dict[str, tuple[int, int]]:
        data = os.pread(self._fd, 65536, 0)
        while len(data) % 65536 == 0 and data:  # many interfaces; a short read is the end
            chunk = os.pread(self._fd, 65536, len(data))  # (every pread regenerates the file)
            if not chunk:
                break
            data += chunk
        out = {}
        for line in data.split(b"\n")[2:]:
            if b":" not in line:
                continue
            name, rest = line.split(b":", 1)
            fields = rest.split()
            out[name.strip().decode()] = (int(fields[0]), int(fields[8]))
        return out

    def read(self) -> list[tuple[int, int]]:
        """``[(rx_bytes, tx_bytes)]`` in the order of :attr:`names`; vanished ones keep their last."""
        now = self._parse()
        for n in self.names:
            if n in now:
                self.last[n] = now[n]
        return [self.last[n] for n in self.names]

    def close(self) -> None:
        os.close(self._fd)
