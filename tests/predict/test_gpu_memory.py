"""``driple gpu-memory`` and :mod:`driple.predict.gpu_memory` on made-up GPU specs: the step's
tensors plus two cuBLAS workspaces against the card's memory, and the largest batch that fits."""
import json

import pytest

from driple.cli import main
from driple.errors import DripleError
from driple.hardware.spec import GpuSpec
from driple.predict.gpu_memory import gpu_report, pick_gpu

MIB = 2 ** 20
MLP = {"hidden": 64, "input_dim": 32, "layers": 1}


def card(memory_mb: float, cc: str = "9.0") -> GpuSpec:
    return GpuSpec(index=0, name="Test GPU", sms=1, memory_bytes=int(memory_mb * 1e6),
                   memory_bandwidth_bytes_per_s=1e12, compute_capability=cc)


def test_peak_is_the_step_plus_two_workspaces_and_fits_a_big_card():
    r = gpu_report("mlp", card(1000), batch_size=8, knobs=MLP, largest=False)
    assert r["breakdown_mb"]["cublas_workspaces"] * 1e6 == 64 * MIB
    assert r["peak_mb"] == pytest.approx(sum(r["breakdown_mb"].values()), rel=1e-9)
    assert r["between_steps_mb"] < r["peak_mb"] and r["fits"] and r["exceeds_by_mb"] == 0.0
    older = gpu_report("mlp", card(1000, "8.0"), batch_size=8, knobs=MLP, largest=False)
    assert r["peak_mb"] - older["peak_mb"] == pytest.approx(2 * (32 * MIB - 8 * MIB - 128 * 1024) / 1e6)


def test_a_job_over_the_card_says_by_how_much_and_the_largest_batch_fits():
    small = gpu_report("mlp", card(1000), batch_size=8, knobs=MLP, largest=False)
    capacity = small["peak_mb"] + 0.5  # a card just above batch 8's peak
    r = gpu_report("mlp", card(capacity), batch_size=4096, knobs=MLP)
    assert not r["fits"] and r["exceeds_by_mb"] == pytest.approx(r["peak_mb"] - capacity)
    big = r["largest_batch"]
    assert 8 <= big["batch"] < 4096 and big["peak_mb"] <= capacity < big["next_peak_mb"]
    nothing = gpu_report("mlp", card(60), batch_size=1, knobs=MLP)  # the workspaces alone are 67 MB
    assert not nothing["fits"] and nothing["largest_batch"]["batch"] == 0


def test_bad_requests_are_one_line_errors():
    with pytest.raises(DripleError, match="unknown strategy"):
        gpu_report("mlp", card(1000), batch_size=8, knobs=MLP, strategy="ring")
    with pytest.raises(DripleError, match="workers must be at least 1"):
        gpu_report("mlp", card(1000), batch_size=8, knobs=MLP, workers=0)
    from driple.hardware.spec import HardwareSpec

    with pytest.raises(DripleError, match="no GPU"):
        pick_gpu(HardwareSpec(cpu_model="x", logical_cpus=2, cores_available=2.0, threads_per_worker=1,
                              matmul_flops_per_s={"float32": 1e10}, copy_bytes_per_s=1e9, memory_bytes=10 ** 10).gpus)


def test_cli_json_and_words(capsys, tmp_path):
    spec = {"cpu_model": "x", "logical_cpus": 2, "cores_available": 2.0, "threads_per_worker": 1,
            "matmul_flops_per_s": {"float32": 1e10}, "copy_bytes_per_s": 1e9, "memory_bytes": 10 ** 10, "version": 1,
            "gpus": [{"index": 0, "name": "Test GPU", "sms": 1, "memory_bytes": 10 ** 9,
                      "memory_bandwidth_bytes_per_s": 1e12, "compute_capability": "9.0"}]}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(spec))
    args = ["gpu-memory", "mlp", "--set", "hidden=64", "--set", "input_dim=32", "--set", "layers=1",
            "--batch-size", "8", "--gpu", str(path)]
    assert main(args + ["--json", "--no-search"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["gpu"] == "Test GPU" and r["fits"] and "largest_batch" not in r
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "fits" in text and "largest batch per worker that fits" in text and "cublas workspaces" in text
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({**spec, "gpus": []}))
    assert main(["gpu-memory", "mlp", "--gpu", str(cpu)]) == 2
    assert "no GPU" in capsys.readouterr().err
