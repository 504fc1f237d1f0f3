"""Graph-level features and physical priors, checked by hand on tiny graphs."""
import math

import networkx as nx
import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.graph.build import build_input, op_graph_for
from driple.hardware.host_speed import LOOPBACK_BYTES_PER_S, HostSpeed
from driple.graph.summary_features import (GRAPH_FEATURES, OP_CLASSES, PRIORS, feature_vector,
                                           graph_features, op_class, optimizer_key, prior_matrix, priors)


def hand_graph(comm_ops=(("comm.allreduce", 848),)):
    """A forward matmul, a backward matmul, an optimizer add and communication nodes."""
    g = nx.DiGraph()
    g.add_node("a", op="addmm", phase="forward", flops=1024, in_bytes=704, out_bytes=256)
    g.add_node("b", op="mm", phase="backward", flops=512, in_bytes=320, out_bytes=256)
    g.add_node("c", op="add_", phase="optimizer", flops=64, in_bytes=512, out_bytes=256)
    for i, (op, moved) in enumerate(comm_ops):
        g.add_node(f"m{i}", op=op, phase="comm", flops=0, in_bytes=moved, out_bytes=moved)
    g.add_edges_from([("a", "b"), ("b", "c")])
    return g


def test_features_of_a_hand_made_graph():
    f = graph_features(hand_graph(), param_bytes=[512, 336], batch_size=4, optimizer="Adam",
                       workers=2, servers=0, comm=[{"bytes": 848}])
    assert list(f) == list(GRAPH_FEATURES)
    assert f["gflops"] == pytest.approx((1024 + 512 + 64) / 1e9)  # communication is no compute
    assert f["traffic_mb"] == pytest.approx((704 + 256 + 320 + 256 + 512 + 256) / 1e6)
    assert f["activation_mb"] == pytest.approx(256 / 1e6)  # forward outputs only
    assert f["param_mb"] == pytest.approx(848 / 1e6)
    assert f["optimizer_state_mb"] == pytest.approx(2 * 848 / 1e6)  # Adam: two moments
    assert f["comm_tx_mb"] == f["comm_rx_mb"] == pytest.approx(848 / 1e6)  # all-reduce: both ways
    assert (f["comm_messages"], f["largest_message_mb"]) == (1.0, pytest.approx(848 / 1e6))
    assert (f["batch_size"], f["workers"], f["servers"], f["n_ops"]) == (4, 2, 0, 4)
    assert (f["opt_sgd"], f["opt_adam"], f["opt_adamw"], f["opt_other"]) == (0, 1, 0, 0)


def test_flops_and_traffic_split_by_op_class():
    f = graph_features(hand_graph(), param_bytes=[512, 336], batch_size=4, optimizer="Adam",
                       workers=2, servers=0, comm=[{"bytes": 848}])
    assert f["compute_ops"] == 3  # the communication node is no compute op
    assert f["gflops_matmul"] == pytest.approx((1024 + 512) / 1e9)  # addmm and mm
    assert f["traffic_mb_matmul"] == pytest.approx((704 + 256 + 320 + 256) / 1e6)
    assert (f["gflops_other"], f["traffic_mb_other"]) == (pytest.approx(64 / 1e9), pytest.approx(768 / 1e6))
    rest = [k for k in f if k.startswith(("gflops_", "traffic_mb_")) and not k.endswith(("matmul", "other"))]
    assert rest and all(f[k] == 0 for k in rest)
    assert sum(f[f"gflops_{c}"] for c in OP_CLASSES) == pytest.approx(f["gflops"])
    assert sum(f[f"traffic_mb_{c}"] for c in OP_CLASSES) == pytest.approx(f["traffic_mb"])
    assert {op: op_class(op) for op in ("convolution_backward", "mkldnn_rnn_layer", "bmm",
                                        "native_batch_norm_backward", "max_pool2d_with_indices",
                                        "embedding_dense_backward", "add_", "addcmul_",
                                        "_scaled_dot_product_flash_attention_for_cpu")} == {
        "convolution_backward": "conv", "mkldnn_rnn_layer": "rnn", "bmm": "matmul",
        "native_batch_norm_backward": "norm", "max_pool2d_with_indices": "pool",
        "embedding_dense_backward": "embed", "add_": "other", "addcmul_": "other",
        "_scaled_dot_product_flash_attention_for_cpu": "attn"}


