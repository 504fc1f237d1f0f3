"""The BLAS buffers a worker keeps (driple.hardware.blas): the per-path sizes against figures
measured on the collecting host, the keep-the-biggest rule, which ops reach MKL, and on a host
whose MKL path is known, the prediction against MKL's own count after the same products."""
import ctypes
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from driple.graph.memory import simulate_job
from driple.graph.trace import trace_training_step
from driple.hardware import blas
from driple.hardware.probe import blas_code_path, torch_cpu_library

MB = 1e6


@pytest.mark.parametrize("path, shape, measured_mb", [
    ("mkl-0", (1024, 1024, 1024), 1.3933),   # mkl_serv_mem_stat after one product, one thread
    ("mkl-0", (16, 64, 4096), 2.1306),
    ("mkl-0", (1024, 1024, 50257), 5.5220),  # N capped
    ("mkl-7", (1024, 1024, 4096), 11.1355),
    ("mkl-7", (1024, 500, 1024), 5.6451),    # K split in two blocks
    ("mkl-7", (1024, 1024, 16384), 20.1303),  # N capped
    ("mkl-7", (128, 1024, 1024), 0.0),       # small M: not packed
])
def test_buffer_sizes_match_the_measured_ones(path, shape, measured_mb):
    assert blas.buffer_bytes(path, *shape) / MB == pytest.approx(measured_mb, abs=0.002)


def test_a_transposed_b_is_packed_at_small_m_on_the_intel_path_only():
    assert blas.buffer_bytes("mkl-7", 64, 3072, 4096) == 0
    assert blas.buffer_bytes("mkl-7", 64, 3072, 4096, True) / MB == pytest.approx(10.644, abs=0.002)
    assert blas.buffer_bytes("mkl-0", 64, 3072, 4096, True) == blas.buffer_bytes("mkl-0", 64, 3072, 4096)


def test_mkl_keeps_a_new_buffer_only_for_a_product_bigger_than_all_it_holds():
    small, big = (1024, 256, 256), (1024, 1024, 4096)
    size = {s: blas.buffer_bytes("mkl-7", *s) for s in (small, big)}
    assert blas.kept_bytes("mkl-7", [small, big]) == size[small] + size[big]  # measured 4.893 + 11.135
    assert blas.kept_bytes("mkl-7", [big, small, big]) == size[big]
    assert blas.kept_bytes("mkl-7", []) == 0


def _products(model, batch):
    traced = trace_training_step(model, (batch, None), lambda out, _: out.sum(), "sgd")
    return blas.products(traced.graph_module.nodes), traced


def test_a_linear_layer_hands_mkl_its_forward_and_both_gradients():
    shapes, _ = _products(nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 10)), torch.randn(256, 128))
    assert (256, 128, 512, True) in shapes  # x @ W.t()
    assert (256, 10, 512, False) in shapes  # grad_x = grad_y @ W
    assert (10, 256, 512, False) in shapes  # grad_W = grad_y.t() @ x
    assert not any(s[:3] == (256, 512, 128) for s in shapes)  # the first layer's input needs no gradient


def test_only_convolutions_torch_runs_as_im2col_reach_mkl():
    conv = nn.Conv2d(64, 128, 1)
    small, _ = _products(conv, torch.randn(8, 64, 16, 16))
    assert small.count((128, 64, 256, False)) == 8  # one product per sample, forward
    assert small.count((128, 256, 64, True)) == 8   # the weight's gradient
    assert _products(conv, torch.randn(16, 64, 16, 16))[0] == []  # oneDNN's from batch 16
    assert _products(nn.Conv2d(64, 128, 3, padding=1), torch.randn(8, 64, 16, 16))[0] == []


def test_the_path_of_a_machine_and_a_simulation_with_and_without_it():
    assert blas.machine_path("mkl-5", "AMD EPYC") == "mkl-5"
    assert blas.machine_path("", "AMD EPYC") == "mkl-0"
    assert blas.machine_path(None, "Intel(R) Xeon(R) Processor") == "mkl-7"
    assert blas.machine_path("", "Apple M2") == ""
    assert blas.spec_path(None) == "" and blas.spec_path(SimpleNamespace(blas_path="", cpu_model="AMD EPYC")) == "mkl-0"
    plain = simulate_job("mlp", 64, sampled=True)
    intel = simulate_job("mlp", 64, sampled=True, blas_path="mkl-7")
    assert "blas_buffers" not in plain.breakdown and simulate_job("mlp", 64, sampled=True, blas_path="other") == plain
    assert intel.peak_bytes - plain.peak_bytes == intel.breakdown["blas_buffers"] > 4 * MB


@pytest.mark.skipif(blas_code_path() not in blas.PATHS, reason="this host's BLAS path is not one measured")
def test_the_prediction_matches_what_mkl_holds_after_the_same_products_on_this_host():
    lib = torch_cpu_library()
    lib.mkl_serv_mem_stat.restype = ctypes.c_int64
    model = nn.Sequential(nn.Linear(300, 700), nn.ReLU(), nn.Linear(700, 2000), nn.ReLU(), nn.Linear(2000, 50))
    batch = torch.randn(400, 300)
    shapes, traced = _products(model, batch)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lib.mkl_serv_free_buffers()
        for _ in range(2):
            model(batch).sum().backward()
        held = lib.mkl_serv_mem_stat(ctypes.byref(ctypes.c_int(0)))
    finally:
        torch.set_num_threads(before)
    assert blas.kept_buffer_bytes(traced, blas_code_path()) == pytest.approx(held, abs=20_000)


def test_mkl_holds_five_buffers_at_most_and_a_sixth_replaces_the_smallest():
    shapes = [(1024, 1024, n) for n in (256, 512, 768, 1024, 1280, 1536)]
    sizes = [blas.buffer_bytes("mkl-7", *s) for s in shapes]
    assert blas.kept_bytes("mkl-7", shapes[:5]) / MB == pytest.approx(30.02, abs=0.01)  # measured
    assert blas.kept_bytes("mkl-7", shapes) == sum(sizes[1:]) and sum(sizes[1:]) / MB == pytest.approx(31.94, abs=0.01)
