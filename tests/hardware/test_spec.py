"""The hardware spec: plain JSON both ways, refused when it cannot describe a machine."""
import json

import pytest

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.hardware.spec import SPEC_VERSION, GpuSpec, HardwareSpec, load_spec


def make(**kw):
    base = dict(cpu_model="Test CPU", logical_cpus=4, cores_available=2.0, threads_per_worker=1,
                matmul_flops_per_s={"float32": 1e11, "float64": 5e10}, copy_bytes_per_s=2e10,
                memory_bytes=8 << 30, caches_bytes={"L2": 1 << 20}, links_bits_per_s={"eth0": 10 ** 10},
                gpus=(GpuSpec(0, "Fake H100", 132, 80 << 30, 3.35e12, {"float32": 6.7e13}, "9.0"),))
    base.update(kw)
    return HardwareSpec(**base)


def test_round_trip_through_json(tmp_path):
    spec = make()
    path = tmp_path / "spec.json"
    path.write_text(spec.to_json())
    back = load_spec(path)
    assert back == spec
    assert back.gpus[0].name == "Fake H100" and back.version == SPEC_VERSION
    assert back.flops_per_s == 1e11


def test_host_speed_carries_the_peaks():
    host = make().host_speed()
    assert (host.flops_per_s, host.memory_bytes_per_s, host.cpu_model) == (1e11, 2e10, "Test CPU")
    again = HardwareSpec.from_host_speed(host)
    assert again.flops_per_s == 1e11 and again.copy_bytes_per_s == 2e10 and again.how.startswith("recorded")


def test_ratios_are_this_over_other():
    fast, slow = make(), make(matmul_flops_per_s={"float32": 5e10}, copy_bytes_per_s=1e10)
    r = fast.ratios(slow)
    assert r["compute"] == pytest.approx(2.0) and r["memory"] == pytest.approx(2.0) and r["loopback"] == 1.0


@pytest.mark.parametrize("record, words", [
    ({"version": 99}, "version 99"),
    ({"version": SPEC_VERSION, "cpu_model": "x"}, "lacks matmul_flops_per_s"),
    ({"version": SPEC_VERSION, "cpu_model": "x", "matmul_flops_per_s": {"float64": 1.0},
      "copy_bytes_per_s": 1.0}, "float32 matmul rate"),
    ({"version": SPEC_VERSION, "cpu_model": "x", "matmul_flops_per_s": {"float32": 1.0},
      "copy_bytes_per_s": -1}, "copy bandwidth"),
    ([1, 2], "JSON object"),
])
def test_bad_specs_are_refused_in_one_line(record, words):
    with pytest.raises(DripleError, match=words):
        HardwareSpec.from_dict(record)


def test_unreadable_file_is_refused_by_path(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DripleError, match="bad.json is not a readable hardware spec"):
        load_spec(bad)
    with pytest.raises(DripleError, match="no hardware spec at"):
        load_spec(tmp_path / "missing.json")
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps({"version": 0}))
    with pytest.raises(DripleError, match="stale.json: hardware spec version 0"):
        load_spec(stale)


def test_legacy_host_figures_are_a_spec():
    spec = HardwareSpec.from_host_speed(HostSpeed(2e11, 2.5e10, cpu_model="Intel(R) Xeon(R) Processor", how="measured"))
    assert spec.cpu_model.startswith("Intel") and spec.matmul_flops_per_s == {"float32": 2e11}
