"""DDP buckets and parameter-server shards added to the op graph."""
import torch

from driple.graph.comm import ddp_buckets, ready_order
from driple.graph.opgraph import build_op_graph
from driple.graph.comm import add_ddp_comm, add_ps_comm
from driple.graph.trace import trace_training_step

MiB = 1024 * 1024


def test_ddp_bucket_caps():
    # fp32 tensors in gradient-ready order: 0.5 MiB, 0.6 MiB | 10 MiB, 20 MiB | 1 KiB
    sizes = [MiB // 2, int(0.6 * MiB), 10 * MiB, 20 * MiB, 1024]
    shapes = [(s // 4,) for s in sizes]
    buckets = ddp_buckets(shapes, [torch.float32] * 5)
    # the first bucket closes once it reaches 1 MiB, later ones once they reach 25 MiB
    assert buckets == [[0, 1], [2, 3], [4]]


def test_ddp_buckets_split_by_dtype():
    buckets = ddp_buckets([(10,), (10,), (10,)], [torch.float32, torch.float16, torch.float32])
    assert sorted(map(sorted, buckets)) == [[0, 2], [1]]


def test_ddp_comm_nodes_in_graph(mlp_step):
    model, batch, loss, opt = mlp_step
    traced = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    graph = build_op_graph(traced)
    # gradients are ready last layer first: bias/weight of layer 2 before layer 1
    names = [traced.param_names[i] for i in ready_order(traced)]
    assert set(names[:2]) == {"2.weight", "2.bias"} and set(names[2:]) == {"0.weight", "0.bias"}
    buckets = add_ddp_comm(graph, traced, workers=4)
    assert len(buckets) == 1 and buckets[0]["bytes"] == 67 * 4  # sum = gradient bytes
    node = graph.nodes["allreduce_0"]
    assert node["op"] == "comm.allreduce" and node["bucket_bytes"] == 268
    assert node["out_bytes"] == round(2 * 3 / 4 * 268)  # ring: 2(W-1)/W of the bucket
    # fed by the 4 gradients, feeding the 4 momentum updates that read them
    assert graph.in_degree("allreduce_0") == 4
    assert graph.out_degree("allreduce_0") == 4
    assert all(graph.nodes[u]["phase"] == "optimizer" for u in graph.successors("allreduce_0"))
    # no gradient still feeds the optimizer directly
    for u in graph.predecessors("allreduce_0"):
        assert all(graph.nodes[v]["phase"] != "optimizer" for v in graph.successors(u))


def test_ps_comm_nodes(mlp_step):
    model, batch, loss, opt = mlp_step
    traced = trace_training_step(model, batch, loss_fn=loss, optimizer=opt)
    graph = build_op_graph(traced)
    shards = add_ps_comm(graph, traced, servers=2)
    assert sum(s["bytes"] for s in shards) == 268
    # 2.weight (96 B) and 0.weight (128 B) go to different servers
    assert sorted(s["bytes"] for s in shards) == sorted([128 + 12, 96 + 32])
    for s in range(2):
        assert graph.nodes[f"push_{s}"]["out_bytes"] == shards[s]["bytes"]
        assert graph.in_degree(f"pull_{s}") == len(shards[s]["params"])
