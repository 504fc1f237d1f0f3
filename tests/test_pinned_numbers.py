"""Numbers worked out by hand, one per place where a plausible one-line slip would pass every
other test: each test says the slip it catches."""
import json
import math

import numpy as np
import pytest

from driple.errors import DripleError


def test_roofline_fits_the_relative_error_not_the_absolute():
    """Slip: least squares on absolute error. Jobs X = (1, 100), measured (2, 100): the relative
    fit minimises (w/2 - 1)^2 + (w - 1)^2, so w = 1.2; an absolute fit would give ~1.0001."""
    from driple.inspector.roofline import fit_rates

    w = fit_rates(np.array([[1.0], [100.0]]), np.array([2.0, 100.0]))
    assert w[0] == pytest.approx(1.2, rel=1e-6)


def test_mode_choice_divides_by_the_measurement():
    """Slip: MAPE divided by the prediction. Two jobs measured at 1: the inspector says 1 and 4,
    the roofline 0.5 and 1, their geometric mean 0.707 and 2. Over the measurement: 150 %, 25 %,
    64.6 %: the roofline. Over the prediction it would be 37.5 %, 50 %, 45.7 %: the inspector."""
    from driple.inspector.roofline import choose_modes

    measured = np.array([[1.0], [1.0]])
    modes = choose_modes(["step_time"], np.array([[1.0], [4.0]]), np.array([[0.5], [1.0]]), measured)
    assert modes == {"step_time": "roofline"}


def test_servers_are_not_averaged_with_the_workers():
    """Slip: every rank in the mean. Workers 1 and 3, a server at 100: the mean is 2."""
    from driple.collect.labels.timeline import mean_over_workers

    per_rank = {"server0": {"x": 100.0}, "worker0": {"x": 1.0}, "worker1": {"x": 3.0}}
    assert mean_over_workers(per_rank, ["x"]) == {"x": 2.0}


def test_retest_difference_is_over_the_mean_of_the_two():
    """Slip: the mean without its halving. 10 and 12: |a - b| / mean = 2 / 11; a 1 ms against a
    3 ms duration in a 100 ms step is judged against 2 % of the step over 10 %: 2 / 20 = 0.1."""
    from driple.collect.retest import differences

    judged, plain = differences([10.0], [12.0], [0.0], is_duration=False)
    assert judged[0] == pytest.approx(2 / 11) and plain[0] == pytest.approx(2 / 11)
    judged, plain = differences([0.001], [0.003], [0.1], is_duration=True)
    assert judged[0] == pytest.approx(0.1) and plain[0] == pytest.approx(1.0)


def test_conformal_level_has_its_n_plus_one():
    """Slip: ceil(n level) / n. With n = 4 calibration jobs at 50 %: ceil(5 x 0.5) / 4 = 0.75,
    not 0.5; with n = 10 at 90 %: 1.0, not 0.9."""
    from driple.predict import intervals

    assert intervals._quantile_level(4, 0.5) == pytest.approx(0.75)
    assert intervals._quantile_level(10, 0.9) == pytest.approx(1.0)


def test_registry_entry_for_checks_the_checksum(tmp_path):
    """Slip: a listed path taken without its checksum. A checkpoint changed after it was listed
    has no entry."""
    from driple.predict.registry import REGISTRY_FILE, entry_for, sha256

    ckpt = tmp_path / "s" / "inspector.pt"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"weights")
    (tmp_path / REGISTRY_FILE).write_text(json.dumps({"format": "driple-registry", "version": 1, "default": "s",
                                                      "inspectors": [{"setting": "s", "path": "s/inspector.pt",
                                                                      "sha256": sha256(ckpt)}]}))
    assert entry_for(ckpt)["setting"] == "s"
    ckpt.write_bytes(b"weights, changed")
    assert entry_for(ckpt) is None


def test_target_names_are_compared_in_order():
    """Slip: names compared as a set. The declared targets in another order are refused."""
    from driple.inspector.checkpoint import check_targets
    from driple.metrics import label_version, target_names

    names = list(target_names())
    check_targets(names, labels=label_version())
    with pytest.raises(DripleError, match="another order"):
        check_targets(names[1:] + names[:1], labels=label_version())


def test_colocate_slot_memory_is_in_mb_of_1e6_bytes():
    """Slip: MiB. A 2-worker loopback slot on a host of 8,000,000,000 bytes holds 4000 MB."""
    from driple.predict.colocate import slot_capacity

    cap = slot_capacity("cpu-ddp-w2-lo", host_cores=2, host_memory_mb=8000.0)
    assert cap["memory"] == pytest.approx(4000.0)


def test_ddp_first_bucket_is_one_mebibyte():
    """Slip: 1e6 bytes. 2^20 bytes of float32 = 262,144 elements: two gradients of 131,072
    float32 fill the first bucket exactly, a third starts the next."""
    import torch

    from driple.graph.comm import DDP_FIRST_BUCKET_BYTES, ddp_buckets

    assert DDP_FIRST_BUCKET_BYTES == 1 << 20
    buckets = ddp_buckets([(131072,)] * 3, [torch.float32] * 3)
    assert sorted(len(b) for b in buckets) == [1, 2]


def test_the_labelled_window_ends_at_the_last_iterations_end():
    """Slip: the window ending where the last iteration starts. Measured iterations
    [100, 200], [200, 310], [310, 450] ns: the window is [100, 450], not [100, 310]."""
    from types import SimpleNamespace

    from driple.collect.labels.job import measured_window

    tl = SimpleNamespace(measured=np.array([[100, 200], [200, 310], [310, 450]], dtype=np.int64))
    assert measured_window(tl) == (100, 450)
