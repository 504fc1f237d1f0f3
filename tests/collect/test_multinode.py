"""Multi-node jobs: per-node torchrun agents joined through c10d rendezvous, per-node samplers."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from driple.collect.multinode import check_nodes, merge_series
from driple.collect.series import FORMAT, read_raw
from driple.errors import DripleError
from driple.settings import parse_setting

root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")


@pytest.mark.parametrize("setting, nodes, launcher, says", [
    ("cpu-ddp-w2-lo", 2, "env", "loopback setting"),
    ("cpu-ps-p1w2-1g", 3, "env", "parameter servers"),
    ("cpu-ddp-w2-1g", 3, "env", "do not split evenly"),
    ("cpu-ddp-w2-1g", 1, "env", "ranks per node"),
    ("cpu-ddp-w2-1g", 2, "torchrun", "leave --launcher out"),
    ("cpu-ddp-w2-1g", 0, "env", "at least 1"),
])
def test_jobs_that_cannot_run_on_nodes_are_refused_by_reason(setting, nodes, launcher, says):
    with pytest.raises(DripleError, match=says):
        check_nodes(parse_setting(setting), nodes, launcher)


def test_fsdp_and_ddp_split_one_rank_per_node():
    assert check_nodes(parse_setting("cpu-ddp-w2-1g"), 2, "env") == 1
    assert check_nodes(parse_setting("cpu-fsdp-w2-1g"), 2, "env") == 1


def _node_file(path, name, start_ns, boot="b1", iface_value=7):
    meta = {"format": FORMAT, "period_s": 0.01, "device": "cpu", "net_mode": "veth", "start_ns": start_ns,
            "boot_id": boot, "clock_offset_ns": 0, "host_mem_bytes": 1, "n_samples": 3, "n_late": 0,
            "interfaces": ["eth9"],
            "targets": [{"name": name, "pid": 1, "cores": 1.0, "veth": "v", "gpu_index": None,
                         "net_source": "veth", "ended_ns": None}]}
    t = np.array([start_ns, start_ns + 10, start_ns + 20], dtype=np.int64)
    np.savez(path, meta=np.array(json.dumps(meta)), **{f"{name}/t_ns": t, f"{name}/cpu_ns": t - start_ns},
             **{"iface/t_ns": t, "iface/rx_bytes": np.full((1, 3), iface_value), "iface/tx_bytes": np.zeros((1, 3))})
    return path


def test_merged_series_keeps_each_node_targets_and_the_earliest_start(tmp_path):
    a = _node_file(tmp_path / "a.npz", "worker0", 1000, iface_value=7)
    b = _node_file(tmp_path / "b.npz", "worker1", 900, iface_value=9)
    merged = read_raw(merge_series([a, b], tmp_path / "job.npz"))
    assert merged.names == ["worker0", "worker1"]
    assert merged.start_ns == 900
    assert merged.counters("worker0").index[0] == pytest.approx(100e-9)  # its own samples, one clock
    assert merged.counters("worker1")["cpu_ns"].tolist() == [0, 10, 20]
    assert merged.arrays["iface/rx_bytes"][0, 0] == 7  # host-wide columns: node 0's
    assert [n["targets"] for n in merged.meta["nodes"]] == [["worker0"], ["worker1"]]


def test_series_of_machines_with_other_clocks_are_not_merged(tmp_path):
    a = _node_file(tmp_path / "a.npz", "worker0", 1000, boot="b1")
    b = _node_file(tmp_path / "b.npz", "worker1", 900, boot="b2")
    with pytest.raises(DripleError, match="different clocks"):
        merge_series([a, b], tmp_path / "job.npz")


@root
@pytest.mark.slow
def test_two_node_job_through_rendezvous_is_labelled_and_leaves_nothing(tmp_path, tiny_model, leftovers, pids_of):
    from driple.collect import run_job
    from driple.collect.job import JobSpec

    spec = JobSpec(model=tiny_model, batch_size=32, knobs={"width": 1024}, warmup=3)
    result = run_job(spec, "cpu-ddp-w2-1g", seconds=2, out_dir=tmp_path, timeout=120, nodes=2)
    row = result.row
    assert result.ok, row["reason"]
    assert row["nodes"] == 2
    assert sorted(json.loads(row["rank_nodes"]).values()) == [0, 1]  # the rendezvous put one rank on each
    series = read_raw(result.raw_path)
    assert sorted(series.names) == ["worker0", "worker1"]
    assert len(series.meta["nodes"]) == 2 and not list((tmp_path / "raw").glob("*.node*.npz"))
    assert row["tx_bytes_per_iter"] == pytest.approx(row["param_bytes"], rel=0.12)  # through the veth
    assert row["step_time"] > 0 and row["hardware"]
    assert leftovers() == {"netns": [], "links": []}
    assert not pids_of(str(tmp_path))


def test_cli_refuses_a_job_that_cannot_run_on_nodes_before_starting_it(tmp_path, capsys):
    from driple.cli import main

    grid = tmp_path / "grid.yaml"
    grid.write_text("setting: cpu-ddp-w2-1g\njobs:\n- {model: mlp, batch_size: 8}\n")
    assert main(["collect", "sweep", "--grid", str(grid), "--out", str(tmp_path / "ds"), "--nodes", "3"]) == 2
    assert "do not split evenly over 3 nodes" in capsys.readouterr().err
    assert not (tmp_path / "ds" / "results.csv").exists()
    assert main(["collect", "run", "mlp", "--setting", "cpu-ddp-w2-lo", "--nodes", "2", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "loopback setting" in err and "running mlp" not in err
