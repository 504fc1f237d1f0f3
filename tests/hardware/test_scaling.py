"""A spec-scaled roofline: rates hand-made on two synthetic machines are recovered, and a
prediction carried from one machine to the other lands on the other's durations."""
from types import SimpleNamespace

import numpy as np
import pytest

from driple.errors import DripleError
from driple.graph.summary_features import GRAPH_FEATURES, OP_CLASSES
from driple.hardware.host_speed import HostSpeed
from driple.hardware.scaling import carry, roofline_ratio
from driple.inspector.roofline import (COMM_COLUMN, MESSAGE_COLUMN, OVERHEAD_COLUMN, RooflineMember,
                                      design_matrix, fit_rates)

SETTING = "cpu-ps-p1w2-1g"
A = HostSpeed(flops_per_s=2e11, memory_bytes_per_s=2.5e10, cpu_model="machine A")
B = HostSpeed(flops_per_s=8e10, memory_bytes_per_s=3.0e10, cpu_model="machine B")


def jobs(n=60, seed=0):
    rng = np.random.default_rng(seed)
    f = rng.uniform(0.5, 5.0, size=(n, len(GRAPH_FEATURES)))
    for c in OP_CLASSES:  # every job has its own op mix, a few classes absent; traffic terms
        f[:, GRAPH_FEATURES.index(f"gflops_{c}")] *= rng.integers(0, 2, n)  # as long as FLOP terms
        f[:, GRAPH_FEATURES.index(f"traffic_mb_{c}")] *= 100.0
    f[:, GRAPH_FEATURES.index("compute_ops")] *= 500.0
    f[:, GRAPH_FEATURES.index("comm_messages")] *= 50.0  # as long as the other terms
    return f


def true_weights():
    w = np.zeros(2 * len(OP_CLASSES) + 3)
    w[: len(OP_CLASSES)] = np.linspace(1.5, 4.0, len(OP_CLASSES))  # 1 / utilisation of the matmul peak
    w[len(OP_CLASSES): 2 * len(OP_CLASSES)] = np.linspace(1.2, 2.0, len(OP_CLASSES))
    w[[COMM_COLUMN, OVERHEAD_COLUMN, MESSAGE_COLUMN]] = (1.1, 0.7, 0.9)  # communication, per op, per message
    return w


def test_rates_are_recovered_from_rows_of_two_machines_with_noise():
    f = jobs(400)
    X = np.concatenate([design_matrix(f[:200], SETTING, A), design_matrix(f[200:], SETTING, B)])
    y = X @ true_weights() * np.random.default_rng(1).lognormal(0.0, 0.02, len(X))  # 2 % noise
    w = fit_rates(X, y)
    assert np.max(np.abs(w / true_weights() - 1)) < 0.15
    # on the relative error: a least-squares fit on absolute error would let the longest jobs decide
    pred = X @ w
    assert np.median(np.abs(pred / y - 1)) < 0.03


def test_a_prediction_carried_to_another_machine_lands_on_its_durations():
    f = jobs()
    graphs = [SimpleNamespace(graph_features=row) for row in f]
    w = true_weights()
    targets = ("step_time",)
    member = RooflineMember(targets, SETTING, A, {"step_time": w.tolist()}, {"step_time": "inspector"})
    on_a = design_matrix(f, SETTING, A) @ w
    on_b = design_matrix(f, SETTING, B) @ w
    ratio = roofline_ratio(member, graphs, A, B)
    carried = carry(on_a[:, None], ratio)[:, 0]
    assert carried == pytest.approx(on_b, rel=1e-9)
    assert not np.allclose(on_a, on_b, rtol=0.05)  # the machines really differ
    assert np.all(roofline_ratio(member, graphs, A, A) == 1.0)


def test_amounts_are_not_carried_and_no_roofline_is_refused():
    f = jobs(5)
    graphs = [SimpleNamespace(graph_features=row) for row in f]
    targets = ("compute_burst_amount", "step_time")
    member = RooflineMember(targets, SETTING, A, {"step_time": true_weights().tolist()}, {"step_time": "inspector"})
    ratio = roofline_ratio(member, graphs, A, B)
    assert np.all(ratio[:, 0] == 1.0) and np.all(ratio[:, 1] != 1.0)
    with pytest.raises(DripleError, match="no roofline"):
        roofline_ratio(None, graphs, A, B)
