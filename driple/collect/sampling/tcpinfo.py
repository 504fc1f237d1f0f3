"""Per-socket TCP byte counters from the kernel, via netlink ``inet_diag`` (NETLINK_SOCK_DIAG).

From each socket's ``struct tcp_info`` (the INET_DIAG_INFO attribute) we keep ``bytes_acked``
(payload sent and acknowledged, bytes) and ``bytes_received`` (payload received, bytes).
A ``SOCK_DIAG_BY_FAMILY`` dump lists every socket of the sampler's network namespace by inode,
which matches sockets to processes through ``/proc/<pid>/fd``; but a dump walks the kernel's
whole established hash (262144 buckets here: 0.3-0.6 ms per family, even with a bytecode
filter that rejects everything), so each sample instead looks the known sockets up by exact
id: all requests in one ``send``, then the answers. On this 2-core VM, 12 sockets cost
~75 us of kernel time right after the sampler wakes (~6 us per lookup, cold caches): the
floor of this method. Reading the answers costs ~30 us more in Python (one ``recv`` and one
``unpack_from`` each) but little in C (``_fastread.tcp_batch``: ``recvmmsg``, 8 answers per
call), which is used when it is built. (``recvmmsg`` through ctypes was tried: the ctypes call
costs more than it saves when the caches are cold.) :class:`TcpAccounts` turns this into
per-target cumulative counters.
"""
from __future__ import annotations

import os
import socket
import struct
from array import array

from driple.collect.sampling.native import fastread

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
_INFO_RTA_MIN = 4 + _TCPI_MIN_LEN  # an INFO attribute long enough to hold both counters
BATCH = 64  # exact lookups per send: their answers (~1 kB of buffer each) must fit in rcvbuf
MSG_DONTWAIT = socket.MSG_DONTWAIT


def _fast_struct(info_at: int) -> struct.Struct:
    """A whole answer in one ``unpack_from``: nlmsg_len, nlmsg_type, nlmsg_seq, then the INFO
    attribute's length and type at ``info_at``, tcpi_bytes_acked, tcpi_bytes_received."""
    return struct.Struct(f"=IH2xI4x{info_at - 16}xHH{_TCPI_BYTES_OFFSET}xQQ")


def _header(body_len: int, flags: int, seq: int) -> bytes:
    return _NLMSGHDR.pack(_NLMSGHDR.size + body_len, SOCK_DIAG_BY_FAMILY, flags, seq, 0)


