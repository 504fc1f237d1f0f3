"""The probe's readers on fake /sys, /proc, torch.cuda and NVML; one real probe of this host."""
from types import SimpleNamespace

import pytest

from driple.hardware import probe as probe_mod
from driple.hardware.spec import HardwareSpec


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_is_the_tightest_of_the_group_and_its_parents(tmp_path):
    write(tmp_path / "proc", "0::/outer/job\n")
    write(tmp_path / "cg" / "outer" / "cpu.max", "150000 100000\n")
    write(tmp_path / "cg" / "outer" / "job" / "cpu.max", "max 100000\n")
    assert probe_mod.cgroup_quota_cores(tmp_path / "proc", tmp_path / "cg") == pytest.approx(1.5)
    write(tmp_path / "cg" / "outer" / "job" / "cpu.max", "50000 100000\n")
    assert probe_mod.cgroup_quota_cores(tmp_path / "proc", tmp_path / "cg") == pytest.approx(0.5)


def test_cgroup_v1_quota_and_no_quota(tmp_path):
    write(tmp_path / "proc", "4:cpu,cpuacct:/docker/abc\n")
    write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "200000\n")
    write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_period_us", "100000\n")
    assert probe_mod.cgroup_quota_cores(tmp_path / "proc", tmp_path / "cg") == pytest.approx(2.0)
    write(tmp_path / "cg" / "cpu,cpuacct" / "docker" / "abc" / "cpu.cfs_quota_us", "-1\n")
    assert probe_mod.cgroup_quota_cores(tmp_path / "proc", tmp_path / "cg") is None
    assert probe_mod.cgroup_quota_cores(tmp_path / "nothing", tmp_path / "cg") is None


def test_usable_cores_caps_the_affinity_by_the_quota():
    assert probe_mod.usable_cores(affinity=4, quota=1.5) == 1.5
    assert probe_mod.usable_cores(affinity=2, quota=None) == 2.0 or probe_mod.cgroup_quota_cores() is not None


def test_caches_and_links_from_fake_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate([("1", "Data", "32K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "1024K"), ("3", "Unified", "32M")]):
        d = tmp_path / "cache" / f"index{i}"
        write(d / "level", level)
        write(d / "type", kind)
        write(d / "size", size)
    assert probe_mod.cache_sizes(tmp_path / "cache") == {"L1d": 32768, "L1i": 32768, "L2": 1 << 20, "L3": 32 << 20}
    write(tmp_path / "net" / "eth0" / "speed", "10000\n")
    write(tmp_path / "net" / "lo" / "speed", "")  # loopback: no rate
    write(tmp_path / "net" / "veth0" / "speed", "-1\n")
    assert probe_mod.link_rates(tmp_path / "net") == {"eth0": 10 ** 10}


class FakeCuda:
    def __init__(self, n=1):
        self.n = n

    def is_available(self):
        return self.n > 0

    def device_count(self):
        return self.n

    def get_device_properties(self, i):
        return SimpleNamespace(name="NVIDIA H100 80GB HBM3", multi_processor_count=132,
                               total_memory=80 * 2 ** 30, major=9, minor=0)


class FakeNvml:
    NVML_CLOCK_MEM, NVML_CLOCK_SM = 1, 0

    def nvmlSystemGetDriverVersion(self):
        return b"580.65"

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetMaxClockInfo(self, handle, which):
        return 2619 if which == self.NVML_CLOCK_MEM else 1980

    def nvmlDeviceGetMemoryBusWidth(self, handle):
        return 5120


def test_gpu_spec_from_fake_torch_cuda_and_nvml():
    (gpu,) = probe_mod.gpu_specs(cuda=FakeCuda(), nvml=FakeNvml())
    assert gpu.name.startswith("NVIDIA H100") and gpu.sms == 132 and gpu.compute_capability == "9.0"
    assert gpu.memory_bandwidth_bytes_per_s == pytest.approx(3.352e12, rel=1e-3)  # the H100 SXM's 3.35 TB/s
    assert gpu.peak_flops_per_s["float32"] == pytest.approx(132 * 1.98e9 * 256)  # ~67 TFLOP/s
    assert gpu.driver == "580.65"
    spec = HardwareSpec(cpu_model="x", logical_cpus=16, cores_available=16.0, threads_per_worker=1,
                        matmul_flops_per_s={"float32": 1e11}, copy_bytes_per_s=1e10, memory_bytes=1,
                        gpus=(gpu,))
    assert HardwareSpec.from_dict(spec.to_dict()).gpus == (gpu,)


def test_gpu_spec_without_nvml_has_no_bandwidth_or_peaks_and_none_without_cuda():
    (gpu,) = probe_mod.gpu_specs(cuda=FakeCuda(), nvml=None)
    assert gpu.memory_bandwidth_bytes_per_s == 0.0 and gpu.peak_flops_per_s == {}
    assert probe_mod.gpu_specs(cuda=FakeCuda(0), nvml=FakeNvml()) == []


def test_a_real_probe_of_this_host_is_a_spec():
    spec = probe_mod.probe(repeats=1, gpus=False)
    assert spec.flops_per_s > 1e8 and spec.copy_bytes_per_s > 1e7
    assert spec.cores_available > 0 and spec.logical_cpus >= 1 and spec.memory_bytes > 0
    assert HardwareSpec.from_dict(spec.to_dict()) == spec


class FakeMkl:
    """A library exposing MKL's dispatcher, as torch's libtorch_cpu does."""

    def __init__(self, path: int):
        self.path = path

    def mkl_serv_cpu_detect(self):
        return self.path


def test_blas_code_path_names_mkls_dispatch_and_is_empty_without_mkl():
    assert probe_mod.blas_code_path(FakeMkl(7)) == "mkl-7"
    assert probe_mod.blas_code_path(FakeMkl(0)) == "mkl-0"
    assert probe_mod.blas_code_path(object()) == ""  # a BLAS that is not MKL


def test_a_spec_keeps_its_blas_path_and_an_older_spec_reads_without_one():
    spec = probe_mod.probe(repeats=1, gpus=False)
    assert HardwareSpec.from_dict(spec.to_dict()).blas_path == spec.blas_path
    older = {k: v for k, v in spec.to_dict().items() if k != "blas_path"}
    assert HardwareSpec.from_dict(older).blas_path == ""


def test_a_spec_whose_blas_path_is_not_a_name_is_refused_in_one_line():
    from driple.errors import DripleError

    record = {**probe_mod.probe(repeats=1, gpus=False).to_dict(), "blas_path": 7}
    with pytest.raises(DripleError, match="blas_path is a name"):
        HardwareSpec.from_dict(record)
