"""When the memory level is above its midpoint: hand-made cycles, a traced step, the tail fit,
and the measured tail of a timeline."""
import numpy as np
import pytest
import torch
from torch import nn

from driple.graph.memory_cycle import MemoryCycle, TailFit, memory_cycle, optimizer_kind
from driple.graph.trace import trace_training_step


def hand_cycle(levels, tail_bytes=0.0, param_bytes=0.0, optimizer="sgd"):
    """Four ops of one FLOP each (no bytes): the points fall at 1/4, 2/4, 3/4 and 4/4 of the
    forward and backward."""
    n = len(levels)
    return MemoryCycle(np.arange(1.0, n + 1), np.zeros(n), np.asarray(levels, dtype=float),
                       float(n), 0.0, tail_bytes, param_bytes, optimizer)


def test_share_above_the_midpoint_by_hand():
    """Rest 0, peak 20, midpoint 10. With a fifth of the step after the backward pass the points
    fall at 0.2, 0.4, 0.6, 0.8; the level is 20 from 0.4 to 0.8: 0.4 of the step."""
    c = hand_cycle([10, 20, 20, 5])
    assert c.burst_fraction(0.2, 1.0, 1.0) == pytest.approx(0.4)
    # what stays after the backward pass above the midpoint: the tail counts too
    assert hand_cycle([10, 20, 20, 5], tail_bytes=15).burst_fraction(0.2, 1.0, 1.0) == pytest.approx(0.6)
    # a level that never rises has no burst
    assert hand_cycle([0, 0, 0, 0]).burst_fraction(0.1, 1.0, 1.0) == 0.0


def test_bytes_place_the_points_at_the_copy_bandwidth():
    """The same points, all the cost in bytes: op 1 moves 3 of 4 bytes, so 20 starts at 0.75."""
    c = MemoryCycle(np.zeros(2), np.array([3.0, 4.0]), np.array([20.0, 0.0]), 0.0, 4.0, 0.0, 0.0)
    assert c.fb_seconds(1e9, 2.0) == pytest.approx(2.0)
    assert c.burst_fraction(0.0, 1e9, 2.0) == pytest.approx(0.25)  # from 0.75 to 1.0


