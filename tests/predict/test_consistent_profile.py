"""A profile holds together: no resource's cycle outlasts the step, and every number that is
not the model's own output says so per target."""
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shipped(monkeypatch):
    monkeypatch.setenv("DRIPLE_MODELS", str(ROOT / "trained_models"))


def test_the_readme_example_is_consistent(shipped):
    from driple import Predictor

    p = Predictor.load("cpu-ddp-w2-lo")
    model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    prof = p.predict(model, (torch.randn(64, 784), torch.randint(0, 10, (64,))), optimizer="adam")
    m, step = prof.metrics, prof.metrics["step_time"]
    for r in ("compute", "memory", "tx", "rx"):
        assert m[f"{r}_burst_duration"] + m[f"{r}_idle_duration"] <= step * 1.02 + 1e-12
        lo, hi = prof.intervals[f"{r}_burst_duration"]
        assert lo <= m[f"{r}_burst_duration"] <= hi
    assert "scaled to the step time" in prof.flags["compute_burst_duration"]
    d = json.loads(json.dumps(prof.to_dict()))
    assert d["flags"]["compute_burst_duration"] == prof.flags["compute_burst_duration"]


def test_hold_together_by_hand():
    """Compute burst 30 ms + idle 10 ms against a 20 ms step: both halved; memory 12 + 6 ms fits."""
    import numpy as np

    from driple.metrics import target_names
    from driple.predict.bounds import SCALED, hold_together

    names = list(target_names())
    row = np.ones(len(names))
    values = {"compute_burst_duration": 0.030, "compute_idle_duration": 0.010, "memory_burst_duration": 0.012,
              "memory_idle_duration": 0.006, "tx_burst_duration": 0.001, "tx_idle_duration": 0.001,
              "rx_burst_duration": 0.001, "rx_idle_duration": 0.001, "step_time": 0.020}
    for k, v in values.items():
        row[names.index(k)] = v
    notes, flags = [[]], [{}]
    out = hold_together(row[None, :], notes, flags)[0]
    assert out[names.index("compute_burst_duration")] == pytest.approx(0.015)
    assert out[names.index("compute_idle_duration")] == pytest.approx(0.005)
    assert out[names.index("memory_burst_duration")] == pytest.approx(0.012)
    assert flags[0] == {"compute_burst_duration": [SCALED], "compute_idle_duration": [SCALED]}
    assert len(notes[0]) == 1 and "scaled by 0.50" in notes[0][0]
