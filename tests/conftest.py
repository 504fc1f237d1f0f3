"""Fixtures shared by several test folders: tiny graphs and dataset directories (inspector, CLI),
tiny models and a tiny shipped-inspector registry (predict, CLI), one real DDP job (collect, CLI).

Targets of the inspector fixtures are synthetic functions of the graph (a test of learning, not
a shipped model); the registry's inspector has random weights: what is tested is the path from
a model to a profile (registry, checksum, graph building with the inspector's options,
intervals, CLI), not its numbers.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

FAMILIES = ("alpha", "beta", "gamma")
SETTING = "cpu-ddp-w2-lo"  # the setting of the tiny registry
BUILDER = {"groups": 8, "grouping": "uniform", "features": "driple"}  # and its builder options
#: The collector tests' user-code workloads (``<file>:tiny_mlp``), run by real jobs.
COLLECT_WORKLOADS = Path(__file__).resolve().parent / "collect" / "conftest.py"


# ---------------------------------------------------------------------- label declaration
@pytest.fixture(autouse=True)
def declared_labels():
    """Every test starts and ends under the declared labels (driple.metrics.DECLARED_LABELS):
    a test that switches with ``use_labels`` cannot leak its version into the next one."""
    from driple.metrics import DECLARED_LABELS, use_labels

    use_labels(DECLARED_LABELS)
    yield DECLARED_LABELS
    use_labels(DECLARED_LABELS)


# ---------------------------------------------------------------------- torch threads
@pytest.fixture(scope="session")
def torch_one_thread():
    """One torch thread while it is in use: the models are tiny, and several OpenMP threads on
    a shared machine only spin."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------- inspector graphs
def make_tiny_graph(num_nodes: int = 6, num_features: int = 3, seed: int = 0, feature_set: str = "driple",
                    vocab_digest: str = "test-vocab"):
    """A connected undirected graph: a ring plus a chord, positive raw features, integer weights."""
    import torch
    from torch_geometric.data import Data

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
                graph_features=tiny_graph_features(x, seed), num_nodes=num_nodes,
                feature_set=feature_set, vocab_digest=vocab_digest,
                summary={"family": FAMILIES[seed % len(FAMILIES)], "batch_size": 32})


def tiny_graph_features(x, seed: int):
    """Graph-level features (driple.graph.summary_features) that follow a tiny graph's ``x``."""
    import torch

    from driple.graph.summary_features import GRAPH_FEATURES, feature_vector

    size = float(x[:, 1].sum())
    f = {k: 0.0 for k in GRAPH_FEATURES}
    f.update(gflops=0.01 * size, traffic_mb=3.0 * size, param_mb=0.4 * (seed + 1), activation_mb=size,
             optimizer_state_mb=0.4 * (seed + 1), comm_tx_mb=0.4 * (seed + 1), comm_rx_mb=0.4 * (seed + 1),
             comm_messages=1.0 + seed % 3, largest_message_mb=0.4, batch_size=32.0, workers=2.0,
             n_ops=float(x[:, 2].sum()), opt_sgd=1.0)
    f.update(compute_ops=f["n_ops"], gflops_conv=0.8 * f["gflops"], gflops_matmul=0.2 * f["gflops"],
             traffic_mb_conv=0.5 * f["traffic_mb"], traffic_mb_other=0.5 * f["traffic_mb"])
    return torch.tensor([feature_vector(f)], dtype=torch.float64)


def synthetic_step_time(data) -> float:
    """A step time (s) that follows the graph's size (the ``step_time`` of labels v2)."""
    return 0.02 * data.num_nodes + 0.001 * float(data.x[:, 1].sum())


def make_synthetic_targets(data):
    """Positive targets that depend on the graph's features and size: the 12 burst/idle metrics,
    then the step time (:func:`synthetic_step_time`) when the declared labels have it (v2)."""
    import torch

    from driple.metrics import METRICS, target_names

    s = torch.log1p(data.x).sum(0)
    base = torch.stack([s[0], s[1], s[2], s[1] / (s[2] + 1)])
    y = torch.cat([base * (1 + k) for k in range(3)]) + data.num_nodes * 0.1
    if "step_time" in target_names():
        y = torch.cat([y, torch.tensor([synthetic_step_time(data)], dtype=y.dtype)])
    return y.view(1, len(target_names())).float()