def test_a_view_does_no_work():
    """A forward ``t`` (a view) between the matmuls: in the graph, no FLOP, byte or compute op."""
    g = hand_graph()
    g.add_node("v", op="t", phase="forward", flops=64, in_bytes=256, out_bytes=256, view=True)
    g.add_edges_from([("a", "v"), ("v", "b")])
    with_view = graph_features(g, param_bytes=[512, 336], batch_size=4, optimizer="Adam",
                               workers=2, servers=0, comm=[{"bytes": 848}])
    without = graph_features(hand_graph(), param_bytes=[512, 336], batch_size=4, optimizer="Adam",
                             workers=2, servers=0, comm=[{"bytes": 848}])
    assert with_view["n_ops"] == without["n_ops"] + 1  # still a node of the graph
    assert {k: v for k, v in with_view.items() if k != "n_ops"} == {k: v for k, v in without.items() if k != "n_ops"}


def test_view_ops_are_marked_when_traced():
    """``x.t()`` and ``reshape`` (a view here) are views; ``addmm`` and ``clone`` are not; the
    features count the matmul's 2 x 5 x 4 x 3 FLOPs and no FLOP for the views."""
    class TransposedLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            return (x @ self.w.t()).reshape(5, 3).clone()

    model = TransposedLinear()
    graph, traced, setting, comm = op_graph_for(model, (torch.randn(5, 4), torch.randn(5, 3)),
                                                torch.nn.functional.mse_loss, "sgd", strategy="none")
    forward = {d["op"]: d["view"] for _, d in graph.nodes(data=True) if d["phase"] == "forward"}
    assert forward["t"] is True and forward["mm"] is False and forward["clone"] is False
    views = [d for _, d in graph.nodes(data=True) if d["view"]]
    f = graph_features(graph, [48], 5, "sgd", workers=1, servers=0)
    assert f["compute_ops"] == graph.number_of_nodes() - len(views)
    assert f["gflops_matmul"] == pytest.approx(2 * (2 * 5 * 4 * 3) / 1e9)  # forward mm + the weight's gradient mm
    assert f["traffic_mb"] == pytest.approx(sum(d["in_bytes"] + d["out_bytes"] for _, d in graph.nodes(data=True)
                                                if not d["view"]) / 1e6)


def test_a_push_is_sent_and_a_pull_received():
    g = hand_graph((("comm.push", 400), ("comm.pull", 400), ("comm.push", 100), ("comm.pull", 100)))
    f = graph_features(g, [400, 100], 4, "sgd", workers=2, servers=2,
                       comm=[{"bytes": 400}, {"bytes": 100}])
    assert f["comm_tx_mb"] == f["comm_rx_mb"] == pytest.approx(500 / 1e6)
    assert (f["comm_messages"], f["largest_message_mb"]) == (2, pytest.approx(400 / 1e6))
    assert f["optimizer_state_mb"] == pytest.approx(500 / 1e6)  # SGD with momentum: one copy
    assert optimizer_key("LBFGS") == "other" and optimizer_key("AdamW") == "adamw"


def test_flops_of_a_linear_and_bytes_of_a_bucket(mlp_step):
    """MLP 4->8->3, batch 5: 67 parameters (268 bytes) in one DDP bucket."""
    model, batch, loss, opt = mlp_step
    graph, traced, setting, comm = op_graph_for(model, batch, loss, opt, strategy="ddp", workers=4)
    addmm = sorted(d["flops"] for _, d in graph.nodes(data=True)
                   if d["phase"] == "forward" and d["op"] == "addmm")
    assert addmm == [2 * 5 * 8 * 3, 2 * 5 * 4 * 8]  # 2 x batch x in x out per Linear

    data = build_input(model, batch, loss_fn=loss, optimizer=opt, strategy="ddp", workers=4, groups=5)
    f = data.summary["graph_features"]
    assert data.graph_features.shape == (1, len(GRAPH_FEATURES))
    assert data.graph_features[0].tolist() == pytest.approx(feature_vector(f))
    assert f["gflops"] * 1e9 == pytest.approx(sum(d["flops"] for _, d in graph.nodes(data=True)
                                                  if d["phase"] != "comm" and not d["view"]))
    ring = 2 * (4 - 1) / 4 * 268  # ring all-reduce over 4 workers: 2(W-1)/W of the bucket
    assert f["comm_tx_mb"] * 1e6 == pytest.approx(ring) and f["comm_rx_mb"] * 1e6 == pytest.approx(ring)
    assert (f["comm_messages"], f["largest_message_mb"] * 1e6) == (1, pytest.approx(268))
    assert f["param_mb"] * 1e6 == 268 and f["opt_sgd"] == 1 and f["workers"] == 4

    ps = build_input(model, batch, loss_fn=loss, optimizer=opt, strategy="ps", workers=2, servers=2,
                     groups=5).summary["graph_features"]
    # greedy shards of 128, 96, 32, 12 bytes on 2 servers: 128 + 12 and 96 + 32
    assert ps["comm_messages"] == 2 and ps["largest_message_mb"] * 1e6 == pytest.approx(140)
    assert ps["comm_tx_mb"] * 1e6 == pytest.approx(268) and ps["comm_rx_mb"] * 1e6 == pytest.approx(268)
    single = build_input(model, batch, loss_fn=loss, optimizer=opt, strategy="none", groups=5)
    assert single.summary["graph_features"]["comm_tx_mb"] == 0


