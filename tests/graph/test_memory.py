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


def test_a_parameter_server_worker_is_charged_what_ddp_imports_anyway():
    """DDP's construction imports torch._dynamo (about 24 MB) into every DDP worker, so a
    transformers model, whose classes import it too, adds it only to a parameter-server worker
    (which never imports it): the strategies' ``runtime_modules``."""
    from pathlib import Path

    from driple.graph.memory import library_heap_mb
    from driple.strategies import worker_memory

    pytest.importorskip("transformers")
    assert worker_memory("ps").runtime_modules == ()
    assert "torch._dynamo" in worker_memory("ddp").runtime_modules
    factory = f"{Path(__file__).resolve().parents[1] / 'cli' / 'conftest.py'}:hf_gpt2"
    ddp, ps = library_heap_mb(factory, 4, strategy="ddp"), library_heap_mb(factory, 4, strategy="ps")
    assert 10.0 < ps - ddp < 60.0


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


def test_lstm_workspace_is_onednns_layout():
    """oneDNN's LSTM workspace (f32, one layer, training), worked by hand: T=35 steps, batch 64,
    512 inputs and units. Leading dimensions round up to 16 floats, 16 more on a multiple of
    256: ld(4·512) = 2064, ld(512) = 528. Gates 35·64·2064, hidden outputs 35·64·528, three
    state buffers 2·36·64·528 and two cell buffers 2·36·64·512 floats, each on a page: every
    region here is a whole number of pages, so 4 × 17,823,744 = 71,294,976 bytes. With one
    element each, the seven regions take one 4096-byte page apiece."""
    from driple.graph.memory import lstm_workspace_bytes

    floats = 35 * 64 * 2064 + 35 * 64 * 528 + 3 * 2 * 36 * 64 * 528 + 2 * 2 * 36 * 64 * 512
    assert floats == 17_823_744
    assert lstm_workspace_bytes(35, 64, 512, 512) == 4 * floats == 71_294_976
    assert lstm_workspace_bytes(1, 1, 1, 1) == 7 * 4096


def _kernel_workspaces(model, x) -> list[int]:
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if str(func) == "aten.mkldnn_rnn_layer.default":
                seen.append(out[3].numel() * out[3].element_size())
            return out

    with Watch():
        model(x)[0].sum()
    return seen


@pytest.mark.parametrize("batch,steps,inputs,hidden", [(4, 10, 16, 32), (3, 7, 40, 24), (20, 35, 200, 200)])
def test_lstm_workspace_matches_the_cpu_kernel(batch, steps, inputs, hidden):
    """Where this torch runs LSTMs through oneDNN, the formula gives the workspace the kernel
    allocates, byte for byte."""
    from driple.graph.memory import lstm_workspace_bytes

    seen = _kernel_workspaces(nn.LSTM(inputs, hidden, 2, batch_first=True), torch.randn(batch, steps, inputs))
    if not seen:
        pytest.skip("this torch does not run LSTMs through oneDNN on this CPU")
    assert seen == [lstm_workspace_bytes(steps, batch, inputs, hidden), lstm_workspace_bytes(steps, batch, hidden, hidden)]


class TwoLayerLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, 2, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def test_lstm_workspaces_are_held_until_their_backward(monkeypatch):
    """Each layer's workspace (which the trace's meta kernel reports as empty) is made in the
    forward pass and read by the layer's backward: at the loss, both layers' are live, and none
    after the step. T=10, batch 4, 32 units (ld 32; layer 0's 16 inputs pad to it too): gates
    5120 floats (5 pages), hidden outputs 1280 (2 pages), five state buffers of 2·11·4·32 = 2816
    floats (3 pages each): 22 pages = 90,112 bytes a layer."""
    import driple.graph.memory as memory

    traced = trace_training_step(TwoLayerLSTM(), (torch.randn(4, 10, 16), torch.zeros(4)),
                                 lambda out, y: out.pow(2).mean(), optimizer="sgd")
    graph = traced.graph_module
    inputs = [n for n in graph.nodes if n.op == "placeholder"]
    at_loss = list(graph.nodes).index(traced.loss_node)
    with_ws, _ = memory.transient_profile(graph, inputs, [])
    monkeypatch.setattr(memory, "rnn_workspace_bytes", lambda layer, outputs: 0)
    without, _ = memory.transient_profile(graph, inputs, [])
    both = memory.lstm_workspace_bytes(10, 4, 16, 32) + memory.lstm_workspace_bytes(10, 4, 32, 32)
    assert both == 2 * 22 * 4096
    assert with_ws[at_loss] - without[at_loss] == both
    assert with_ws[-1] == without[-1]


def test_the_models_returned_logits_live_until_it_returns():
    """A model that computes its loss returns its logits beside it: the collector samples as the
    model returns, with the logits still referenced though the loss no longer reads them. The
    same model returning the loss alone is sampled 512 x 1000 fp32 = 2.048 MB lower."""
    import torch

    from driple.graph.memory import simulate
    from driple.graph.trace import trace_training_step

    class Head(torch.nn.Module):
        def __init__(self, keep_logits: bool):
            super().__init__()
            self.fc, self.keep = torch.nn.Linear(16, 1000), keep_logits

        def forward(self, x, labels):
            logits = self.fc(x)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            return {"loss": loss, "logits": logits} if self.keep else {"loss": loss}

    batch = ({"x": torch.randn(512, 16), "labels": torch.randint(0, 1000, (512,))}, None)
    peaks = []
    for keep in (True, False):
        torch.manual_seed(0)
        traced = trace_training_step(Head(keep), batch, lambda out, _y: out["loss"], "sgd")
        assert len(traced.output_nodes) == (2 if keep else 1)
        peaks.append(simulate(traced, "none", sampled=True, workers=1).peak_mb)
    assert peaks[0] - peaks[1] == pytest.approx(512 * 1000 * 4 / 1e6)
