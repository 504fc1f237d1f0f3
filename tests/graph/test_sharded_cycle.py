"""A sharded worker's sample points: its collectives counted and placed, what FSDP2 holds around
each, on steps small enough to check by hand."""
import numpy as np
import pytest
import torch
from torch import nn

from driple.graph.memory_cycle import memory_cycle
from driple.graph.trace import trace_training_step


def _step(model, optimizer="sgd"):
    torch.manual_seed(0)
    return trace_training_step(model, (torch.randn(4, 8), torch.randint(0, 4, (4,))), None, optimizer)


def test_blocks_gather_twice_and_scatter_once_each():
    """Two Linear blocks (no root): a gather each in the forward pass, a (prefetched) gather
    each in the backward pass, a reduce-scatter each: six collectives, three times the
    parameters' bytes; each count rises by one per collective, in step order."""
    traced = _step(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    sizes = [4 * (8 * 16 + 16), 4 * (16 * 4 + 4)]
    c = memory_cycle(traced, "fsdp", 2)
    assert c.total_comm_calls == 6 and c.total_comm_bytes == 3 * sum(sizes)
    assert np.all(np.diff(c.comm_calls) >= 0) and np.all(np.diff(c.flops) >= 0)
    assert set(np.diff(c.comm_calls)) <= {0.0, 1.0}
    # the first block's gather is read as it starts: its full-size buffer is already there
    first = int(np.argmax(c.comm_calls == 1))
    assert c.levels[first - 1] >= sizes[0]
    # DDP reads at gradients and waits in no collective
    ddp = memory_cycle(traced, "ddp", 2)
    assert ddp.total_comm_calls == 0 and not ddp.comm_calls.any()


def test_a_root_alone_holds_its_parameters_twice_until_its_forward_ends(root_only_model):
    """All parameters in the root: one gather, one reduce-scatter. Through the forward pass its
    buffer and its copy are both held (2P); at the reduce-scatter its input (P) beside the
    gradients' shard (P/2)."""
    traced = _step(root_only_model)
    params = sum(traced.param_bytes)
    c = memory_cycle(traced, "fsdp", 2)
    assert c.total_comm_calls == 2 and c.total_comm_bytes == 2 * params
    after_gather = c.levels[c.comm_calls == 1]
    assert after_gather[0] == params  # read as the gather ends: its buffer
    assert after_gather[1] >= 2 * params  # the next module boundary: the buffer and the copy
    at_scatter = c.levels[-1]  # read as the reduce-scatter ends
    assert at_scatter == pytest.approx(params + params // 2, abs=64)


def test_collectives_take_the_time_the_fit_gives_them():
    """With collectives free the points fall where the ops put them; with each one costing as
    much as the whole pass, the forward's points move late and the share changes."""
    traced = _step(nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 4)), "adam")
    c = memory_cycle(traced, "fsdp", 2)
    fb = c.fb_seconds(1e9, 1e9)
    free = c.burst_fraction(0.1, 1e9, 1e9)
    slow = c.burst_fraction(0.1, 1e9, 1e9, comm=(fb, 0.0))
    assert 0.0 <= free <= 1.0 and 0.0 <= slow <= 1.0 and slow != pytest.approx(free)
    assert c.burst_fraction(0.1, 1e9, 1e9, comm=(0.0, 0.0)) == free
    # a wait at the first collective, where the ranks meet: the time before it is the same share
    # of a longer step
    waits = c.burst_fraction(0.1, 1e9, 1e9, comm=(0.0, 0.0, fb))
    assert waits != pytest.approx(free)
