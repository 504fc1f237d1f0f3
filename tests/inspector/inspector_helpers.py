"""Hand-made tiny graphs and dataset directories for the inspector tests (imported by the tests).

Targets here are synthetic functions of the graph (a test of learning, not a shipped model).
"""
from __future__ import annotations

import json
import os

import torch
from torch_geometric.data import Data

from driple.metrics import METRICS

FAMILIES = ("alpha", "beta", "gamma")


def tiny_graph(num_nodes: int = 6, num_features: int = 3, seed: int = 0, feature_set: str = "driple",
               vocab_digest: str = "test-vocab") -> Data:
    """A connected undirected graph: a ring plus a chord, positive raw features, integer weights."""
    g = torch.Generator().manual_seed(seed)
    src = torch.arange(num_nodes)
    dst = (src + 1) % num_nodes
    src, dst = torch.cat([src, torch.tensor([0])]), torch.cat([dst, torch.tensor([num_nodes // 2])])
    weight = torch.randint(1, 20, (src.numel(),), generator=g).float()
    edge_index = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
    x = torch.rand(num_nodes, num_features, generator=g) * torch.tensor([1.0, 50.0, 30.0] + [5.0] * (num_features - 3))
    attrs = torch.tensor([[1e5 * (seed + 1), 0.1 * num_nodes, x[:, 1].sum(), 2.0, 32, 10 * num_nodes]],
                         dtype=torch.float64)
    return Data(x=x, edge_index=edge_index, edge_weight=torch.cat([weight, weight]), graph_attr=attrs,
                num_nodes=num_nodes, feature_set=feature_set, vocab_digest=vocab_digest,
                summary={"family": FAMILIES[seed % len(FAMILIES)]})


def synthetic_targets(data: Data) -> torch.Tensor:
    """12 positive targets that depend on the graph's features and size."""
    s = torch.log1p(data.x).sum(0)
    base = torch.stack([s[0], s[1], s[2], s[1] / (s[2] + 1)])
    y = torch.cat([base * (1 + k) for k in range(3)]) + data.num_nodes * 0.1
    return y.view(1, len(METRICS)).float()


def fake_builder(config: dict, groups: int = 100, grouping: str = "uniform",
                 features: str = "driple", seed: int = 42) -> Data:
    """Stands in for build_zoo_input: the graph is a function of the job config."""
    if config["model"] == "broken":
        raise RuntimeError("cannot trace this model")
    knob = int(config["knobs"].get("seed", 0))
    return tiny_graph(4 + (knob % 7), seed=knob + config["batch_size"])


def write_dataset(root, n_configs: int = 12, repeats: int = 1, extra_rows: list | None = None,
                  setting: str = "cpu-ddp-w2-lo") -> str:
    """A results.csv whose targets are :func:`synthetic_targets` of :func:`fake_builder`'s graph."""
    os.makedirs(root, exist_ok=True)
    header = ["job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "status",
              *METRICS, "iteration_s"]
    lines = [",".join(header)]
    job = 0
    for c in range(n_configs):
        config = {"model": f"net{c % 3}", "knobs": {"seed": c}, "batch_size": 8, "optimizer": "sgd",
                  "setting": setting}
        y = synthetic_targets(fake_builder(config))[0].tolist()
        for r in range(repeats):
            knobs = json.dumps(config["knobs"]).replace('"', '""')
            values = [f"{v * (1 + 0.01 * r):.6g}" for v in y]
            lines.append(",".join([f"j{job:03d}", setting, config["model"], FAMILIES[c % 3],
                                   f'"{knobs}"', "8", "sgd", "ok", *values, "0.1"]))
            job += 1
    for row in extra_rows or []:
        lines.append(row)
    with open(os.path.join(root, "results.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(root)
