"""The GPU memory rule: cuBLAS workspaces by compute capability, and the simulator's levels on a
hand-computed MLP row."""
import json

import pandas as pd
import pytest

from driple.errors import DripleError
from driple.evaluation.gpu_memory import evaluate, predict_row
from driple.hardware.allocator import cublas_workspace_bytes, cuda_runtime_bytes

MIB = 2 ** 20
HOPPER = json.dumps({"gpus": [{"name": "NVIDIA H200", "compute_capability": "9.0"}]})


def test_cublas_workspace_by_compute_capability(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert cublas_workspace_bytes("9.0") == 32 * MIB
    assert cublas_workspace_bytes("10.0") == 32 * MIB
    assert cublas_workspace_bytes("8.0") == 8 * MIB + 128 * 1024
    assert cublas_workspace_bytes("") == 8 * MIB + 128 * 1024  # unknown: the pre-Hopper default
    assert cuda_runtime_bytes("9.0") == 64 * MIB  # forward thread and autograd's device thread
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    assert cublas_workspace_bytes("9.0") == 16 * 1024 * 8


def _row(**over):
    row = {"job_id": "mlp-1", "family": "mlp", "setting": "gpu-ddp-w1-lo", "model": "mlp",
           "knobs": json.dumps({"hidden": 16, "input_dim": 8, "layers": 1}), "batch_size": 4,
           "optimizer": "sgd", "hardware": HOPPER, "memory_burst_amount": 67.2, "memory_low_mb": 67.1,
           "status": "ok"}
    return {**row, **over}


def test_low_level_by_hand():
    # 8-16-10 MLP: 314 fp32 parameters = 1256 bytes, as many gradients and SGD momentum;
    # batch 4 x 8 fp32 inputs + 4 int64 labels = 160 bytes; two 32 MiB workspaces
    p = predict_row(_row())
    assert p["low_mb"] * 1e6 == pytest.approx(64 * MIB + 3 * 1256 + 160)
    assert p["runtime_mb"] * 1e6 == 64 * MIB
    assert p["peak_mb"] >= p["sampled_peak_mb"] >= p["low_mb"] - 1e-9


def test_evaluate_scores_against_labels():
    p = predict_row(_row())
    frame = pd.DataFrame([_row(memory_burst_amount=p["peak_mb"] * 1.1, memory_low_mb=p["low_mb"])])
    f = evaluate(frame)
    assert f["jobs"] == 1 and f["gpus"] == ["NVIDIA H200"]
    assert f["peak"]["mape"] == pytest.approx(100 * (1 / 1.1 - 1) * -1, rel=1e-6)
    assert f["low"]["mape"] == pytest.approx(0.0, abs=1e-9)


def test_row_without_gpu_is_refused_by_name():
    with pytest.raises(DripleError, match="mlp-1.*no probed GPU"):
        predict_row(_row(hardware=json.dumps({"gpus": []})))
