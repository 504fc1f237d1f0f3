"""CPU time and resident memory of a process tree, cheap enough to read at 100 Hz.

CPU: the kernel's per-process CPU clock, ``clock_gettime(((~pid) << 3) | 2)`` (ns, all threads);
psutil's ``cpu_times`` moves in 10 ms steps and is useless at this rate. Memory: resident pages
from ``/proc/<pid>/statm`` (a few us; USS costs ms and is never read here). The list of
descendants is walked again by :meth:`ProcessTree.refresh` (every 0.5 s in the sampler), not at
every sample; a process born between two walks is counted from its discovery, with all the CPU
time it had used by then.
"""
from __future__ import annotations

import os
import time
from array import array

from driple.collect.sampling.native import fastread

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_RDONLY = os.O_RDONLY | os.O_CLOEXEC


def read_proc(path: str, whole: bool = False) -> bytes:
    """A /proc file's first 4 kB (``whole``: all of it) with raw ``open``/``read``.

    Cheaper than a Python file object; a one-record file like ``stat`` fits in one read, but a
    seq_file with many records (``children``) hands them out a page at a time.
    """
    fd = os.open(path, _RDONLY)
    try:
        data = os.read(fd, 4096)
        if whole and data:
            while chunk := os.read(fd, 65536):
                data += chunk
        return data
    finally:
        os.close(fd)


def _stat_fields(pid: int) -> list[bytes] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name (state first), None if gone."""
    try:
        data = read_proc(f"/proc/{pid}/stat")
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()


def cpu_clock_id(pid: int) -> int:
    """Clock id of the whole-process CPU clock of ``pid`` (CPUCLOCK_SCHED, process-wide)."""
    return ((~pid) << 3) | 2


def start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (field 22 of stat), None if it is gone."""
    fields = _stat_fields(pid)
    return None if fields is None else int(fields[19])


