"""`driple settings --check-host`: this host against the host an inspector's labels describe."""
import json

import pytest

from driple.hardware.host_speed import HostSpeed
from driple.hardware.host_check import compare_hosts

AMD = HostSpeed(flops_per_s=100e9, memory_bytes_per_s=20e9, cpu_model="AMD EPYC")


def test_the_same_cpu_model_at_the_same_speed_matches():
    here = HostSpeed(flops_per_s=108e9, memory_bytes_per_s=19e9, cpu_model="AMD EPYC 7B13")
    check = compare_hosts("s", AMD, here, busy_pct=2.0)
    assert check.same_cpu and check.matches
    assert check.compute_ratio == pytest.approx(1.08) and check.memory_ratio == pytest.approx(0.95)
    assert "describe jobs on this host" in check.advice and "busy" not in check.advice


def test_another_speed_or_cpu_model_differs_and_says_why():
    slower = compare_hosts("s", AMD, HostSpeed(flops_per_s=80e9, memory_bytes_per_s=20e9, cpu_model="AMD EPYC"))
    assert slower.same_cpu and not slower.matches and slower.compute_ratio == pytest.approx(0.8)
    assert slower.advice.startswith("another speed") and "finetune" in slower.advice
    intel = compare_hosts("s", AMD, HostSpeed(flops_per_s=100e9, memory_bytes_per_s=20e9,
                                              cpu_model="Intel(R) Xeon(R) Processor"))
    assert not intel.same_cpu and not intel.matches
    assert intel.advice.startswith("another CPU model (labels measured on AMD EPYC)")


def test_a_busy_host_is_named_as_the_reason_its_figures_are_low():
    check = compare_hosts("s", AMD, HostSpeed(flops_per_s=50e9, memory_bytes_per_s=10e9, cpu_model="AMD EPYC"),
                          busy_pct=97.0)
    assert not check.matches and "busy (97 % CPU used by other processes)" in check.advice


def test_settings_check_host_compares_each_shipped_inspector(monkeypatch, capsys):
    """Against the shipped registry, with this host's measurement replaced by fixed figures."""
    import psutil

    import driple.hardware.host_speed as host_speed
    from driple.cli import main
    from driple.cli import predict as cli_predict
    from driple.predict.predictor import Predictor

    monkeypatch.delenv("DRIPLE_MODELS", raising=False)
    trained = Predictor.load("cpu-ps-p1w2-1g").inspector.host
    monkeypatch.setattr(host_speed, "measure_host_speed", lambda: trained)  # the PS dataset's host
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: 1.0)
    cli_predict._this_host.cache_clear()
    try:
        assert main(["settings", "--check-host", "--json"]) == 0
    finally:
        cli_predict._this_host.cache_clear()
    checks = {e["setting"]: e["host_check"] for e in json.loads(capsys.readouterr().out)}
    assert checks["cpu-ps-p1w2-1g"]["matches"] and checks["cpu-ps-p1w2-1g"]["compute_ratio"] == 1.0
    assert not checks["cpu-ddp-w2-lo"]["matches"] and not checks["cpu-ddp-w2-lo"]["same_cpu"]  # AMD
    assert checks["cpu-ddp-w2-lo"]["trained_cpu"] == "AMD EPYC"
