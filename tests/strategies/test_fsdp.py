"""The FSDP strategy: its registration, its wrapping policy, its graph and its memory."""
import pytest
import torch
from torch import nn

from driple.errors import DripleError
from driple.settings import Setting, parse_setting
from driple.strategies import get_strategy, worker_memory
from driple.strategies.fsdp import fsdp_units, unit_name, unit_names


def test_registration():
    fsdp = get_strategy("fsdp")
    s = parse_setting("cpu-fsdp-w2-1g")
    assert fsdp.id_part(s) == "w2" and fsdp.graph_setting(s) == "fsdp-w2-gloo" and s.link_bps == 1e9
    assert fsdp.worker == "driple.collect.workers.fsdp" and not fsdp.servers and not fsdp.asynchronous
    assert fsdp.link_use == "duplex" and worker_memory("fsdp").sharded
    assert not worker_memory("ddp").sharded and worker_memory("ddp").gradient_copy
    assert not worker_memory("ps").optimizer_on_worker and not worker_memory("none").gradient_copy
    with pytest.raises(DripleError, match="no parameter servers"):
        Setting(strategy="fsdp", servers=1)
    with pytest.raises(DripleError, match="FSDP is always synchronous"):
        parse_setting("cpu-fsdp-w2-lo-async")


@pytest.mark.parametrize("name, unit", [
    ("layers.3.attn.weight", "layers.3"),       # a block of a ModuleList
    ("transformer.h.11.mlp.c_fc.weight", "transformer.h.11"),  # nested two levels down
    ("0.weight", "0"),                           # a root Sequential's child
    ("fc.bias", ""),                             # a head outside the blocks: the root
    ("transformer.wte.weight", ""),              # an embedding outside the blocks: the root
    ("scale", ""),                               # the model's own parameter: the root
    ("a.b.c.4.weight", ""),                      # an index deeper than three levels is no block
])
def test_unit_of_a_parameter(name, unit):
    assert unit_name(name) == unit


def test_units_group_in_order_with_the_root_last():
    names = ["scale", "0.weight", "0.bias", "2.weight", "2.bias"]
    assert fsdp_units(names) == [("0", [1, 2]), ("2", [3, 4]), ("", [0])]
    assert unit_names(names) == ["0", "2", ""]
    assert fsdp_units(["fc.weight"]) == [("", [0])] and fsdp_units([]) == []


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


PARAMS = [4 * (8 * 16 + 16), 4 * (16 * 4 + 4)]  # bytes of the two units


def test_graph_has_two_gathers_and_a_reduce_scatter_per_unit():
    from driple.graph.build import op_graph_for

    batch = (torch.randn(4, 8), torch.randint(0, 4, (4,)))
    graph, _traced, setting, comm = op_graph_for(_mlp(), batch, None, "adam", "cpu-fsdp-w2-lo", None, None)
    assert setting.strategy == "fsdp" and [c["bytes"] for c in comm] == PARAMS
    nodes = {n: d for n, d in graph.nodes(data=True) if d["phase"] == "comm"}
    ops = sorted(d["op"] for d in nodes.values())
    assert ops == ["comm.allgather"] * 4 + ["comm.reducescatter"] * 2
    # a gather moves (W-1)/W of its unit each way; over gloo a reduce-scatter moves an
    # all-reduce's 2(W-1)/W: 4 x half the model per step
    assert sum(d["out_bytes"] for d in nodes.values()) == pytest.approx(4 * sum(PARAMS) / 2, abs=4)
    scatter = [d["out_bytes"] for d in nodes.values() if d["op"] == "comm.reducescatter"]
    assert scatter == pytest.approx(PARAMS, abs=1)


def test_reduce_scatter_bytes_follow_the_backend():
    from driple.graph.build import op_graph_for
    from driple.graph.comm import add_fsdp_comm

    batch = (torch.randn(4, 8), torch.randint(0, 4, (4,)))
    graph, traced, _setting, _comm = op_graph_for(_mlp(), batch, None, "sgd", "cpu-ddp-w2-lo", None, None)
    add_fsdp_comm(graph, traced, 4, backend="nccl")
    assert graph.nodes["reducescatter_0"]["out_bytes"] == pytest.approx(PARAMS[0] * 3 / 4, abs=1)
    assert graph.nodes["allgather_fwd_0"]["out_bytes"] == pytest.approx(PARAMS[0] * 3 / 4, abs=1)
    # the forward gather of a unit precedes the forward ops that read its parameters
    for u in range(2):
        readers = list(graph.successors(f"allgather_fwd_{u}"))
        assert readers and all(graph.nodes[r]["phase"] in ("forward", "comm") for r in readers)
        assert all(graph.nodes[r]["phase"] in ("backward",) for r in graph.successors(f"allgather_bwd_{u}"))
        assert all(graph.nodes[r]["phase"] == "optimizer" for r in graph.successors(f"reducescatter_{u}"))


def test_sharded_memory_divides_state_and_holds_gathered_units():
    from driple.graph.memory import simulate
    from driple.graph.trace import trace_training_step

    batch = (torch.randn(4, 8), torch.randint(0, 4, (4,)))
    traced = trace_training_step(_mlp(), batch, None, "adam")
    ddp, fsdp = simulate(traced, "ddp", workers=2), simulate(traced, "fsdp", workers=2)
    params = sum(PARAMS)
    assert ddp.breakdown["optimizer_state"] == pytest.approx(2 * params, abs=16)  # Adam's 2 moments
    assert fsdp.breakdown["optimizer_state"] == pytest.approx(params, abs=16)      # ... over 2 workers
    assert fsdp.breakdown["communication"] == 0 and ddp.breakdown["communication"] > 0
    assert fsdp.phase == "forward/backward"  # the shards, and a full copy of the larger unit (no root)
    assert fsdp.breakdown["parameters"] == params // 2 + max(PARAMS)
    four = simulate(traced, "fsdp", workers=4)
    assert four.breakdown["parameters"] - params // 4 == fsdp.breakdown["parameters"] - params // 2
    assert four.breakdown["optimizer_state"] == pytest.approx(2 * params / 4, abs=16)
    assert four.peak_bytes < fsdp.peak_bytes < ddp.peak_bytes


def test_a_root_with_no_blocks_holds_its_parameters_twice(root_only_model):
    """A model whose parameters are all the root's (an LSTM language model is one): FSDP2 keeps
    the all-gather's buffer beside the unsharded copy until its forward ends."""
    from driple.graph.memory import simulate
    from driple.graph.trace import trace_training_step

    traced = trace_training_step(root_only_model, (torch.randn(4, 8), torch.randint(0, 4, (4,))), None, "sgd")
    assert unit_names(list(traced.param_names)) == [""]
    fsdp = simulate(traced, "fsdp", workers=2)
    assert fsdp.phase == "forward/backward"
    assert fsdp.breakdown["parameters"] == sum(PARAMS) // 2 + 2 * sum(PARAMS)