def fake_graph_builder(config: dict, groups: int = 100, grouping: str = "uniform",
                       features: str = "driple", seed: int = 42):
    """Stands in for build_zoo_input: the graph is a function of the job config."""
    if config["model"] == "broken":
        raise RuntimeError("cannot trace this model")
    knob = int(config["knobs"].get("seed", 0))
    return make_tiny_graph(4 + (knob % 7), seed=knob + config["batch_size"])


def write_results(root, n_configs: int = 12, repeats: int = 1, extra_rows: list | None = None,
                  setting: str = "cpu-ddp-w2-lo", labels: str | None = None) -> str:
    """A results.csv whose targets are :func:`make_synthetic_targets` of :func:`fake_graph_builder`'s
    graph, in the declared labels' columns (``labels``: another version); labels v2 have a
    ``step_time`` (s, :func:`synthetic_step_time`) and the ``labels`` column of the timeline
    labeller."""
    from driple.metrics import METRICS, label_version

    os.makedirs(root, exist_ok=True)
    v2 = (labels or label_version()) == "v2"
    header = ["job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "status",
              *METRICS, "iteration_s", *(["step_time", "labels"] if v2 else [])]
    lines = [",".join(header)]
    job = 0
    for c in range(n_configs):
        config = {"model": f"net{c % 3}", "knobs": {"seed": c}, "batch_size": 8, "optimizer": "sgd",
                  "setting": setting}
        graph = fake_graph_builder(config)
        y = make_synthetic_targets(graph)[0].tolist()[:len(METRICS)]
        step = synthetic_step_time(graph)
        for r in range(repeats):
            knobs = json.dumps(config["knobs"]).replace('"', '""')
            values = [f"{v * (1 + 0.01 * r):.6g}" for v in y]
            extra = [f"{step * (1 + 0.01 * r):.6g}", "timeline-v2"] if v2 else []
            lines.append(",".join([f"j{job:03d}", setting, config["model"], FAMILIES[c % 3],
                                   f'"{knobs}"', "8", "sgd", "ok", *values, "0.1", *extra]))
            job += 1
    for row in extra_rows or []:
        lines.append(row)
    with open(os.path.join(root, "results.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return str(root)


@pytest.fixture
def tiny_graph():
    """Function ``(num_nodes=6, num_features=3, seed=0, feature_set=, vocab_digest=) -> Data``."""
    return make_tiny_graph


@pytest.fixture
def synthetic_targets():
    """Function ``Data -> [1, 12]`` targets that depend on the graph."""
    return make_synthetic_targets


@pytest.fixture
def fake_builder():
    """A graph builder for :class:`InspectorDataset` (``builder_id="fake"``): no tracing."""
    return fake_graph_builder


@pytest.fixture
def write_dataset():
    """Function ``(root, n_configs=12, repeats=1, extra_rows=None, setting=) -> root`` writing a
    results.csv whose graphs come from ``fake_builder``."""
    return write_results


def label_tail(step: str = "1.0") -> tuple[list, list]:
    """The columns a results.csv of the declared labels has beyond the 12 burst/idle metrics,
    and a row's values for them: labels v2 have ``step_time`` (``step`` s) and the timeline
    labeller's name in ``labels``; labels v1 nothing."""
    from driple.metrics import label_version

    if label_version() == "v2":
        return ["step_time", "labels"], [step, "timeline-v2" if step else ""]
    return [], []


@pytest.fixture
def label_columns():
    """Function ``(step="1.0") -> (header, values)``: what a hand-written results row of the
    declared labels needs after its 12 metric columns (:func:`label_tail`)."""
    return label_tail


@pytest.fixture
def dataset_dir(tmp_path):
    return write_results(tmp_path / "cpu-ddp-w2-lo")


@pytest.fixture
def dataset(dataset_dir):
    from driple.inspector.dataset import InspectorDataset

    return InspectorDataset(dataset_dir, builder=fake_graph_builder, builder_id="fake", progress=False)


# ---------------------------------------------------------------------- models and the registry
def make_tiny_mlp(hidden: int = 16):
    """Linear(8, hidden) - ReLU - Linear(hidden, 4), with ``input_shape = (8,)``."""
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 4))
    net.input_shape = (8,)
    return net


