"""The sampling loop: read every target's raw cumulative counters at a fixed period, then save.

Runs inside the sampler process (see :mod:`.child`); it can also run in-process for tests.
Each sample stores, per target, a monotonic timestamp (ns) and cumulative counters: CPU time
(ns), RSS (bytes, a level), bytes sent / received; on GPU, memory used (bytes) and the driver's
utilization samples. Rates are computed later (:mod:`driple.collect.series`), never here.
Only the standard library (and the optional ``_fastread`` extension) is imported until
:meth:`Sampler.save` (numpy). In the sampler process, :class:`NativeLoop` waits and samples in
C when the extension is built, and Python runs ~10 times a second instead of 100: a Python
process that merely wakes at 100 Hz costs ~1 % of a core on the dev VM. What remains per
sample is the kernel's work: waking up, the inet_diag lookups and the CPU clock + statm reads.
"""
from __future__ import annotations

import json
import os
import time
from array import array
from pathlib import Path

from driple.collect.sampling import nvml as nvml_mod
from driple.collect.sampling.native import fastread
from driple.collect.sampling.netdev import InterfaceTotals, VethCounters
from driple.collect.sampling.proctree import PAGE_SIZE, ProcessTree, TreeGroup, cpu_clock_id, is_running
from driple.collect.sampling.target import Target
from driple.collect.sampling.tcpinfo import TcpAccounts, socket_inodes
from driple.errors import DripleError
from driple.hardware.devices import DEVICES, device_kind

FORMAT = "driple-raw-1"
REFRESH_S = 0.5  # walk process trees and their sockets again
GPU_POLL_S = 0.25  # fetch new NVML utilization samples (the driver buffers them)
IFACE_EVERY = 10  # interface totals (a cross-check) are read every 10th sample
MAX_SPAN_NS = 500_000  # reading all targets should take less (else it is read again)
NET_MODES = ("auto", "tcp_info", "veth")


def check_target(target: Target, device: str, net_source: str) -> None:
    """Raise :class:`DripleError` if ``target`` cannot be sampled (gone, not ours, misconfigured)."""
    pid = target.pid
    if not is_running(pid):  # gone, or a zombie nobody has waited for yet
        raise DripleError(f"target {target.name!r}: process {pid} is not running (did the job exit early?)")
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            f.read()
        time.clock_gettime_ns(cpu_clock_id(pid))
    except FileNotFoundError:
        raise DripleError(f"target {target.name!r}: process {pid} is not running") from None
    except PermissionError:
        raise DripleError(
            f"target {target.name!r}: no permission to read process {pid}; run the sampler as "
            "the user who owns the job, or as root"
        ) from None
    except OSError as e:
        raise DripleError(f"target {target.name!r}: cannot read the CPU clock of process {pid} ({e})") from None
    if net_source == "tcp_info":
        try:
            socket_inodes(pid)
        except PermissionError:
            raise DripleError(
                f"target {target.name!r}: no permission to list the sockets of process {pid} "
                "(/proc/<pid>/fd); run as the job's user or as root, or use net_mode='veth'"
            ) from None
    if net_source == "veth" and not target.veth:
        raise DripleError(f"target {target.name!r}: net_mode='veth' needs the target's host-side veth")
    if net_source == "veth" and not os.path.exists(f"/sys/class/net/{target.veth}"):
        raise DripleError(f"target {target.name!r}: network interface {target.veth!r} does not exist")
    if device in DEVICES and device_kind(device).one_per_worker and target.gpu_index is None:
        raise DripleError(f"target {target.name!r}: device='gpu' needs the target's gpu_index")


def net_source(target: Target, net_mode: str) -> str:
    """Where a target's tx/rx come from: ``'veth'`` or ``'tcp_info'``."""
    if net_mode == "auto":
        return "veth" if target.veth else "tcp_info"
    return net_mode


def check_config(targets: list[Target], period_s: float, device: str, net_mode: str) -> None:
    if not targets:
        raise DripleError("nothing to sample: give at least one target")
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise DripleError(f"target names must be unique, got {names}")
    if not (0.001 <= period_s <= 10):
        raise DripleError(f"sampling period must be between 1 ms and 10 s, got {period_s} s")
    if device not in DEVICES:
        raise DripleError(f"unknown device {device!r}; use 'cpu' or 'gpu'")
    if net_mode not in NET_MODES:
        raise DripleError(f"unknown net_mode {net_mode!r}; use one of {', '.join(NET_MODES)}")



