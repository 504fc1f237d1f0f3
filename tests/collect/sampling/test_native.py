"""The optional native reads (``_fastread``) give the same readings as the Python reference."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from array import array

import pytest

from driple.collect.sampling import SamplerProcess, Target, read_raw
from driple.collect.sampling.native import fastread
from driple.collect.sampling.proctree import PAGE_SIZE, ProcessTree, TreeGroup
from driple.collect.sampling.tcpinfo import TcpAccounts, TcpInfoReader

needs_native = pytest.mark.skipif(fastread is None, reason="the _fastread extension is not built")

TREE = r"""
import subprocess, sys, time
kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
c = time.thread_time() + 0.1
while time.thread_time() < c:
    pass
print(kid.pid, flush=True)
time.sleep(60)
"""


@needs_native
def test_statm_parsing_and_clock_failure(tmp_path):
    def read(text: bytes | None, clock=time.CLOCK_MONOTONIC):
        """(ok, rss bytes, root pages) of a one-member tree whose statm file holds ``text``."""
        fds = array("q", [-1])
        if text is not None:
            (tmp_path / "statm").write_bytes(text)
            fds[0] = os.open(tmp_path / "statm", os.O_RDONLY)
        cpu, rss, root = array("q", [0]), array("q", [0]), array("q", [0])
        try:
            ok = fastread.read_trees(array("q", [clock]), fds, array("q", [0]), array("q", [0]),
                                     array("q", [0]), array("q", [7]), 10, cpu, rss, root)
        finally:
            if fds[0] >= 0:
                os.close(fds[0])
        assert not ok or cpu[0] > 7
        return ok, rss[0], root[0]

    assert read(b"5000 1234 300 1 0 800 0\n") == (True, 12340, 1234)
    assert read(b"5000 0 0 1 0 0 0\n") == (True, 0, 0)
    for bad in (b"", b"5000\n", b"5000 12x4 1\n", b"5000 -3 1\n"):  # Python: int() fails -> 0 pages
        assert read(bad) == (True, 0, 0), bad
    assert read(None) == (True, 0, -1)  # no statm file: not counted
    assert read(b"1 2 3\n", clock=(~999_999_999 << 3) | 2)[0] is False  # a clock that cannot be read


@needs_native
def test_tree_group_native_matches_python():
    procs = [subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE) for _ in range(2)]
    try:
        kids = [int(p.stdout.readline()) for p in procs]
        py = TreeGroup([ProcessTree(p.pid) for p in procs], native=None)
        nat = TreeGroup([ProcessTree(p.pid) for p in procs], native=fastread)
        assert [t.size for t in py.trees] == [t.size for t in nat.trees] == [2, 2]
        (cpu_a, rss_a), (cpu_b, rss_b), (cpu_c, rss_c) = (list(map(list, g.read())) for g in (py, nat, py))
        for k in range(2):
            assert cpu_a[k] <= cpu_b[k] <= cpu_c[k] and cpu_b[k] > 0.09e9
            assert rss_a[k] == rss_b[k] == rss_c[k] > 1_000_000 and rss_b[k] % PAGE_SIZE == 0
        os.kill(kids[0], 9)  # a member exits (a zombie until reaped): its CPU time stays in the total
        time.sleep(0.2)
        for g, before in ((py, cpu_c), (nat, cpu_b)):
            cpu, rss = map(list, g.read())
            assert cpu[0] >= before[0] and rss[0] < rss_b[0] and rss[1] == rss_b[1]
            g.refresh()
            assert g.read()[0][0] >= cpu[0]
        assert [t.size for t in py.trees] == [t.size for t in nat.trees]
        procs[1].kill()  # a root exits: its tree ends, the other goes on
        procs[1].wait()
        for g in (py, nat):
            g.read()
            assert g.trees[1].ended and not g.trees[0].ended
            cpu, _ = g.read()
            assert cpu[1] >= cpu_b[1]
            g.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()


@needs_native
def test_inet_diag_native_matches_python(socket_pairs):
    with socket_pairs(6) as pairs:
        for i, (a, b) in enumerate(pairs):
            a.sendall(b"x" * (1000 + i))
            b.sendall(b"y" * (10 + i))
        time.sleep(0.05)
        with TcpInfoReader(native=None) as py, TcpInfoReader(native=fastread) as nat:
            table = py.dump()
            keys = [table[os.fstat(s.fileno()).st_ino][0] for pair in pairs for s in pair]
            assert py.query(keys) == nat.query(keys) == py.query(keys)
            pairs[2][0].close()
            pairs[2][1].close()
            time.sleep(0.05)
            got = nat.query(keys)
            assert got == py.query(keys)
            assert got[4] in (None, (1003, 12)) and got[0] == (1001, 10)  # gone or last counts


@needs_native
def test_tcp_accounts_native_matches_python(socket_pairs):
    with socket_pairs(4) as pairs:
        for i, (a, b) in enumerate(pairs):
            a.sendall(b"x" * 1000 * (i + 1))
        time.sleep(0.05)
        ino = [os.fstat(a.fileno()).st_ino for a, _ in pairs]
        accs = [TcpAccounts(2, TcpInfoReader(native=n)) for n in (None, fastread)]
        for acc in accs:
            acc.assign([{ino[0], ino[1]}, {ino[2], ino[3]}], now=0.0)
        assert accs[0].read() == accs[1].read() == ([3002, 7002], [0, 0])
        pairs[1][0].close()
        pairs[1][1].close()
        time.sleep(0.05)
        assert accs[0].read() == accs[1].read()
        pairs[2][0].sendall(b"z" * 500)
        time.sleep(0.05)
        assert accs[0].read() == accs[1].read()
        assert accs[0].n_sockets == accs[1].n_sockets
        for acc in accs:
            acc.close()


ENDS = r"""
import subprocess, sys
kid = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
print("ok", flush=True)
sys.stdin.readline()  # "kid": a member leaves the tree
kid.stdin.close()
kid.wait()
sys.stdin.readline()  # "end" (or end of input)
"""


def _tell(proc: subprocess.Popen, line: str) -> None:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


@pytest.mark.parametrize("native", ["0", "1"])
def test_sampler_process_same_rules_in_either_mode(tmp_path, monkeypatch, native, host_load, sample_grid):
    """Python loop or native loop: the same rows, grid, interface reads and end of a target."""
    if native == "1" and fastread is None:
        pytest.skip("the _fastread extension is not built")
    monkeypatch.setenv("DRIPLE_SAMPLER_NATIVE", native)  # inherited by the sampler process
    short, long = (subprocess.Popen([sys.executable, "-c", ENDS], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True) for _ in range(2))
    out = tmp_path / f"rules{native}.npz"
    try:
        short.stdout.readline()
        long.stdout.readline()
        start = time.monotonic()
        with SamplerProcess([Target("short", short.pid), Target("long", long.pid)], out):
            time.sleep(0.3)
            _tell(short, "kid")
            _tell(long, "kid")
            time.sleep(0.3)
            told_end = time.monotonic_ns()
            _tell(short, "end")
            short.wait(timeout=30)
            time.sleep(0.9)
        block = time.monotonic() - start
    finally:
        for p in (short, long):
            p.kill()
            p.wait()
    raw = read_raw(out)
    n = raw.meta["n_samples"]
    assert raw.meta["native_reads"] is (native == "1")
    assert len(raw.arrays["sample/span_ns"]) == n
    assert raw.meta["start_ns"] == raw.arrays["long/t_ns"][0] == raw.arrays["short/t_ns"][0]
    assert len(raw.arrays["iface/t_ns"]) == (n + 9) // 10 + 1  # every 10th sample, and at the end
    lo, sh = raw.counters("long"), raw.counters("short")
    assert len(lo) == n
    sample_grid(raw, "long", host_load, at_least_s=1.5, at_most_s=block)
    ended = raw.target("short")["ended_ns"]
    t_short, t_long = raw.arrays["short/t_ns"], raw.arrays["long/t_ns"]
    assert ended is not None and ended >= told_end and (t_short < ended).all()
    assert len(sh) >= (t_long < told_end).sum()  # sampled while it lived, ...
    assert t_long[-1] > ended + 0.3e9  # ... while the other went on
    for c in (lo, sh):
        assert c["cpu_ns"].is_monotonic_increasing and (c["rss_bytes"] > 1_000_000).all()
        assert c["n_procs"].iloc[0] == 2 and c["n_procs"].iloc[-1] == 1  # the kid has gone


@pytest.mark.parametrize("native", ["0", "1"])
def test_sampler_process_reads_in_either_mode(tmp_path, monkeypatch, native):
    if native == "1" and fastread is None:
        pytest.skip("the _fastread extension is not built")
    monkeypatch.setenv("DRIPLE_SAMPLER_NATIVE", native)  # inherited by the sampler process
    p = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE)
    out = tmp_path / f"native{native}.npz"
    try:
        p.stdout.readline()
        with SamplerProcess([Target("w", p.pid)], out):
            time.sleep(0.3)
    finally:
        p.kill()
        p.wait()
    raw = read_raw(out)
    assert raw.meta["native_reads"] is (native == "1")
    c = raw.counters("w")
    assert (c["n_procs"] == 2).all() and (c["rss_bytes"] > 1_000_000).all()
    assert c["cpu_ns"].iloc[0] > 0.09e9 and c["cpu_ns"].is_monotonic_increasing
