"""Samplers on real processes: errors a user can cause, process trees, sockets, shutdown paths."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from driple.collect.sampling import SamplerProcess, Target, read_raw
from driple.collect.sampling.proctree import ProcessTree, is_running
from driple.collect.sampling.tcpinfo import TcpAccounts, TcpInfoReader
from driple.errors import DripleError


def spawn(code: str, *args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], **kw)


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def sleeper():
    p = spawn("import time; time.sleep(60)")
    yield p
    p.kill()
    p.wait()


# -- errors a user can cause ----------------------------------------------------------------
def test_bad_targets_and_config(tmp_path, sleeper):
    with pytest.raises(DripleError):
        Target("", 1)
    with pytest.raises(DripleError):
        Target("w", 0)
    with pytest.raises(DripleError):
        Target("w", 1, cores=0)
    t = Target("w", sleeper.pid)
    out = tmp_path / "x.npz"
    with pytest.raises(DripleError, match="at least one"):
        SamplerProcess([], out)
    with pytest.raises(DripleError, match="unique"):
        SamplerProcess([t, t], out)
    with pytest.raises(DripleError, match="period"):
        SamplerProcess([t], out, period_s=0)
    with pytest.raises(DripleError, match="device"):
        SamplerProcess([t], out, device="tpu")
    with pytest.raises(DripleError, match="net_mode"):
        SamplerProcess([t], out, net_mode="pcap")
    with pytest.raises(DripleError, match="veth"):
        SamplerProcess([t], out, net_mode="veth").start()
    with pytest.raises(DripleError, match="does not exist"):
        SamplerProcess([Target("w", sleeper.pid, veth="nosuchveth0")], out).start()
    with pytest.raises(DripleError, match="gpu_index"):
        SamplerProcess([t], out, device="gpu").start()
    with pytest.raises(DripleError, match="never started"):
        SamplerProcess([t], out).stop()


def test_pid_gone(tmp_path):
    p = spawn("pass")
    assert wait_gone(p.pid)  # exited but not waited for: a zombie
    with pytest.raises(DripleError, match="not running"):
        SamplerProcess([Target("w", p.pid)], tmp_path / "x.npz").start()
    p.wait()
    with pytest.raises(DripleError, match="not running"):
        SamplerProcess([Target("w", p.pid)], tmp_path / "x.npz").start()


def test_unwritable_output(tmp_path, sleeper):
    (tmp_path / "file").write_text("")
    with pytest.raises(DripleError, match="cannot create"):
        SamplerProcess([Target("w", sleeper.pid)], tmp_path / "file" / "x.npz").start()


def test_no_permission_is_a_plain_error(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to run a check as another user")
    code = (  # import first: 'nobody' may not read the Python installation
        "import os\n"
        "from driple.collect.sampling import SamplerProcess, Target\n"
        "from driple.errors import DripleError\n"
        "os.setgid(65534); os.setuid(65534)\n"
        "try:\n"
        f"    SamplerProcess([Target('w', {os.getpid()})], '/tmp/never.npz').start()\n"
        "except DripleError as e:\n"
        "    print('DripleError:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert "DripleError:" in out.stdout and "permission" in out.stdout, out.stdout + out.stderr


def test_gpu_request_without_pynvml(tmp_path, sleeper, monkeypatch):
    target = Target("w", sleeper.pid, gpu_index=0)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(DripleError, match="nvidia-ml-py"):
        SamplerProcess([target], tmp_path / "x.npz", device="gpu").start()


def test_gpu_request_without_driver(tmp_path, sleeper):
    pytest.importorskip("pynvml")
    try:
        import pynvml

        pynvml.nvmlInit()
        pytest.skip("this host has a working NVIDIA driver")
    except pynvml.NVMLError:
        pass
    with pytest.raises(DripleError, match="NVML"):
        SamplerProcess([Target("w", sleeper.pid, gpu_index=0)], tmp_path / "x.npz", device="gpu").start()


# -- what is measured ------------------------------------------------------------------------
TREE = r"""
import subprocess, sys, time
kid = "import time\ntime.sleep(1.0)\nc = time.thread_time() + 0.3\nwhile time.thread_time() < c: pass\ntime.sleep(0.8)"
kids = [subprocess.Popen([sys.executable, "-c", kid]) for _ in range(2)]
print("ok", flush=True)
for k in kids: k.wait()
time.sleep(0.6)
"""


def test_process_tree_cpu_is_summed_and_never_goes_back(tmp_path):
    root = spawn(TREE, stdout=subprocess.PIPE)
    try:
        root.stdout.readline()
        out = tmp_path / "tree.npz"
        with SamplerProcess([Target("tree", root.pid, cores=2.0)], out):
            root.wait(timeout=60)
            time.sleep(0.1)
    finally:
        root.kill()
        root.wait()
    raw = read_raw(out)
    c = raw.counters("tree")
    assert np.all(np.diff(c["cpu_ns"]) >= 0)  # children exiting do not take their CPU time away
    assert c["cpu_ns"].iloc[-1] - c["cpu_ns"].iloc[0] >= 0.58e9  # both children's 0.3 s
    assert c["n_procs"].max() == 3 and c["n_procs"].iloc[-1] == 1
    assert c["rss_bytes"].min() > 0
    assert raw.ended("tree") is not None  # the root exited while we sampled
    r = raw.rates("tree")
    assert r.index[-1] <= raw.ended("tree")
    # cores=2: two busy children = 100 %. Over 5 samples (50 ms), not per sample: one sample's
    # counters are read a little after its timestamp, and on a loaded host that skew alone put
    # a single 10 ms sample at 105 % (a fresh clone's CI); a rate not divided by
    # the cores would read 200 %
    assert r["compute"].rolling(5).mean().max() <= 100.0 * 1.05
    # integrated back, the rates hold the children's CPU time: % x 2 cores x dt
    dt = np.diff(r.index.to_numpy(), prepend=r.index[0] - raw.period_s)
    assert (r["compute"] / 100 * 2.0 * dt).sum() >= 0.58


def test_ps_like_target_exits_and_others_continue(tmp_path, sleeper, host_load, sample_grid):
    short = spawn("import time; time.sleep(0.7)")
    out = tmp_path / "exit.npz"
    with SamplerProcess([Target("short", short.pid), Target("long", sleeper.pid)], out):
        short.wait()  # left as a zombie for a while: must still count as ended
        time.sleep(0.6)
    raw = read_raw(out)
    assert raw.ended("short") is not None and raw.ended("long") is None
    assert raw.counters("short").index[-1] < raw.counters("long").index[-1] - 0.3
    sample_grid(raw, "long", host_load, at_least_s=0.6)  # sampled throughout, on the grid


SENDER = r"""
import socket, sys, time
port = int(sys.argv[1])
def burst(n, pause_before):
    s = socket.create_connection(("127.0.0.1", port))
    time.sleep(pause_before)  # lets the sampler find the new socket
    s.sendall(b"x" * n)
    time.sleep(0.3)
    s.close()