def save_arrays(out_path: str | Path, arrays: dict) -> Path:
    """Write a raw file's arrays (``meta`` included) as a compressed ``.npz``, atomically."""
    import numpy as np

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(out_path.name + ".part")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **arrays)
    os.replace(tmp, out_path)
    return out_path


def boot_id() -> str:
    """This machine's boot id: processes with the same one share CLOCK_MONOTONIC."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def host_cpu_jiffies(fd: int | None = None) -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole host since boot, from the first line of /proc/stat.

    ``fd``: /proc/stat kept open (re-read with ``pread``), else the file is opened for this call.
    """
    if fd is None:
        with open("/proc/stat", "rb") as f:
            line = f.readline()
    else:
        line = os.pread(fd, 256, 0).split(b"\n", 1)[0]  # the "cpu" line is < 256 bytes
    fields = list(map(int, line.split()[1:9]))
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields)  # the first 8 fields; guest time is already inside user/nice
    return total - idle, total

class _Track:
    """Counters collected for one target.

    Samples go into one flat ``array('q')`` of :data:`ROW` fields each (a single ``extend`` per
    sample); :meth:`columns` splits it into the saved per-field arrays.
    """

    ROW = ("t_ns", "cpu_ns", "rss_bytes", "tx_bytes", "rx_bytes", "n_procs")

    def __init__(self, target: Target, source: str, gpu: bool) -> None:
        self.target = target
        self.source = source
        self.tree = ProcessTree(target.pid)
        self.veth = VethCounters(target.veth) if source == "veth" else None
        self.ended_ns: int | None = None
        self.rows = array("q")
        self.extend = self.rows.extend  # bound: the per-sample path stays short
        self.gpu_mem = array("q") if gpu else None

    def columns(self) -> dict:
        """``{field: numpy array}``: int64 columns, ``n_procs`` int32, GPU memory if sampled."""
        import numpy as np

        table = np.frombuffer(self.rows, dtype=np.int64).reshape(-1, len(self.ROW)) if self.rows else \
            np.zeros((0, len(self.ROW)), dtype=np.int64)
        out = {k: table[:, j].copy() for j, k in enumerate(self.ROW)}
        out["n_procs"] = out["n_procs"].astype(np.int32)
        if self.gpu_mem is not None:
            out["gpu_mem_used_bytes"] = np.array(self.gpu_mem, dtype=np.int64)
        return out


