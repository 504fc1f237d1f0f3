"""Emulated cluster: namespaces, veth links, tbf rate limits -- and that none is ever left behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from driple.collect import netns
from driple.collect.netns import _OWNED, EmulatedCluster, _b36, remove_stale, require_root, tbf_args
from driple.errors import DripleError

root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


def test_names_fit_the_interface_limit_and_are_recognised():
    tag = _b36(4194304)  # the largest Linux pid
    assert len(f"driple-{tag}v99") <= 15 and len(f"driple-{tag}b") <= 15
    for name in (f"driple-{tag}b", f"driple-{tag}v0", f"driple-{tag}p12", f"driple-{tag}-h3", "driple-1bb"):
        assert _OWNED.match(name), name
    assert int(_OWNED.match("driple-34qv1").group(1), 36) == int("34q", 36)
    assert not _OWNED.match("driple-toolongnamev1") and not _OWNED.match("eth0")


def test_tbf_burst_covers_a_millisecond_and_a_gso_packet():
    args = tbf_args(1e9)
    assert args[:3] == ["tbf", "rate", "1000000000bit"] and "netem" not in args
    assert int(args[args.index("burst") + 1]) == 125000
    assert int(tbf_args(1e6)[4]) == 64 * 1024


def test_without_root_the_error_says_so(monkeypatch, tmp_path):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    with pytest.raises(DripleError, match="needs root"):
        require_root()
    from driple.collect import run_job

    with pytest.raises(DripleError, match="cpu-ddp-w2-lo"):
        run_job({"model": "mlp"}, "cpu-ddp-w2-1g", seconds=1, out_dir=tmp_path)
    assert remove_stale() == []  # nothing to do (and nothing tried) without root


@root
def test_cluster_is_built_and_removed(leftovers):
    with EmulatedCluster(2, 1e9) as cluster:
        made = leftovers()
        assert sorted(made["netns"]) == sorted(h.netns for h in cluster.hosts)
        assert set(made["links"]) == {cluster.bridge, *(h.veth for h in cluster.hosts)}
        qdisc = subprocess.run(["tc", "qdisc", "show", "dev", cluster.hosts[0].veth], capture_output=True, text=True)
        assert "tbf" in qdisc.stdout and "1Gbit" in qdisc.stdout
        inside = subprocess.run(cluster.hosts[1].wrap(["ip", "-4", "-o", "addr", "show", "dev", "eth0"]),
                                capture_output=True, text=True).stdout
        assert "10.211.0.2/24" in inside
        with pytest.raises(DripleError, match="one at a time"):
            EmulatedCluster(1, 1e9).create()
    assert leftovers() == {"netns": [], "links": []}


_HOLDER = """
import sys, time
from driple.collect.netns import EmulatedCluster
with EmulatedCluster(2, 1e8):
    print("up", flush=True)
    time.sleep(120)
"""


@root
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_cluster_goes_away_when_its_owner_is_stopped(sig, leftovers, terminal_preexec):
    """SIGTERM/Ctrl-C: removed by the owner itself. SIGKILL: removed by the next run as stale."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER], stdout=subprocess.PIPE, text=True,
                            preexec_fn=terminal_preexec)
    try:
        assert proc.stdout.readline().strip() == "up"
        assert len(leftovers()["netns"]) == 2
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGKILL:
        assert len(leftovers()["netns"]) == 2
        stale = leftovers()
        removed = remove_stale()
        assert set(stale["netns"]) <= set(removed)
        assert any(name.endswith("b") for name in removed)  # the bridge (veths go with their namespace)
    assert leftovers() == {"netns": [], "links": []}


@root
@pytest.mark.slow
def test_emulated_1g_job_is_rate_limited_and_leaves_nothing(tmp_path, tiny_model, leftovers):
    from driple.collect import run_job
    from driple.collect.job import JobSpec
    from driple.collect.series import read_raw

    spec = JobSpec(model=tiny_model, batch_size=32, knobs={"width": 1024}, warmup=3)
    result = run_job(spec, "cpu-ddp-w2-1g", seconds=3, out_dir=tmp_path, timeout=120)
    row = result.row
    assert result.ok, row["reason"]
    assert leftovers() == {"netns": [], "links": []}
    link = 1e9 / 8  # bytes/s
    detail = json.loads(result.detail_path.read_text())
    series = read_raw(result.raw_path)
    for name, rank in detail["per_rank"].items():
        assert detail["ranks"][name]["target"]["veth"].startswith("driple-")  # veth counters were read
        t0, t1 = rank["window_s"]
        df = series.rates(name)
        tx = df["tx"][(df.index >= t0) & (df.index <= t1)].to_numpy() * 1e6
        assert np.percentile(tx, 99) < 1.2 * link  # never faster than the link
        # each iteration's all-reduce moves ~1x the model through the link: it cannot be quicker
        b = np.array(detail["buckets"][name])
        spans = [(b[b[:, 0] == i, 4].max() - b[b[:, 0] == i, 3].min()) / 1e9 for i in range(4, int(b[:, 0].max()) + 1)]
        assert np.median(spans) > 0.9 * row["param_bytes"] / link
    # the veth counts headers too: a few % more than the payload
    assert row["tx_bytes_per_iter"] == pytest.approx(row["param_bytes"], rel=0.12)
    assert row["tx_burst_amount"] < 1.2 * link / 1e6