print("ok", flush=True)
burst(1_000_000, 1.0)
burst(2_000_000, 0.8)
time.sleep(0.4)
"""


def test_tcp_info_counts_payload_and_keeps_closed_sockets(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    received = []

    def serve():
        for _ in range(2):
            c, _ = srv.accept()
            n = 0
            while b := c.recv(1 << 20):
                n += len(b)
            received.append(n)
            time.sleep(0.2)  # keep it open a little, like a real peer
            c.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    sender = spawn(SENDER, srv.getsockname()[1], stdout=subprocess.PIPE)
    out = tmp_path / "tcp.npz"
    try:
        sender.stdout.readline()
        with SamplerProcess([Target("sender", sender.pid), Target("me", os.getpid())], out):
            sender.wait(timeout=60)
            th.join(10)
            time.sleep(0.1)
    finally:
        sender.kill()
        sender.wait()
        srv.close()
    assert received == [1_000_000, 2_000_000]
    raw = read_raw(out)
    s, me = raw.counters("sender"), raw.counters("me")
    for c in (s, me):
        assert np.all(np.diff(c["tx_bytes"]) >= 0) and np.all(np.diff(c["rx_bytes"]) >= 0)
    sent = s["tx_bytes"].iloc[-1] - s["tx_bytes"].iloc[0]
    got = me["rx_bytes"].iloc[-1] - me["rx_bytes"].iloc[0]
    assert abs(sent - 3_000_000) <= 16, sent  # SYN/FIN count a byte each
    assert abs(got - 3_000_000) <= 16, got
    assert s["rx_bytes"].iloc[-1] < 100
    # cross-check: loopback carried at least the payload (plus headers, acks, others' traffic)
    lo = raw.meta["interfaces"].index("lo")
    lo_tx = raw.arrays["iface/tx_bytes"][lo]
    assert lo_tx[-1] - lo_tx[0] >= 3_000_000


def test_inet_diag_reader_finds_our_socket():
    srv = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(srv.getsockname())
    b, _ = srv.accept()
    srv.close()
    try:
        with TcpInfoReader() as r:
            table = r.dump()
            ino = os.fstat(a.fileno()).st_ino
            assert ino in table
            a.sendall(b"y" * 5000)
            time.sleep(0.05)
            (acked, received), = r.query([table[ino][0]])
            assert acked >= 5000 and received == 0
            a.close()
            b.close()
            time.sleep(0.05)
            assert r.query([table[ino][0]]) in ([None], [(acked, 0)])
    finally:
        a.close()
        b.close()


def test_inet_diag_fast_path_and_attribute_walk_agree(socket_pairs):
    """The Python reader's two ways of reading an answer (the native reader: test_native)."""
    with socket_pairs(5) as pairs:
        for i, (a, b) in enumerate(pairs):
            a.sendall(b"x" * (1000 + i))
            b.sendall(b"y" * (10 + i))
        time.sleep(0.05)
        with TcpInfoReader(native=None) as r:
            table = r.dump()
            keys = [table[os.fstat(s.fileno()).st_ino][0] for pair in pairs for s in pair]
            walked = r.query(keys)  # the first answers are walked; the INFO offset is learnt
            info_at = r._info_at
            fast = r.query(keys)  # now each answer is one unpack_from
            r._set_info_at(info_at + 4)  # a wrong guess: every answer falls back to the walk
            again = r.query(keys)
            assert r._info_at == info_at
        assert walked == fast == again
        expected = []
        for i in range(5):
            expected += [(1000 + i + 1, 10 + i), (10 + i, 1000 + i)]  # +1: the connecting side counts its SYN
        assert fast == expected