class NativeLoop:
    """Waiting and sampling in C (``_fastread.run_samples``), many samples per call.

    Does what :meth:`Sampler.run` and :meth:`Sampler.sample` do for a sample (same grid, late
    and re-read rules, same rows) and hands back to Python, which keeps everything else: the
    interface totals after every ``IFACE_EVERY``-th sample, the walks, ended targets and any
    reading that needs judgement (then Python takes that sample itself). Saves the interpreter
    waking up 100 times a second: about 40 % of the sampler's CPU time. It holds the GIL while
    it sleeps (up to ~0.1 s): meant for the single-threaded sampler process.
    """

    DUE, STOP_FD, SIGNAL, IRREGULAR = 0, 1, 2, 3  # why run_samples handed back
    CAP = 64  # samples per call at most (interfaces are due every IFACE_EVERY anyway)
    # state fields, as in _fastread.c
    NEXT_T, N_SAMPLES, N_LATE, N_RETRIED, MIN_SPAN, ADVANCE, N_OUT, PERIOD, DUE_NS, EVERY, MAX_SPAN = range(11)

    def __init__(self, sampler: "Sampler", stop_fd: int) -> None:
        self.s = sampler
        self.stop_fd = stop_fd
        n = len(sampler.tracks)
        self.state = array("q", [0]) * 11
        self.state[self.PERIOD] = sampler.period_ns
        self.state[self.EVERY] = IFACE_EVERY
        self.state[self.MAX_SPAN] = MAX_SPAN_NS
        self.row_len = len(_Track.ROW)
        self.rows = array("q", [0]) * (self.CAP * n * self.row_len)
        self.spans = array("q", [0]) * self.CAP
        self.veth_fds = array("q", [fd for tr in sampler.tracks for fd in (tr.veth.fds if tr.veth else (-1, -1))])
        self.veth_last = array("q", [0]) * (2 * n)

    def run(self, next_t: int, advance: bool) -> tuple[int, int, bool] | None:
        """``(why, next_t, advance)`` after one call; None if this round needs the Python loop."""
        s = self.s
        tracks = s.tracks
        for tr in tracks:
            if tr.ended_ns is None and tr.tree.ended:  # a walk ended it: Sampler.sample records that
                return None
        tcp = None
        if s.tcp is not None:
            tcp = s.tcp.native_args()
            if tcp is None:
                return None
        st = self.state
        st[self.NEXT_T], st[self.ADVANCE], st[self.DUE_NS] = next_t, advance, s._next_refresh
        st[self.N_SAMPLES], st[self.N_LATE], st[self.N_RETRIED] = s.n_samples, s.n_late, s.n_retried
        st[self.MIN_SPAN] = s.min_span_ns
        live = array("q", [tr.ended_ns is None for tr in tracks])
        n_procs = array("q", [len(tr.tree.members) for tr in tracks])
        veth_last = self.veth_last
        for k, tr in enumerate(tracks):
            if tr.veth is not None:
                veth_last[2 * k], veth_last[2 * k + 1] = tr.veth.last
        why = fastread.run_samples(st, self.stop_fd, s.trees.native_args(), tcp, live, n_procs,
                                   self.veth_fds, veth_last, self.rows, self.spans)
        s.n_samples, s.n_late, s.n_retried = st[self.N_SAMPLES], st[self.N_LATE], st[self.N_RETRIED]
        s.min_span_ns = st[self.MIN_SPAN]
        for k, tr in enumerate(tracks):
            if tr.veth is not None:
                tr.veth.last = (veth_last[2 * k], veth_last[2 * k + 1])
        n = st[self.N_OUT]
        if n:
            rows = memoryview(self.rows).cast("B")
            size = 8 * self.row_len
            for k, tr in enumerate(tracks):
                if live[k]:
                    tr.rows.frombytes(rows[k * self.CAP * size:(k * self.CAP + n) * size])
            s.spans.extend(self.spans[:n])
            if s.start_ns is None:  # the t_ns of the first sample, as Sampler.sample sets it
                s.start_ns = self.rows[live.index(1) * self.CAP * self.row_len]
            if why == self.DUE and (s.n_samples - 1) % IFACE_EVERY == 0:
                s.read_interfaces()  # as Sampler.sample does after such a sample
        return why, st[self.NEXT_T], bool(st[self.ADVANCE])