def is_running(pid: int) -> bool:
    """True if ``pid`` exists and is neither a zombie nor dead."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in (b"Z", b"X", b"x")


def start_if_running(pid: int) -> int | None:
    """Start time of ``pid`` (as :func:`start_time`) if it runs, None if gone or a zombie."""
    fields = _stat_fields(pid)
    if fields is None or fields[0] in (b"Z", b"X", b"x"):
        return None
    return int(fields[19])


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's ``children`` file; /proc scan as fallback)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            out.extend(int(x) for x in read_proc(f"/proc/{pid}/task/{tid}/children", whole=True).split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue
            return _children_by_scan(pid)  # kernel without CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return out


def _children_by_scan(pid: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        if int(data[data.rindex(b")") + 2:].split()[1]) == pid:
            out.append(int(name))
    return out


def descendants(pid: int) -> list[int]:
    """``pid`` and all its descendants, root first."""
    out, todo, seen = [], [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo.extend(children(p))
    return out


class _Member:
    __slots__ = ("pid", "clock", "start", "cpu_ns", "statm_fd")

    def __init__(self, pid: int, start: int) -> None:
        self.pid = pid
        self.clock = cpu_clock_id(pid)
        self.start = start
        self.cpu_ns = 0
        try:
            self.statm_fd = os.open(f"/proc/{pid}/statm", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.statm_fd = -1

    def close(self) -> None:
        if self.statm_fd >= 0:
            os.close(self.statm_fd)
            self.statm_fd = -1


class ProcessTree:
    """Cumulative CPU time (ns) and current RSS (bytes) of a process and its descendants.

    CPU time of a process that exits (or leaves the tree) is kept at its last value, so the
    total never goes backwards. Pid reuse is caught at each :meth:`refresh` (start time).
    """

    def __init__(self, pid: int, native=fastread) -> None:
        self.pid = pid
        self.members: dict[int, _Member] = {}
        self.gone_cpu_ns = 0  # CPU time of members that have exited
        self.root_start = start_time(pid)
        self.ended = self.root_start is None
        self._native = native  # the native reader, or None: read in Python
        self._flat = None  # (clocks, fds, cpu_last, root index) of the members, for _native
        self.refresh()

    @property
    def size(self) -> int:
        return len(self.members)

    def refresh(self) -> None:
        """Walk the tree again: add new descendants, retire those that are gone."""
        if self.ended:
            return
        self._unflatten()
        if start_if_running(self.pid) != self.root_start:
            self.sample()  # last reading of everyone still readable
            self._end()
            return
        current = descendants(self.pid)
        keep = set()
        for pid in current:
            m = self.members.get(pid)
            st = start_time(pid)
            if st is None:
                continue
            if m is not None and m.start != st:  # pid reused by a new process
                self._retire(m)
                m = None
            if m is None:
                m = _Member(pid, st)
                try:
                    m.cpu_ns = time.clock_gettime_ns(m.clock)
                except OSError:
                    m.close()
                    continue
                self.members[pid] = m
            keep.add(pid)
        for pid in list(self.members):
            if pid not in keep:
                m = self.members[pid]
                try:
                    m.cpu_ns = max(m.cpu_ns, time.clock_gettime_ns(m.clock))
                except OSError:
                    pass
                self._retire(m)

    def _retire(self, m: _Member) -> None:
        self.gone_cpu_ns += m.cpu_ns
        m.close()
        self.members.pop(m.pid, None)

    def close(self) -> None:
        """Stop watching: release the open statm files."""
        if not self.ended:
            self._end()

    def _end(self) -> None:
        self._unflatten()
        for m in list(self.members.values()):
            self._retire(m)
        self.ended = True

    # -- reading ----------------------------------------------------------------------------
    # The native reader keeps each member's latest CPU time in the flat array ``cpu_last``;
    # :meth:`_unflatten` copies it back to the members before anything that needs it (walks,
    # retiring, the Python path), and the arrays are rebuilt at the next native read.

    def _flatten(self) -> tuple:
        ms = list(self.members.values())
        root_at = next((i for i, m in enumerate(ms) if m.pid == self.pid), -1)
        self._flat = (
            array("q", [m.clock for m in ms]),
            array("q", [m.statm_fd for m in ms]),
            array("q", [m.cpu_ns for m in ms]),
            root_at,
            ms,
        )
        return self._flat

    def _unflatten(self) -> None:
        if self._flat is not None:
            for m, c in zip(self._flat[4], self._flat[2]):
                m.cpu_ns = c
            self._flat = None

    def sample(self) -> tuple[int, int]:
        """``(cpu_ns, rss_bytes)`` of the tree now. Sets :attr:`ended` when the root has exited.

        Natively when it can: any irregularity (a clock that cannot be read, a root without
        memory) is left to the Python path, which decides what it means.
        """
        if self._native is not None and not self.ended:
            flat = self._flat or self._flatten()
            got = self._native.read_tree(flat[0], flat[1], flat[2], flat[3])
            if got is not None and got[2] != 0:
                return self.gone_cpu_ns + got[0], got[1] * PAGE_SIZE
            self._unflatten()
        return self._read_python()

    def _read_python(self) -> tuple[int, int]:
        """:meth:`sample` in Python: the reference for the native reader, and its fallback."""
        cpu = self.gone_cpu_ns
        rss_pages = 0
        root_pages = -1
        root = self.pid
        gettime = time.clock_gettime_ns
        pread = os.pread
        dead = None
        for m in self.members.values():
            try:
                c = m.cpu_ns = gettime(m.clock)
            except OSError:
                (dead := dead or []).append(m)
                c = m.cpu_ns
            cpu += c
            fd = m.statm_fd
            if fd >= 0:
                try:
                    pages = int(pread(fd, 64, 0).split(None, 2)[1])
                except (OSError, IndexError, ValueError):
                    pages = 0
                rss_pages += pages
                if m.pid == root:
                    root_pages = pages
        if dead:
            for m in dead:
                if m.pid == self.pid:
                    self._end()
                    break
                self._retire(m)
        if root_pages == 0:
            # no memory at all: the root is exiting (its mm is gone) or a zombie; a live user
            # process always has resident pages
            self._end()
        return cpu, rss_pages * PAGE_SIZE