def test_tcp_accounts_fold_per_target_and_keep_closed_sockets(socket_pairs):
    with socket_pairs(4) as pairs:
        for i, (a, b) in enumerate(pairs):
            a.sendall(b"x" * 1000 * (i + 1))
        time.sleep(0.05)
        ino = [os.fstat(a.fileno()).st_ino for a, _ in pairs]
        acc = TcpAccounts(2)
        acc.assign([{ino[0], ino[1]}, {ino[2], ino[3]}], now=0.0)
        assert acc.n_sockets == 4
        tx, rx = acc.read()
        assert tx == [1000 + 2000 + 2, 3000 + 4000 + 2] and rx == [0, 0]
        pairs[1][0].close()
        pairs[1][1].close()
        time.sleep(0.05)
        tx2, _ = acc.read()
        assert tx2[0] >= tx[0] and tx2[1] == tx[1]  # a closed socket keeps its bytes
        pairs[2][0].sendall(b"z" * 500)
        time.sleep(0.05)
        tx3, _ = acc.read()
        assert tx3[1] == tx[1] + 500 and tx3[0] == tx2[0]
        acc.close()


def test_process_tree_reader_directly():
    p = spawn(
        "import time\nc = time.thread_time() + 0.2\nwhile time.thread_time() < c: pass\n"
        "print('ok', flush=True)\ntime.sleep(30)",
        stdout=subprocess.PIPE,
    )
    try:
        p.stdout.readline()
        tree = ProcessTree(p.pid)
        assert tree.size == 1 and not tree.ended
        cpu0, rss = tree.sample()
        assert rss > 1_000_000
        time.sleep(1.0)
        cpu1, _ = tree.sample()
        assert cpu1 >= cpu0
        p.kill()
        p.wait()
        tree.sample()
        assert tree.ended
        tree.close()
    finally:
        p.kill()
        p.wait()


# -- never left behind -----------------------------------------------------------------------
@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_stops_and_saves_when_the_block_raises(tmp_path, sleeper, exc):
    out = tmp_path / "exc.npz"
    sp = SamplerProcess([Target("w", sleeper.pid)], out)
    with pytest.raises(exc):
        with sp:
            time.sleep(0.3)
            raise exc()
    assert not sp.running and wait_gone(sp.pid, 1.0)
    assert read_raw(out).meta["n_samples"] > 5


def test_child_saves_and_exits_when_parent_is_killed(tmp_path, sleeper):
    out = tmp_path / "orphan.npz"
    code = (
        "import sys, time\n"
        "from driple.collect.sampling import SamplerProcess, Target\n"
        f"s = SamplerProcess([Target('w', {sleeper.pid})], {str(out)!r}).start()\n"
        "print(s.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = spawn(code, stdout=subprocess.PIPE)
    try:
        child_pid = int(parent.stdout.readline())
        time.sleep(0.3)
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert wait_gone(child_pid, 15.0)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert read_raw(out).meta["n_samples"] > 5


def test_sigterm_to_the_sampler_saves(tmp_path, sleeper):
    out = tmp_path / "term.npz"
    sp = SamplerProcess([Target("w", sleeper.pid)], out).start()
    time.sleep(0.3)
    os.kill(sp.pid, signal.SIGTERM)  # e.g. the launcher's process group was terminated
    assert sp.stop() == out
    assert read_raw(out).meta["n_samples"] > 5
    assert sp.stop() == out  # stopping twice is harmless


def test_fixed_period_with_monotonic_timestamps(tmp_path, sleeper, host_load, sample_grid):
    out = tmp_path / "period.npz"
    start = time.monotonic()
    with SamplerProcess([Target("a", sleeper.pid), Target("b", os.getpid())], out, period_s=0.02):
        time.sleep(1.0)
    block = time.monotonic() - start
    raw = read_raw(out)
    assert raw.period_s == 0.02
    # 20 ms apart (or a whole number of periods after a late one), over at least the 1 s slept
    sample_grid(raw, "a", host_load, at_least_s=1.0, at_most_s=block)
    assert len(raw.arrays["b/t_ns"]) == len(raw.arrays["a/t_ns"])
    assert raw.rates("a").shape[1] == 4 and list(raw.rates("a").columns) == ["compute", "memory", "tx", "rx"]
