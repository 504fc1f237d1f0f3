"""The memory simulator on steps small enough to add up by hand."""
import pytest
import torch
from torch import nn

from driple.graph.memory import fit_offset, simulate
from driple.graph.trace import trace_training_step

B, D, H, O = 64, 1000, 500, 10
PARAMS = (D * H + H * O) * 4  # two bias-free Linear layers, float32: 2,020,000 bytes
BATCH = B * D * 4 + B * 4  # inputs and float targets: 256,256 bytes


class TwoLayers(nn.Module):
    def __init__(self, mode: str = "plain"):
        super().__init__()
        self.a, self.b, self.mode = nn.Linear(D, H, bias=False), nn.Linear(H, O, bias=False), mode

    def forward(self, x):
        h = self.a(x)
        if self.mode == "inplace":
            h = torch.relu_(h)
        elif self.mode == "views":
            h = torch.relu(h).view(B, H // 10, 10).transpose(1, 2).transpose(1, 2).view(B, H)
        else:
            h = torch.relu(h)
        return self.b(h)


def step(mode="plain", optimizer="sgd"):
    return trace_training_step(TwoLayers(mode), (torch.randn(B, D), torch.zeros(B)),
                               lambda out, y: out.pow(2).mean(), optimizer=optimizer)


def test_sgd_momentum_at_the_sampled_points():
    """Parameters, SGD's momentum (one copy of them), the batch, and at the last gradient every
    gradient (one more copy) and the 4-byte loss: the activations are freed by then."""
    est = simulate(step(), "none", sampled=True)
    assert est.peak_bytes == 3 * PARAMS + BATCH + 4
    assert est.breakdown["optimizer_state"] == PARAMS and est.breakdown["parameters"] == PARAMS


def test_adam_state_and_update_transient():
    """Adam holds two moments and a 4-byte step per parameter; its update of the largest weight
    makes two temporaries of that weight (sqrt, then the division) at once."""
    sampled = simulate(step(optimizer="adam"), "none", sampled=True)
    assert sampled.breakdown["optimizer_state"] == 2 * PARAMS + 2 * 4
    assert sampled.peak_bytes == PARAMS + (2 * PARAMS + 8) + BATCH + PARAMS + 4
    whole = simulate(step(optimizer="adam"), "none")
    assert whole.phase == "update" and whole.peak_bytes == sampled.peak_bytes - 4 + 2 * D * H * 4


def test_inplace_and_views_allocate_nothing():
    """relu_ writes into the layer's output, views share their base: the same memory as the
    plain step, where relu's input is freed as soon as relu has read it."""
    plain = simulate(step("plain"), "none")
    assert simulate(step("inplace"), "none").peak_bytes == plain.peak_bytes
    assert simulate(step("views"), "none").peak_bytes == plain.peak_bytes


def test_strategies_add_their_buffers():
    traced = step(optimizer="adam")
    none, ddp, ps = (simulate(traced, s, sampled=True) for s in ("none", "ddp", "ps"))
    assert ddp.peak_bytes - none.peak_bytes == PARAMS  # the reducer's bucket copy of the gradients
    assert ddp.breakdown["communication"] == PARAMS
    # a PS worker: no optimizer state (its server steps), a pulled copy of the parameters after backward
    assert ps.breakdown["optimizer_state"] == 0 and ps.phase == "update"
    assert ps.peak_bytes == PARAMS + BATCH + PARAMS + PARAMS  # parameters, batch, gradients, the copy


def test_fit_offset_recovers_a_level_and_a_share_on_noisy_data():
    import numpy as np

    rng = np.random.default_rng(0)
    sim = rng.uniform(10, 3000, 200)
    measured = (118.0 + 1.01 * sim) * rng.lognormal(0, 0.01, 200)
    offset, scale = fit_offset(sim, measured)
    assert offset == pytest.approx(118.0, rel=0.05) and scale == pytest.approx(1.01, rel=0.01)


def test_a_users_libraries_add_their_heap_and_a_zoo_model_none():
    """Hugging Face transformers adds tens of MB to a worker that imports it: the trace cannot see
    them, a fresh interpreter measures them (the user's named factory, nothing else)."""
    from pathlib import Path

    from driple.graph.memory import library_heap_mb

    pytest.importorskip("transformers")
    factory = f"{Path(__file__).resolve().parents[1] / 'cli' / 'conftest.py'}:hf_gpt2"
    assert library_heap_mb("resnet", 4) == 0.0
    assert 5.0 < library_heap_mb(factory, 4) < 500.0


def test_memory_sim_estimator_fits_offset_and_scale_and_predicts_the_memory_amount_only():
    """As ``driple evaluate --estimators memory-sim`` uses it: rows of zoo jobs whose measured
    amount is 100 MB + the simulated peak; the fit gives back that level."""
    import numpy as np
    import pandas as pd

    from driple.inspector.estimator_registry import make_estimator
    from driple.inspector.memory_estimator import simulated_peak
    from driple.metrics import target_names

    rows = [{"model": "mlp", "knobs": json_knobs(h), "batch_size": b, "optimizer": "adam", "setting": "cpu-ddp-w2-lo"}
            for h in (64, 256, 1024) for b in (8, 64)]
    names = list(target_names())
    peaks = np.array([simulated_peak(r, {}) for r in rows])
    y = np.full((len(rows), len(names)), np.nan)
    y[:, names.index("memory_burst_amount")] = 100.0 + peaks

    class Jobs:
        frame, targets, target_names = pd.DataFrame(rows), y, names

        def __len__(self):
            return len(rows)

    est = make_estimator("memory-sim").fit(Jobs(), train=range(len(rows)), val=[])
    assert est.offset_mb == pytest.approx(100.0, rel=1e-3) and est.scale == pytest.approx(1.0, rel=1e-3)
    out = est.predict(Jobs())
    assert out[:, names.index("memory_burst_amount")] == pytest.approx(100.0 + peaks, rel=1e-6)
    assert np.isnan(out[:, names.index("step_time")]).all()


def json_knobs(hidden):
    import json

    return json.dumps({"hidden": hidden})
