"""Multi-node jobs: one ``torchrun`` agent per node, joined through c10d rendezvous.

A multi-node job (``run_job(..., nodes=N)``, ``driple collect run --nodes N``) starts on every
node one torchrun agent with ``--nnodes N --rdzv-backend c10d``; the agents find each other
through the rendezvous store that node 0's agent hosts, and the rendezvous hands out the global
ranks, so which node holds which rank is learnt afterwards (:func:`node_of_pid`). This is the
protocol a user's cluster runs; only the nodes are emulated: each is a network namespace of an
:class:`~driple.collect.netns.EmulatedCluster`, its link shaped by ``tc`` at the setting's rate.

Each node also has its own sampling agent (a :class:`~driple.collect.sampling.SamplerProcess`
over the ranks on that node), as each machine of a cluster can only sample its own processes.
The driver merges the nodes' series into the job's one raw file (:func:`merge_series`), so a
multi-node row is labelled by the same code, from the same files, as a one-host row. Merging
needs one clock: the nodes here share the host's monotonic clock (one boot id), and series of
nodes that do not are refused rather than silently misaligned.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from driple.errors import DripleError

RDZV_PORT = 29400  # the c10d rendezvous store, on node 0's address


def check_nodes(setting, nodes: int, launcher: str) -> int:
    """Ranks per node of a ``nodes``-node job of ``setting``; a clear error when it cannot run."""
    from driple.strategies import get_strategy

    if int(nodes) < 1:
        raise DripleError("--nodes must be at least 1")
    if launcher != "env":
        raise DripleError("a multi-node job starts its own torchrun agent per node; leave --launcher out")
    if not setting.emulated:
        raise DripleError(f"multi-node jobs run on emulated nodes (network namespaces with shaped "
                          f"links); {setting.id} is a loopback setting: use its 1g variant, e.g. "
                          f"{setting.id.replace('-lo', '-1g')}")
    if setting.servers or get_strategy(setting.strategy).link_use != "duplex":
        raise DripleError(f"multi-node jobs run collective strategies (ddp, fsdp) through torchrun; "
                          f"{setting.id} has parameter servers, which torchrun does not place")
    if setting.workers % int(nodes):
        raise DripleError(f"{setting.workers} workers do not split evenly over {nodes} nodes")
    per_node = setting.workers // int(nodes)
    if per_node != 1:
        raise DripleError(f"{per_node} ranks per node: an emulated node's link counts the traffic of "
                          f"all its ranks, and the labels are per rank; use --nodes {setting.workers}")
    return per_node


def agent_command(host, nodes: int, per_node: int, rdzv_id: str, rdzv_host: str, module: str,
                  job_json: Path) -> list[str]:
    """The torchrun agent of one node: ``--local-addr`` is the node's address (a namespace shares
    the machine's hostname, which must not be what peers dial), and node 0 hosts the store."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run",
        f"--nnodes={nodes}", f"--nproc-per-node={per_node}",
        "--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_host}:{RDZV_PORT}", f"--rdzv-id={rdzv_id}",
        f"--rdzv-conf=is_host={'true' if host.index == 0 else 'false'}",
        f"--local-addr={host.address}", "--max-restarts=0", "--monitor-interval=0.2",
        "-m", module, "--job", str(job_json),
    ]
    return host.wrap(cmd)


def _netns_inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def node_of_pid(pid: int, hosts) -> int | None:
    """Index of the emulated node whose network namespace process ``pid`` lives in."""
    mine = _netns_inode(f"/proc/{pid}/ns/net")
    for host in hosts:
        if mine is not None and mine == _netns_inode(f"/run/netns/{host.netns}"):
            return host.index
    return None


def merge_series(parts: list[Path], out_path: Path) -> Path:
    """Write the nodes' sampler files as one raw file: every target's counters as sampled on its
    node, the host-wide columns (interfaces, host CPU) of node 0, t = 0 at the earliest start."""
    import numpy as np

    from driple.collect.sampling.sampler import save_arrays
    from driple.collect.series import read_raw

    series = [read_raw(p) for p in parts]
    boots = {s.meta.get("boot_id", "") for s in series}
    if len(boots) > 1 or "" in boots:
        raise DripleError("the nodes' series were sampled on machines with different clocks "
                          "(boot ids differ or are unknown); they cannot be merged into one timeline")
    first = series[0]
    meta = dict(first.meta)
    meta["start_ns"] = min(s.start_ns for s in series)
    meta["targets"] = [t for s in series for t in s.meta["targets"]]
    meta["n_samples"] = sum(int(s.meta.get("n_samples") or 0) for s in series)
    meta["n_late"] = sum(int(s.meta.get("n_late") or 0) for s in series)
    meta["nodes"] = [{"targets": s.names, "start_ns": s.start_ns} for s in series]
    arrays = {"meta": np.array(json.dumps(meta))}
    for s in series:
        for key, value in s.arrays.items():
            if key.split("/", 1)[0] in s.names:
                arrays[key] = value
    for key, value in first.arrays.items():
        arrays.setdefault(key, value)
    return save_arrays(out_path, arrays)