class TcpInfoReader:
    """Read ``(bytes_acked, bytes_received)`` of TCP sockets of this network namespace.

    :meth:`dump` lists every socket (a walk of the kernel's whole socket hash: 0.3-0.6 ms here,
    so only when new sockets must be found); :meth:`query` looks up known sockets by their
    exact id (address, ports, cookie) in one netlink round trip -- cheap enough for 100 Hz.
    :meth:`prepare` + :meth:`update` is the sampler's hot path.
    """

    def __init__(self, native=fastread) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        self._sock.bind((0, 0))
        self._fd = self._sock.fileno()
        self._native = native  # the native reader, or None: fold the answers in Python
        self._buf = bytearray(1 << 16)
        self._seq = 0
        self._set_info_at(16 + _MSG_LEN + 8)  # after INET_DIAG_SHUTDOWN; learnt from answers

    def _set_info_at(self, info_at: int) -> None:
        """Remember where INET_DIAG_INFO sits in an answer (bytes from the netlink header)."""
        self._info_at = info_at
        self._fast = _fast_struct(info_at)

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
        A plan entry is ``(requests, first sequence number, number of requests)``.
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
        """Send a prepared plan: ``(bytes_acked, bytes_received)`` per socket, None if gone."""
        n = sum(p[2] for p in plan)
        acked, received = array("q", [-1]) * n, array("q", [-1]) * n
        zero = array("q", [0])
        gone = set(self.update(plan, array("q", bytes(8 * n)), acked, received, zero[:], zero[:]) or ())
        return [None if j in gone else (acked[j], received[j]) for j in range(n)]

    def update(self, plan: list[tuple[bytes, int, int]], owner: array, acked: array, received: array,
               tx: array, rx: array) -> list[int] | None:
        """Send a prepared plan and fold the answers into the counters and totals; the hot path.

        The plan's j-th socket belongs to target ``owner[j]``; its ``acked[j]`` and
        ``received[j]`` are raised to the answer (never lowered), then added to ``tx[target]``
        and ``rx[target]`` (all ``array('q')``). Returns the indices of the sockets that are gone
        (an error answer, or no tcp_info), whose last counts were added too; None if none.
        Netlink answers within ``send()``, so the answers are read without blocking; a missing
        one raises ``BlockingIOError`` (the counters then hold valid but partly updated values
        and ``tx``/``rx`` are incomplete: prepare again). Natively when the extension is built
        (one ``recvmmsg`` per 8 answers), else :meth:`_fold_python`.
        """
        native = self._native
        if native is not None and len(plan) == 1:  # the usual case (up to BATCH sockets)
            blob, base, n = plan[0]
            return native.tcp_batch(self._fd, blob, base, n, 0, owner, acked, received, tx, rx) or None
        gone: list[int] = []
        first = 0
        for blob, base, n in plan:
            if native is not None:
                gone += native.tcp_batch(self._fd, blob, base, n, first, owner, acked, received, tx, rx)
            else:
                self._fold_python(blob, base, n, first, owner, acked, received, tx, rx, gone)
            first += n
        return gone or None

    def _fold_python(self, blob: bytes, base: int, n: int, first: int, owner: array, acked: array,
                     received: array, tx: array, rx: array, gone: list[int]) -> None:
        """One batch of :meth:`update` in Python: the reference for the native reader.

        An answer is one datagram, read into the same (hot) buffer as the previous one; one laid
        out like the last is read with a single ``unpack_from``, any other is walked attribute
        by attribute. (Receiving all answers first and unpacking them in one go is slower in
        Python: every answer then lands in a cold part of the buffer.)
        """
        buf = self._buf
        recv_into = self._sock.recv_into
        self._sock.send(blob)
        fast = self._fast
        unpack, fast_size = fast.unpack_from, fast.size
        answered = 0
        while answered < n:
            size = recv_into(buf, 0, MSG_DONTWAIT)
            if size >= fast_size:
                length, mtype, seq, rta_len, rta_type, ack, rec = unpack(buf, 0)
                i = seq - base
                if (length == size and mtype == SOCK_DIAG_BY_FAMILY and rta_type == INET_DIAG_INFO
                        and rta_len >= _INFO_RTA_MIN and 0 <= i < n):
                    answered += 1
                    j = first + i
                    if ack > acked[j]:  # never backwards, even if a counter were reset
                        acked[j] = ack
                    if rec > received[j]:
                        received[j] = rec
                    t = owner[j]
                    tx[t] += acked[j]
                    rx[t] += received[j]
                    continue
            answered += self._fold_walked(size, base, n, first, owner, acked, received, tx, rx, gone)

    def _fold_walked(self, size: int, base: int, n: int, first: int, owner: array, acked: array,
                     received: array, tx: array, rx: array, gone: list[int]) -> int:
        """:meth:`_fold_python` for a datagram off the fast path: walk its messages and attributes.

        Returns how many of the batch's answers it held; errors and answers without tcp_info
        mark their socket gone. Learns where INET_DIAG_INFO sits for the fast path.
        """
        buf = self._buf
        answered = 0
        off = 0
        while off + 16 <= size:
            length, mtype, _flags, seq, _pid = _NLMSGHDR.unpack_from(buf, off)
            if length < 16:
                break
            i = seq - base
            if 0 <= i < n and mtype in (SOCK_DIAG_BY_FAMILY, NLMSG_ERROR):
                answered += 1
                j = first + i
                a = self._find_info(off, min(length, size - off)) if mtype == SOCK_DIAG_BY_FAMILY else 0
                if a and _RTA.unpack_from(buf, a)[0] >= _INFO_RTA_MIN:
                    ack, rec = _TCPI_BYTES.unpack_from(buf, a + 4 + _TCPI_BYTES_OFFSET)
                    acked[j] = max(acked[j], ack)
                    received[j] = max(received[j], rec)
                else:  # gone: its last counts stay
                    gone.append(j)
                tx[owner[j]] += acked[j]
                rx[owner[j]] += received[j]
            off += (length + 3) & ~3
        return answered

    def _find_info(self, off: int, length: int) -> int:
        """Offset of the INET_DIAG_INFO attribute of the message at ``off`` (0 if none)."""
        a = off + 16 + _MSG_LEN
        end = off + length
        while a + 4 <= end:
            rta_len, rta_type = _RTA.unpack_from(self._buf, a)
            if rta_len < 4:
                break
            if rta_type == INET_DIAG_INFO:
                self._set_info_at(a - off)
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
        self._closed_tx = array("q", [0]) * n_targets  # last counts of sockets that are gone, per target
        self._closed_rx = array("q", [0]) * n_targets
        # the open sockets, in the order of the plan: owner (target index), key, last counts
        self._owner = array("q")
        self._keys: list[bytes] = []
        self._acked = array("q")
        self._received = array("q")
        self._plan = None  # prepared request batch for _keys
        self._known: set[int] = set()  # inodes already tracked
        self._unresolved: set[int] = set()  # inodes seen in fds but not (yet) in a TCP dump
        self._last_dump = float("-inf")

    @property
    def n_sockets(self) -> int:
        return len(self._keys)

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
                self._owner.append(i)
                self._keys.append(table[ino][0])
                self._acked.append(0)
                self._received.append(0)
                self._plan = None
            else:
                self._unresolved.add(ino)  # unix/UDP/listening or not yet connected

    def read(self) -> tuple[list[int], list[int]]:
        """``(tx_bytes, rx_bytes)``: two lists with one cumulative count per target (fresh lists)."""
        tx = self._closed_tx[:]
        rx = self._closed_rx[:]
        if not self._keys:
            return tx.tolist(), rx.tolist()
        if self._plan is None:
            self._plan = self.reader.prepare(self._keys)
        owner, acked, received = self._owner, self._acked, self._received
        try:
            gone = self.reader.update(self._plan, owner, acked, received, tx, rx)
        except OSError:  # an answer went missing: keep the last counts, ask afresh next time
            self._plan = None
            tx = self._closed_tx[:]
            rx = self._closed_rx[:]
            for t, a, r in zip(owner, acked, received):
                tx[t] += a
                rx[t] += r
            return tx.tolist(), rx.tolist()
        if gone:  # their last counts move to the closed totals (already in this reading)
            for j in gone:
                self._closed_tx[owner[j]] += acked[j]
                self._closed_rx[owner[j]] += received[j]
            dead = set(gone)
            keep = [j for j in range(len(self._keys)) if j not in dead]
            self._owner = array("q", [owner[j] for j in keep])
            self._keys = [self._keys[j] for j in keep]
            self._acked = array("q", [acked[j] for j in keep])
            self._received = array("q", [received[j] for j in keep])
            self._plan = None
        return tx.tolist(), rx.tolist()

    def native_args(self) -> tuple | None:
        """The ``tcp`` argument of ``_fastread.run_samples``, None if these sockets need Python.

        ``(sock_fd, requests, base, n, owner, acked, received, closed_tx, closed_rx)``; None
        without the native reader or with more than one batch of sockets.
        """
        reader = self.reader
        if reader._native is None:
            return None
        if self._plan is None:
            self._plan = reader.prepare(self._keys)
        if len(self._plan) > 1:
            return None
        blob, base, n = self._plan[0] if self._plan else (b"", 0, 0)
        return (reader._fd, blob, base, n, self._owner, self._acked, self._received,
                self._closed_tx, self._closed_rx)

    def close(self) -> None:
        self.reader.close()
