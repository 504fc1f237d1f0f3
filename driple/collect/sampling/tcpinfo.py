"""Per-socket TCP byte counters from the kernel, via netlink ``inet_diag`` (NETLINK_SOCK_DIAG).

From each socket's ``struct tcp_info`` (the INET_DIAG_INFO attribute) we keep ``bytes_acked``
(payload sent and acknowledged, bytes) and ``bytes_received`` (payload received, bytes).
A ``SOCK_DIAG_BY_FAMILY`` dump lists every socket of the sampler's network namespace by inode,
which matches sockets to processes through ``/proc/<pid>/fd``; but a dump walks the kernel's
whole socket hash (~0.3 ms), so each sample instead looks the known sockets up by exact id
(~10 us per socket). :class:`TcpAccounts` turns this into per-target cumulative counters.
"""
from __future__ import annotations

import os
import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_INFO = 2

# TCP states worth asking for: sockets that can carry data and still have an inode.
# Left out: SYN_RECV (3), TIME_WAIT (6), LISTEN (10), NEW_SYN_RECV (12) -- no tcp_info / no bytes.
_STATES = [1, 2, 4, 5, 7, 8, 9, 11]  # ESTABLISHED SYN_SENT FIN_WAIT1/2 CLOSE CLOSE_WAIT LAST_ACK CLOSING
_STATE_MASK = sum(1 << s for s in _STATES)

_NLMSGHDR = struct.Struct("=IHHII")  # len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states, inet_diag_sockid (48 bytes, zero = any)
_REQ = struct.Struct("=BBBxI")
_SOCKID_OFFSET = 4  # struct inet_diag_sockid inside both the request and the reply
_SOCKID_LEN = 48
_EXT_INFO = 1 << (INET_DIAG_INFO - 1)
_U32 = struct.Struct("=I")
_I32 = struct.Struct("=i")
_MSG_INODE_OFFSET = 68  # u32 idiag_inode inside struct inet_diag_msg (72 bytes)
_MSG_LEN = 72
_RTA = struct.Struct("=HH")
# struct tcp_info: u64 tcpi_bytes_acked at byte 120, u64 tcpi_bytes_received at byte 128
_TCPI_BYTES = struct.Struct("=QQ")
_TCPI_BYTES_OFFSET = 120
_TCPI_MIN_LEN = _TCPI_BYTES_OFFSET + _TCPI_BYTES.size
BATCH = 64  # exact lookups per send: their answers (~1 kB of buffer each) must fit in rcvbuf


def _header(body_len: int, flags: int, seq: int) -> bytes:
    return _NLMSGHDR.pack(_NLMSGHDR.size + body_len, SOCK_DIAG_BY_FAMILY, flags, seq, 0)