FEATURES = {**{k: 0.0 for k in GRAPH_FEATURES}, "gflops": 2.0, "traffic_mb": 500.0,
            "comm_tx_mb": 100.0, "comm_rx_mb": 100.0, "param_mb": 10.0, "optimizer_state_mb": 20.0,
            "activation_mb": 30.0, "workers": 2.0}
HOST = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e9, memory_bytes=4e9)


def test_priors_by_hand():
    p = priors(FEATURES, "cpu-ddp-w2-1g", HOST)
    assert set(p) == set(PRIORS)
    assert p["prior_compute_s"][0] == pytest.approx(2.0)  # 2 GFLOP at 1 GFLOP/s
    assert p["prior_memory_s"][0] == pytest.approx(0.5)  # 500 MB at 1 GB/s
    assert p["prior_busy_s"][0] == pytest.approx(2.5)
    assert p["link_mb_s"][0] == pytest.approx(125.0)  # 1 Gbit/s
    assert p["prior_comm_s"][0] == pytest.approx(100e6 / 125e6)  # both ways at once: 0.8 s
    assert p["prior_step_s"][0] == pytest.approx(3.3)
    assert p["prior_memory_mb"][0] == pytest.approx(2 * 10 + 20 + 30)  # params, grads, state, acts
    assert p["prior_memory_pct"][0] == pytest.approx(70 / 4000 * 100)

    lo = priors(FEATURES, "cpu-ddp-w2-lo", HOST)
    assert lo["prior_comm_s"][0] == pytest.approx(100e6 / LOOPBACK_BYTES_PER_S)
    # a parameter server's link carries both workers' push, then both workers' pull
    ps = priors({**FEATURES, "servers": 1.0}, "cpu-ps-p1w2-1g", HOST)
    assert ps["prior_comm_s"][0] == pytest.approx(2 * (100e6 + 100e6) / 125e6)
    unknown = priors(FEATURES, "cpu-ddp-w2-1g", HostSpeed(1e9, 1e9))
    assert math.isnan(unknown["prior_memory_pct"][0])


def test_prior_matrix_in_target_order():
    rows = np.array([feature_vector(FEATURES), feature_vector({**FEATURES, "gflops": 4.0})])
    m = prior_matrix(rows, "cpu-ddp-w2-1g", HOST, ["prior_step_s", None, "link_mb_s"])
    assert m.shape == (2, 3) and np.isnan(m[:, 1]).all()
    assert m[:, 0].tolist() == pytest.approx([3.3, 5.3]) and m[:, 2].tolist() == [125.0, 125.0]
    with pytest.raises(DripleError, match="unknown prior"):
        prior_matrix(rows, "cpu-ddp-w2-1g", HOST, ["prior_warp_s"])
    with pytest.raises(DripleError, match=f"expected {len(GRAPH_FEATURES)} graph features"):
        priors(rows[:, :3], "cpu-ddp-w2-1g", HOST)


def test_host_figures_are_measured_and_travel_as_plain_data():
    from driple.hardware.host_speed import measure_host_speed

    threads = torch.get_num_threads()
    speed = measure_host_speed(repeats=2, matmul_size=64, copy_bytes=1 << 20)
    assert speed.flops_per_s > 1e6 and speed.memory_bytes_per_s > 1e6 and speed.memory_bytes > 0
    assert speed.how.startswith("measured") and torch.get_num_threads() == threads
    assert HostSpeed.from_dict(speed.to_dict()) == speed
    with pytest.raises(DripleError, match="flops_per_s must be a positive number"):
        HostSpeed(0.0, 1e9)
    with pytest.raises(DripleError, match="incomplete"):
        HostSpeed.from_dict({"flops_per_s": 1e9})