class Sampler:
    """Sample ``targets`` every ``period_s`` seconds; :meth:`save` writes the raw ``.npz``."""

    def __init__(self, targets: list[Target], period_s: float = 0.01, device: str = "cpu", net_mode: str = "auto") -> None:
        check_config(targets, period_s, device, net_mode)
        self.period_ns = int(round(period_s * 1e9))
        self.device = device
        self.net_mode = net_mode
        sources = [net_source(t, net_mode) for t in targets]
        for t, src in zip(targets, sources):
            check_target(t, device, src)
        self._pynvml = nvml_mod.load() if device_kind(device).samples_nvml else None
        self.gpus: dict[int, nvml_mod.Gpu] = {}
        if self._pynvml is not None:
            for t in targets:
                if t.gpu_index not in self.gpus:
                    self.gpus[t.gpu_index] = nvml_mod.Gpu(self._pynvml, t.gpu_index)
        self.gpu_streams = {
            (i, k): (array("q"), array("d")) for i in self.gpus for k in nvml_mod.KINDS
        }
        self.tracks = [_Track(t, src, device_kind(device).samples_nvml) for t, src in zip(targets, sources)]
        self.trees = TreeGroup([tr.tree for tr in self.tracks])  # walk and read them through it
        self._live = list(enumerate(self.tracks))  # (index, track) of targets still running
        self.tcp = TcpAccounts(len(targets)) if "tcp_info" in sources else None
        self._veths = any(tr.veth is not None for tr in self.tracks)
        self.ifaces = InterfaceTotals()
        self.iface_t = array("q")
        self.iface_cols = [(array("q"), array("q")) for _ in self.ifaces.names]
        self.host_busy, self.host_total = array("q"), array("q")  # /proc/stat jiffies, all CPUs
        self._stat_fd = os.open("/proc/stat", os.O_RDONLY | os.O_CLOEXEC)
        self.n_samples = 0
        self.n_late = 0  # samples taken more than one period late (CPU contention)
        self.n_retried = 0  # reads repeated because they were interrupted
        self.min_span_ns = 10**9
        self.spans = array("q")  # ns each sample's reads took
        self.clock_offset_ns = time.time_ns() - time.monotonic_ns()  # realtime - monotonic
        self.start_ns: int | None = None
        self._next_refresh = 0
        self._next_gpu = 0
        self.refresh()

    # -- periodic work -------------------------------------------------------------------
    def refresh(self) -> None:
        """Walk process trees again and match their sockets (every ``REFRESH_S``)."""
        self.trees.refresh()
        if self.tcp is not None:
            owned = []
            for tr in self.tracks:
                inodes: set[int] = set()
                if tr.source == "tcp_info" and tr.ended_ns is None:
                    for pid in list(tr.tree.members):
                        try:
                            inodes |= socket_inodes(pid)
                        except PermissionError:
                            pass
                owned.append(inodes)
            self.tcp.assign(owned, time.monotonic())

    def poll_gpu(self) -> None:
        for i, gpu in self.gpus.items():
            for k in nvml_mod.KINDS:
                ts, vals = self.gpu_streams[(i, k)]
                for t_us, v in gpu.new_samples(k):
                    ts.append(t_us)
                    vals.append(v)

    # -- one sample --------------------------------------------------------------------------
    def sample(self) -> None:
        """Read every live target's counters in one block and stamp them with its midpoint.

        If the block took too long (the sampler was preempted, or the VM lost its CPU), the
        counters and the timestamp no longer match: read again, up to twice.
        The sampler's hot path (100 Hz): all process trees in one call (:class:`TreeGroup`),
        all sockets in one (:class:`TcpAccounts`), then one ``extend`` per target.
        """
        now = time.monotonic_ns
        live = self._live
        tcp = self.tcp
        read_trees = self.trees.read
        veths = self._veths
        mem_used = {i: g.memory_used() for i, g in self.gpus.items()} if self.gpus else None
        for _attempt in range(3):
            a = now()
            if tcp is not None:
                net_tx, net_rx = tcp.read()
            cpu, rss = read_trees()
            if veths:
                veth_read = [tr.veth.read() if tr.veth is not None else None for tr in self.tracks]
            b = now()
            span = b - a
            if span <= MAX_SPAN_NS or span <= 3 * self.min_span_ns:
                break
            self.n_retried += 1
        if span < self.min_span_ns:
            self.min_span_ns = span
        t = (a + b) // 2
        if self.start_ns is None:
            self.start_ns = t
        self.spans.append(span)
        ended = False
        for k, tr in live:
            tree = tr.tree
            if tree.ended:
                tr.ended_ns = t
                ended = True
                continue
            if tr.veth is None:
                tr.extend((t, cpu[k], rss[k], net_tx[k], net_rx[k], len(tree.members)))
            else:
                tr.extend((t, cpu[k], rss[k], *veth_read[k], len(tree.members)))
            if mem_used:
                tr.gpu_mem.append(mem_used[tr.target.gpu_index])
        if ended:
            self._live = [(k, tr) for k, tr in enumerate(self.tracks) if tr.ended_ns is None]
        if self.n_samples % IFACE_EVERY == 0:
            self.read_interfaces()
        self.n_samples += 1

    def read_interfaces(self) -> None:
        """Interface byte totals and host CPU jiffies: cross-checks, and how busy the host was."""
        self.iface_t.append(time.monotonic_ns())
        for (rx_col, tx_col), (rx, tx) in zip(self.iface_cols, self.ifaces.read()):
            rx_col.append(rx)
            tx_col.append(tx)
        busy, total = host_cpu_jiffies(self._stat_fd)
        self.host_busy.append(busy)
        self.host_total.append(total)

    def tick(self) -> None:
        """One sample plus whatever periodic work is due."""
        self.sample()
        t = time.monotonic_ns()
        if t >= self._next_refresh:
            self._next_refresh = t + int(REFRESH_S * 1e9)
            self.refresh()
        if self.gpus and t >= self._next_gpu:
            self._next_gpu = t + int(GPU_POLL_S * 1e9)
            self.poll_gpu()

    def run(self, wait, on_first=None, stop_fd: int | None = None) -> None:
        """Sample on a fixed grid until ``wait(timeout_s)`` returns True (stop requested).

        ``wait`` sleeps up to ``timeout_s`` and tells whether to stop; it is the only way out.
        ``on_first()`` is called once the first sample is stored.
        A sample that falls more than a period late skips the missed grid points (counted in
        ``n_late``); timestamps are always the real ones.
        ``stop_fd``: a descriptor that becomes readable when ``wait`` may have news (the
        sampler process's stdin). Given it and the native module, the waiting and sampling are
        done by :class:`NativeLoop`, which hands back to this loop for everything else
        (interfaces, walks, unusual readings) and asks ``wait(0)`` at least 10 times a second.
        """
        period = self.period_ns
        monotonic_ns = time.monotonic_ns
        refresh_ns = int(REFRESH_S * 1e9)
        native = NativeLoop(self, stop_fd) if stop_fd is not None and fastread is not None and not self.gpus else None
        next_t = monotonic_ns()
        self._next_refresh = next_t + refresh_ns
        advance = False  # the first sample is taken at once
        while True:
            got = native.run(next_t, advance) if native is not None else None
            if got is not None:  # natively: wait, sample, again, until something is due
                why, next_t, advance = got
                if why == NativeLoop.IRREGULAR:
                    self.sample()  # Python judges this one
                    advance = True
                elif wait(0):
                    break
                elif why != NativeLoop.DUE:  # woken before the sample: nothing else is due
                    continue
            else:
                if advance:
                    now = monotonic_ns()
                    next_t += period
                    if now >= next_t:
                        missed = (now - next_t) // period + 1
                        next_t += missed * period
                        self.n_late += 1
                    if wait((next_t - now) / 1e9):
                        break
                self.sample()
                advance = True
            now = monotonic_ns()
            if now >= self._next_refresh:
                self._next_refresh = now + refresh_ns
                self.refresh()
                now = monotonic_ns()
            if self.gpus and now >= self._next_gpu:
                self._next_gpu = now + int(GPU_POLL_S * 1e9)
                self.poll_gpu()
            if on_first is not None:
                on_first()
                on_first = None
        self.read_interfaces()
        if self.gpus:
            self.poll_gpu()

    # -- output --------------------------------------------------------------------------------
    def meta(self) -> dict:
        try:
            host_mem = os.sysconf("SC_PHYS_PAGES") * PAGE_SIZE
        except (ValueError, OSError):
            host_mem = 0
        return {
            "format": FORMAT,
            "period_s": self.period_ns / 1e9,
            "device": self.device,
            "net_mode": self.net_mode,
            "start_ns": self.start_ns,
            "boot_id": boot_id(),  # series with the same one share a clock (multi-node merges)
            "clock_offset_ns": self.clock_offset_ns,
            "host_mem_bytes": host_mem,
            "n_samples": self.n_samples,
            "n_late": self.n_late,
            "n_retried": self.n_retried,
            "native_reads": fastread is not None,  # same readings either way; CPU cost differs
            "interfaces": self.ifaces.names,
            "targets": [
                {
                    **tr.target.to_dict(),
                    "net_source": tr.source,
                    "ended_ns": tr.ended_ns,
                }
                for tr in self.tracks
            ],
        }

    def save(self, out_path: str | Path) -> Path:
        """Write everything collected to ``out_path`` (compressed ``.npz``, atomically)."""
        import numpy as np

        out_path = Path(out_path)
        arrays = {"meta": np.array(json.dumps(self.meta()))}
        for tr in self.tracks:
            for k, col in tr.columns().items():
                arrays[f"{tr.target.name}/{k}"] = col
        for (i, k), (ts, vals) in self.gpu_streams.items():
            arrays[f"gpu{i}/{k}_t_us"] = np.array(ts, dtype=np.int64)
            arrays[f"gpu{i}/{k}_util"] = np.array(vals, dtype=np.float64)
        arrays["sample/span_ns"] = np.array(self.spans, dtype=np.int64)
        arrays["iface/t_ns"] = np.array(self.iface_t, dtype=np.int64)
        arrays["host/busy_jiffies"] = np.array(self.host_busy, dtype=np.int64)
        arrays["host/total_jiffies"] = np.array(self.host_total, dtype=np.int64)
        n = len(self.iface_t)
        for j, name in enumerate(("rx_bytes", "tx_bytes")):  # shape (interfaces, samples)
            arrays[f"iface/{name}"] = np.array(
                [np.array(c[j], dtype=np.int64) for c in self.iface_cols], dtype=np.int64
            ).reshape(len(self.iface_cols), n)
        return save_arrays(out_path, arrays)

    def close(self) -> None:
        self.trees.close()
        for tr in self.tracks:
            if tr.veth is not None:
                tr.veth.close()
        if self.tcp is not None:
            self.tcp.close()
        self.ifaces.close()
        if self._stat_fd >= 0:
            os.close(self._stat_fd)
            self._stat_fd = -1
        if self._pynvml is not None:
            nvml_mod.shutdown(self._pynvml)