class TcpInfoReader:
    """Read ``(bytes_acked, bytes_received)`` of TCP sockets of this network namespace.

    :meth:`dump` lists every socket (a walk of the kernel's whole socket hash: ~0.3 ms here,
    so only when new sockets must be found); :meth:`query` looks up known sockets by their
    exact id (address, ports, cookie) in one netlink round trip -- cheap enough for 100 Hz.
    """

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        self._sock.bind((0, 0))
        self._buf = bytearray(1 << 16)
        self._seq = 0
        self._info_at = 16 + _MSG_LEN  # where INET_DIAG_INFO sat in the last reply

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> "TcpInfoReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def dump(self) -> dict[int, tuple[bytes, int, int]]:
        """Every TCP socket that has an inode: ``{inode: (key, bytes_acked, bytes_received)}``.

        ``key`` identifies the socket exactly (family + ``inet_diag_sockid``) for :meth:`query`.
        """
        out: dict[int, tuple[bytes, int, int]] = {}
        for family in (socket.AF_INET, socket.AF_INET6):
            self._seq += 1
            body = _REQ.pack(family, socket.IPPROTO_TCP, _EXT_INFO, _STATE_MASK) + bytes(_SOCKID_LEN)
            self._sock.send(_header(len(body), NLM_F_REQUEST | NLM_F_DUMP, self._seq) + body)
            for _seq, msg, payload in self._messages(expect=None):
                if msg is None:
                    continue
                (inode,) = _U32.unpack_from(msg, _MSG_INODE_OFFSET)
                if inode and payload is not None:
                    key = bytes(msg[0:1]) + bytes(msg[_SOCKID_OFFSET:_SOCKID_OFFSET + _SOCKID_LEN])
                    out[inode] = (key, *payload)
        return out

    def prepare(self, keys: list[bytes]) -> list[tuple[bytes, int, int]]:
        """Batches of exact-lookup requests for ``keys``, to pass to :meth:`run` many times.

        At most ``BATCH`` requests per batch, so that the answers fit in the socket's buffer.
        """
        plan = []
        for start in range(0, len(keys), BATCH):
            chunk = keys[start:start + BATCH]
            base = self._seq + 1
            parts = []
            for i, key in enumerate(chunk):
                body = _REQ.pack(key[0], socket.IPPROTO_TCP, _EXT_INFO, _STATE_MASK) + key[1:]
                parts.append(_header(len(body), NLM_F_REQUEST, base + i) + body)
            self._seq = base + len(chunk)
            plan.append((b"".join(parts), base, len(chunk)))
        return plan

    def query(self, keys: list[bytes]) -> list[tuple[int, int] | None]:
        """``(bytes_acked, bytes_received)`` per socket key, ``None`` for sockets that are gone."""
        return self.run(self.prepare(keys))

    def run(self, plan: list[tuple[bytes, int, int]]) -> list[tuple[int, int] | None]:
        """Send a prepared plan; one answer (reply or error) per socket, parsed inline.

        The sampler's hot path. Netlink answers within ``send()``, so the answers are read
        without blocking; a missing one raises ``BlockingIOError`` (prepare again then).
        The INFO attribute is looked for first where it was in the last reply.
        """
        out: list[tuple[int, int] | None] = []
        buf = self._buf
        send = self._sock.send
        recv_into = self._sock.recv_into
        unpack_hdr = _NLMSGHDR.unpack_from
        unpack_rta = _RTA.unpack_from
        unpack_bytes = _TCPI_BYTES.unpack_from
        for blob, base, n in plan:
            send(blob)
            got: list[tuple[int, int] | None] = [None] * n
            answered = 0
            while answered < n:
                size = recv_into(buf, 0, socket.MSG_DONTWAIT)
                off = 0
                while off + 16 <= size:
                    length, mtype, _flags, seq, _pid = unpack_hdr(buf, off)
                    if length < 16:
                        break
                    i = seq - base
                    if 0 <= i < n:
                        if mtype == SOCK_DIAG_BY_FAMILY:
                            answered += 1
                            a = off + self._info_at
                            if not (a + 4 <= off + length and unpack_rta(buf, a)[1] == INET_DIAG_INFO):
                                a = self._find_info(off, length)
                            if a and unpack_rta(buf, a)[0] - 4 >= _TCPI_MIN_LEN:
                                got[i] = unpack_bytes(buf, a + 4 + _TCPI_BYTES_OFFSET)
                        elif mtype == NLMSG_ERROR:
                            answered += 1
                    off += (length + 3) & ~3
            out.extend(got)
        return out

    def _find_info(self, off: int, length: int) -> int:
        """Offset of the INET_DIAG_INFO attribute of the message at ``off`` (0 if none)."""
        a = off + 16 + _MSG_LEN
        end = off + length
        while a + 4 <= end:
            rta_len, rta_type = _RTA.unpack_from(self._buf, a)
            if rta_len < 4:
                break
            if rta_type == INET_DIAG_INFO:
                self._info_at = a - off
                return a
            a += (rta_len + 3) & ~3
        return 0

    def _messages(self, expect: int | None):
        """Yield ``(seq, inet_diag_msg view or None, (acked, received) or None)`` of a dump.

        A dump ends with NLMSG_DONE (or after ``expect`` answers when given).
        """
        buf = self._buf
        view = memoryview(buf)
        unpack_hdr = _NLMSGHDR.unpack_from
        unpack_rta = _RTA.unpack_from
        unpack_bytes = _TCPI_BYTES.unpack_from
        answered = 0
        while expect is None or answered < expect:
            n = self._sock.recv_into(buf)
            off = 0
            while off + 16 <= n:
                length, mtype, _flags, seq, _pid = unpack_hdr(buf, off)
                if length < 16:
                    break
                if mtype == NLMSG_DONE and expect is None:
                    return
                if mtype == NLMSG_ERROR:
                    answered += 1
                    (err,) = _I32.unpack_from(buf, off + 16)
                    if expect is None and err:
                        raise OSError(-err, os.strerror(-err))
                    yield seq, None, None
                elif mtype == SOCK_DIAG_BY_FAMILY:
                    answered += 1
                    msg = off + 16
                    payload = None
                    a = msg + _MSG_LEN
                    end = off + length
                    while a + 4 <= end:
                        rta_len, rta_type = unpack_rta(buf, a)
                        if rta_len < 4:
                            break
                        if rta_type == INET_DIAG_INFO:
                            if rta_len - 4 >= _TCPI_MIN_LEN:
                                payload = unpack_bytes(buf, a + 4 + _TCPI_BYTES_OFFSET)
                            break
                        a += (rta_len + 3) & ~3
                    yield seq, view[msg:msg + _MSG_LEN], payload
                off += (length + 3) & ~3


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets open in ``/proc/<pid>/fd`` (empty if the process is gone).

    Raises ``PermissionError`` when we may not look at another user's descriptors.
    """
    fd_dir = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except (FileNotFoundError, ProcessLookupError):
        return set()
    out = set()
    for name in names:
        try:
            link = os.readlink(f"{fd_dir}/{name}")
        except OSError:
            continue
        if link.startswith("socket:["):
            out.add(int(link[8:-1]))
    return out


class TcpAccounts:
    """Cumulative tx/rx bytes per target over every TCP socket its process tree ever held.

    :meth:`assign` (called at each tree refresh) gives each target the socket inodes found in
    its processes' fds; unknown inodes are resolved to exact socket ids with a full dump, at
    most every ``redump_s`` unless new inodes appear. :meth:`read` then queries only those
    sockets. A socket that closes keeps its last counts in the total, so totals never go
    backwards; a socket found after the start is counted with all its bytes at discovery.
    """

    def __init__(self, n_targets: int, reader: TcpInfoReader | None = None, redump_s: float = 2.0) -> None:
        self.reader = reader or TcpInfoReader()
        self.redump_s = redump_s
        self._closed = [[0, 0] for _ in range(n_targets)]
        self._open: list[list] = []  # [target index, key, bytes_acked, bytes_received]
        self._keys: list[bytes] = []  # the keys of _open, in order
        self._plan = None  # prepared request batch for _keys
        self._known: set[int] = set()  # inodes already tracked
        self._unresolved: set[int] = set()  # inodes seen in fds but not (yet) in a TCP dump
        self._last_dump = float("-inf")

    @property
    def n_sockets(self) -> int:
        return len(self._open)

    def assign(self, inodes_per_target: list[set[int]], now: float) -> None:
        owner: dict[int, int] = {}
        for i, inodes in enumerate(inodes_per_target):
            for ino in inodes:
                if ino not in self._known:
                    owner.setdefault(ino, i)
        if not owner:
            return
        fresh = any(ino not in self._unresolved for ino in owner)
        if not fresh and now - self._last_dump < self.redump_s:
            return
        self._last_dump = now
        table = self.reader.dump()
        self._unresolved = set()
        for ino, i in owner.items():
            if ino in table:
                self._known.add(ino)
                self._open.append([i, table[ino][0], 0, 0])
                self._keys.append(table[ino][0])
                self._plan = None
            else:
                self._unresolved.add(ino)  # unix/UDP/listening or not yet connected

    def read(self) -> list[tuple[int, int]]:
        """``[(tx_bytes, rx_bytes)]`` per target, cumulative."""
        totals = [list(c) for c in self._closed]
        if not self._open:
            return [(t[0], t[1]) for t in totals]
        if self._plan is None:
            self._plan = self.reader.prepare(self._keys)
        try:
            answers = self.reader.run(self._plan)
        except OSError:  # an answer went missing: keep the last counts, ask afresh next time
            self._plan = None
            for s in self._open:
                t = totals[s[0]]
                t[0] += s[2]
                t[1] += s[3]
            return [(t[0], t[1]) for t in totals]
        gone = False
        for s, a in zip(self._open, answers):
            if a is None:  # socket gone: its last counts stay in the total
                c = self._closed[s[0]]
                c[0] += s[2]
                c[1] += s[3]
                s[0] = -1 - s[0]  # mark; removed below
                gone = True
            elif a[0] > s[2] or a[1] > s[3]:  # never backwards, even if a counter were reset
                s[2] = max(s[2], a[0])
                s[3] = max(s[3], a[1])
            t = totals[s[0] if s[0] >= 0 else -1 - s[0]]
            t[0] += s[2]
            t[1] += s[3]
        if gone:
            self._open = [s for s in self._open if s[0] >= 0]
            self._keys = [s[1] for s in self._open]
            self._plan = None
        return [(t[0], t[1]) for t in totals]

    def close(self) -> None:
        self.reader.close()