def test_round_trip_and_optimizer_kinds():
    c = hand_cycle([1, 2], tail_bytes=3, param_bytes=8, optimizer="adam")
    back = MemoryCycle.from_dict(c.to_dict())
    assert back.burst_fraction(0.3, 1.0, 1.0) == c.burst_fraction(0.3, 1.0, 1.0) and back.optimizer == "adam"
    assert optimizer_kind("AdamW") == "adam" and optimizer_kind("SGD") == "sgd"


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(256, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def test_a_traced_step_rises_in_the_forward_pass_and_keeps_its_gradients():
    traced = trace_training_step(Mlp(), (torch.randn(32, 256), torch.randint(0, 10, (32,))),
                                 nn.functional.cross_entropy, optimizer="sgd")
    c = memory_cycle(traced, "ddp", 2, comm=[{"params": [0], "bytes": 7}, {"params": [1], "bytes": 11}])
    params = sum(traced.param_bytes)
    assert c.last_message_bytes == 11
    assert c.param_bytes == params and c.optimizer == "sgd"
    loss = traced.loss_node.out_bytes
    assert c.tail_bytes == params + loss  # DDP: every gradient (and the loss) stays until the step ends
    n_forward = int(np.sum(c.flops <= c.flops[np.argmax(c.levels)]))
    assert np.all(np.diff(c.levels[:n_forward]) >= 0)  # the forward's level never falls
    assert c.total_flops > 0 and c.total_bytes > 0
    share = c.burst_fraction(0.1, 1e11, 2e10)
    assert 0.0 < share < 1.0
    # a parameter server's worker receives the parameters it pulls at the step's end
    ps = memory_cycle(traced, "ps", 2)
    assert ps.tail_bytes == params + loss and ps.end_bytes == 2 * params + loss
    # its gradients are half its peak (they and the pulled copy): only the loss, held until the
    # step returns, puts the level after its push above the midpoint, as the label sees it
    tail = 0.4
    assert ps.burst_fraction(tail, 1e11, 2e10) >= tail
    ps.tail_bytes -= loss
    assert ps.burst_fraction(tail, 1e11, 2e10) < tail


def test_what_arrives_at_the_end_raises_the_midpoint_for_no_time():
    """Peak 20 in the backward pass; 50 arriving at the end makes the midpoint 25: nothing is
    above it for any time."""
    assert hand_cycle([10, 20, 20, 5]).burst_fraction(0.2, 1.0, 1.0) == pytest.approx(0.4)
    c = hand_cycle([10, 20, 20, 5])
    c.end_bytes = 50.0
    assert c.burst_fraction(0.2, 1.0, 1.0) == 0.0


def test_tail_fit_recovers_its_coefficients():
    rng = np.random.default_rng(0)
    cycles = [hand_cycle([1, 2, 2, 1], param_bytes=float(p), optimizer=k)
              for p, k in zip(rng.uniform(0.5, 3, 24), ["sgd", "adam"] * 12)]
    for i, c in enumerate(cycles):
        c.last_message_bytes = float(i % 5) / 4
    truth = np.array([0.3, 0.7, 0.2, 0.05])
    r = np.array([truth @ c.tail_features(1.0, 1.0) for c in cycles])
    fit = TailFit.fit(cycles, r / (1 + r), 1.0, 1.0, fitted_on="synthetic", bytes_weight=1.0)
    assert fit.coef == pytest.approx(list(truth), rel=1e-6)
    assert fit.tail(cycles[0], 1.0, 1.0) == pytest.approx(r[0] / (1 + r[0]))
    assert TailFit.from_dict(fit.to_dict()).coef == fit.coef
    assert TailFit.from_dict({"coef": fit.coef}).comm == [0.0, 0.0, 0.0]  # a fit from before collectives
    assert TailFit.from_dict({"coef": fit.coef}).bytes_weight == 1.0  # and from before the bytes' weight
    with pytest.raises(ValueError, match="bytes_weight"):
        TailFit.from_dict({**fit.to_dict(), "bytes_weight": 0})
    with pytest.raises(ValueError, match="not 3"):
        TailFit.from_dict({**fit.to_dict(), "comm": [1.0]})


def test_tail_fit_refuses_too_few_measured_tails():
    from driple.errors import DripleError

    with pytest.raises(DripleError, match="at least 4 jobs"):
        TailFit.fit([hand_cycle([1, 2])] * 3, [0.1, 0.2, float("nan")], 1.0, 1.0)


def test_measured_tail_is_what_follows_the_longest_compute_interval():
    """Iterations of 100 ns: forward and backward 0-80, the update 85-95: a fifth is the tail.
    A server's timeline is not a worker's."""
    from driple.collect.labels.timeline import tail_fraction
    from driple.collect.timeline.record import RankTimeline

    starts = np.arange(0, 3000, 100)
    iters = np.stack([starts, starts + 99], axis=1)
    compute = np.concatenate([np.stack([starts, starts + 80], 1), np.stack([starts + 85, starts + 95], 1)])
    worker = RankTimeline({"name": "worker0", "role": "worker", "warmup": 2}, iters=iters,
                          compute=compute[np.argsort(compute[:, 0])])
    server = RankTimeline({"name": "server0", "role": "server"}, iters=iters,
                          compute=np.stack([starts, starts + 10], 1))
    assert tail_fraction({"worker0": worker, "server0": server}) == pytest.approx(0.2)
    assert np.isnan(tail_fraction({"worker0": RankTimeline({"name": "w", "role": "worker"})}))


def test_a_sharded_worker_tail_follows_its_last_reduce_scatter_and_its_collectives_are_timed():
    """Iterations of 100 ns: compute 0-25, an all-gather 25-40, compute 40-70, a reduce-scatter
    70-85, the update 85-95. The longest compute interval ends at 70, but the pass ends with the
    reduce-scatter at 85: the tail is 0.15; 30 of 100 ns are spent in collectives."""
    from driple.collect.labels.timeline import comm_fraction, tail_fraction
    from driple.collect.timeline.record import COMM_KINDS, RankTimeline

    starts = np.arange(0, 3000, 100)
    iters = np.stack([starts, starts + 99], axis=1)
    compute = np.concatenate([np.stack([starts, starts + 25], 1), np.stack([starts + 40, starts + 70], 1),
                              np.stack([starts + 85, starts + 95], 1)])
    comm = []
    for i, s in enumerate(starts):
        comm.append([i, -1, COMM_KINDS["allgather"], s + 25, s + 40, 8, 8])
        comm.append([i, -1, COMM_KINDS["reducescatter"], s + 70, s + 85, 8, 8])
    worker = RankTimeline({"name": "worker0", "role": "worker", "warmup": 2}, iters=iters,
                          compute=compute[np.argsort(compute[:, 0])], comm=np.array(comm))
    assert tail_fraction({"worker0": worker}) == pytest.approx(0.15)
    assert comm_fraction({"worker0": worker}) == pytest.approx(0.30)
    plain = RankTimeline({"name": "worker0", "role": "worker", "warmup": 2}, iters=iters,
                         compute=compute[np.argsort(compute[:, 0])])
    assert comm_fraction({"worker0": plain}) == 0.0
    assert tail_fraction({"worker0": plain}) == pytest.approx(0.30)  # what follows the longest, 40-70


def test_collective_weights_are_fitted_on_the_share_of_the_step_they_take():
    """Sharded cycles whose measured share in collectives follows known weights: the fit recovers
    them, and on noisy shares its mean error in the share is near zero."""
    rng = np.random.default_rng(3)
    cycles = []
    for i in range(40):
        c = hand_cycle([1, 2, 2, 1], param_bytes=float(rng.uniform(0.5, 3)), optimizer=["sgd", "adam"][i % 2])
        c.total_comm_calls, c.total_comm_bytes = float(rng.integers(2, 60)), float(rng.uniform(0.1, 3.0))
        cycles.append(c)
    tails = rng.uniform(0.02, 0.1, len(cycles))
    truth = np.array([0.02, 0.3, 0.05])
    r = np.array([truth @ c.comm_features(1.0, 1.0) for c in cycles])
    phi = r * (1 - tails) / (1 + r)
    fit = TailFit.fit(cycles, tails, 1.0, 1.0, comm_fractions=phi, bytes_weight=1.0)
    assert fit.comm == pytest.approx(list(truth), rel=1e-4, abs=1e-8)
    noisy = np.clip(phi * rng.lognormal(0.0, 0.3, len(phi)), 0.0, 0.9)
    fit = TailFit.fit(cycles, tails, 1.0, 1.0, comm_fractions=noisy, bytes_weight=1.0)
    x = np.array([np.dot(fit.comm, c.comm_features(1.0, 1.0)) for c in cycles])
    assert abs(np.mean(x * (1 - tails) / (1 + x) - noisy)) < 0.01


def test_an_op_s_bytes_weigh_as_the_fit_says_everywhere():
    """A fit with a bytes' weight W places, times the tail and round-trips as one made at a copy
    bandwidth W times lower with weight 1."""
    rng = np.random.default_rng(5)
    cycles = []
    for i in range(12):
        c = hand_cycle([1, 4, 3, 1], param_bytes=float(rng.uniform(0.5, 3)), optimizer=["sgd", "adam"][i % 2])
        c.bytes = np.array([1.0, 2.0, 3.0, 4.0]) * float(rng.uniform(0.5, 2))
        c.total_bytes = float(c.bytes[-1])
        cycles.append(c)
    tails = rng.uniform(0.02, 0.2, len(cycles))
    heavy = TailFit.fit(cycles, tails, 1.0, 1.0, bytes_weight=2.0)
    plain = TailFit.fit(cycles, tails, 1.0, 0.5, bytes_weight=1.0)
    assert heavy.coef == pytest.approx(plain.coef) and heavy.bytes_weight == 2.0
    for c in cycles:
        assert heavy.tail(c, 1.0, 1.0) == pytest.approx(plain.tail(c, 1.0, 0.5))
        assert heavy.burst_fraction(c, 1.0, 1.0) == pytest.approx(plain.burst_fraction(c, 1.0, 0.5))
        assert heavy.placed(c, 1.0, 1.0)[0] == pytest.approx(plain.placed(c, 1.0, 0.5)[0])
    again = TailFit.from_dict(heavy.to_dict())
    assert again.bytes_weight == 2.0 and again.burst_fraction(cycles[0], 1.0, 1.0) == heavy.burst_fraction(cycles[0], 1.0, 1.0)