@pytest.fixture
def tiny_mlp():
    """Function ``(hidden=16) -> nn.Module`` (8 inputs, 4 outputs, ``input_shape`` set)."""
    return make_tiny_mlp


def make_tiny_registry(root, labels: str | None = None):
    """Ship one inspector of :data:`SETTING` (random weights) into the registry ``root``, trained
    as if on labels ``labels`` (default: the declared ones)."""
    import torch

    from driple.graph.build import build_input
    from driple.inspector.checkpoint import TrainedInspector
    from driple.inspector.model import Inspector
    from driple.inspector.scaling import FeatureScaler, TargetScaler
    from driple.inspector.train import feature_names_for
    from driple.metrics import DECLARED_LABELS, target_names, use_labels
    from driple.predict.intervals import ConformalIntervals
    from driple.shipping.ship import ship

    use_labels(labels or DECLARED_LABELS)
    torch.manual_seed(0)
    graphs = [build_input(make_tiny_mlp(h), torch.randn(4, 8), strategy=SETTING, **BUILDER)
              for h in (8, 16, 32)]
    names = feature_names_for("driple", graphs[0].x.size(1))
    rng = np.random.default_rng(0)
    y = rng.uniform(1, 10, size=(3, len(target_names())))
    inspector = TrainedInspector(
        Inspector(len(names), hidden_channels=8, num_repeats=2), FeatureScaler(names).fit(graphs),
        TargetScaler("max").fit(y),
        {"feature_set": graphs[0].feature_set, "vocab_digest": graphs[0].vocab_digest,
         "builder": BUILDER, "setting": SETTING, "dataset": "tests"})
    pred = np.vstack([np.clip(inspector.predict(graphs), 0, None)] * 4)
    meas = pred * rng.uniform(0.5, 2.0, size=pred.shape)
    inspector.info["intervals"] = ConformalIntervals(0.9).fit(meas, pred).to_dict()
    try:
        ship(inspector, SETTING, description="test inspector", trained="random weights (test)",
             command="pytest", root=root)
    finally:
        use_labels(DECLARED_LABELS)
    return root


@pytest.fixture(scope="session")
def models_root(tmp_path_factory):
    """A registry directory holding one shipped inspector of :data:`SETTING` (random weights)."""
    return make_tiny_registry(tmp_path_factory.mktemp("trained_models"))


@pytest.fixture(scope="session")
def v1_models_root(tmp_path_factory):
    """The same, trained as if on labels v1 (12 targets, memory in %): a checkpoint older than
    the declared labels, to be refused."""
    return make_tiny_registry(tmp_path_factory.mktemp("trained_models_v1"), labels="v1")


@pytest.fixture
def registry(models_root, monkeypatch):
    """:func:`models_root` as ``$DRIPLE_MODELS`` for the test."""
    monkeypatch.setenv("DRIPLE_MODELS", str(models_root))
    return models_root


# ---------------------------------------------------------------------- one real job
@pytest.fixture(scope="session")
def ddp_job(tmp_path_factory):
    """One real 2-worker gloo DDP job on loopback (~10 s measured), shared by several tests."""
    from driple.collect import run_job
    from driple.collect.job import JobSpec

    out = tmp_path_factory.mktemp("ddp")
    spec = JobSpec(model=f"{COLLECT_WORKLOADS}:tiny_mlp", batch_size=32, knobs={"width": 1024}, warmup=5)
    result = run_job(spec, "cpu-ddp-w2-lo", seconds=10, out_dir=out, timeout=120)
    return out, result


@pytest.fixture
def root_only_model():
    """A two-layer model whose parameters are all its own (no indexed block): FSDP's units hold
    it as the root alone, as they hold an LSTM language model."""
    import torch
    from torch import nn

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.out = nn.Linear(8, 16), nn.Linear(16, 4)

        def forward(self, x):
            return self.out(torch.relu(self.fc(x)))

    torch.manual_seed(0)
    return Head()
