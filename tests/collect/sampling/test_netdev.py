"""Emulated-host mode: a sender inside a network namespace, counted on the host-side veth.

Creates its own namespace and veth pair (named after this test's pid) and deletes them.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from driple.collect.sampling import SamplerProcess, Target, read_raw

pytestmark = pytest.mark.netns

SENDER = r"""
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print("ok", flush=True)
time.sleep(0.5)
s.sendall(b"z" * 2_000_000)
time.sleep(0.5)
s.close()
"""


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@pytest.fixture
def namespace():
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 to create a network namespace")
    tag = os.getpid() % 100_000
    ns, host, peer = f"drpltest{tag}", f"drh{tag}", f"drn{tag}"
    a, b = f"10.254.{tag % 250}.1", f"10.254.{tag % 250}.2"
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
        _ip("addr", "add", f"{a}/30", "dev", host)
        _ip("link", "set", host, "up")
        _ip("-n", ns, "addr", "add", f"{b}/30", "dev", peer)
        _ip("-n", ns, "link", "set", peer, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        yield ns, host, a
    finally:
        subprocess.run(["ip", "link", "del", host], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_veth_counters_are_swapped_to_the_target_view(namespace, tmp_path):
    ns, host, host_addr = namespace
    srv = socket.create_server((host_addr, 0))
    got = []

    def serve():
        c, _ = srv.accept()
        n = 0
        while b := c.recv(1 << 20):
            n += len(b)
        got.append(n)
        c.close()

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    sender = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-c", SENDER, host_addr, str(srv.getsockname()[1])],
        stdout=subprocess.PIPE,
    )
    out = tmp_path / "veth.npz"
    try:
        sender.stdout.readline()
        with SamplerProcess([Target("ns0", sender.pid, veth=host)], out) as sp:
            sender.wait(timeout=60)
            th.join(10)
            time.sleep(0.1)
    finally:
        sender.kill()
        sender.wait()
        srv.close()
    assert got == [2_000_000]
    raw = read_raw(out)
    assert raw.target("ns0")["net_source"] == "veth"
    c = raw.counters("ns0")
    tx = c["tx_bytes"].iloc[-1] - c["tx_bytes"].iloc[0]
    rx = c["rx_bytes"].iloc[-1] - c["rx_bytes"].iloc[0]
    assert 2_000_000 <= tx <= 2_200_000, tx  # payload + Ethernet/IP/TCP headers
    assert 0 < rx < 200_000, rx  # only acks come back
    assert np.all(np.diff(c["tx_bytes"]) >= 0)
    assert sp.net_mode == "auto"
