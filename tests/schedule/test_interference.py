"""The interference model by hand, and on the measured co-runs of datasets/v2*/corun-*."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from driple.schedule.interference import (
    InterferenceModel,
    expected_stretch,
    fit_interference,
)

ROOT = Path(__file__).resolve().parents[2]


def test_two_saturating_jobs_share_fairly():
    # both at 100 % all the time on 100 %: demand 200 -> each at half speed: 2x
    assert InterferenceModel(alpha=0, beta=0).slowdowns_of([100, 100], [1, 1], 100) == pytest.approx([2, 2])
    # alpha adds its share of the overlap, beta the neighbour's mean load / capacity:
    # 1 + 1.19 x 1 x (2 - 1) + 0.12 x 100 / 100 = 2.31
    assert InterferenceModel(alpha=0.19, beta=0.12).slowdowns_of([100, 100], [1, 1], 100) == pytest.approx([2.31, 2.31])


def test_jobs_that_never_overload_do_not_slow_down_without_beta():
    # 40 + 40 <= 100 in every state: stretch 1; a job alone is never slowed down
    assert expected_stretch(np.array([40.0, 40.0]), np.array([0.5, 0.5]), 100.0) == pytest.approx([1, 1])
    assert InterferenceModel(alpha=0.5, beta=0).slowdowns_of([40, 40], [0.5, 0.5], 100) == pytest.approx([1, 1])
    assert InterferenceModel().slowdowns_of([100], [1], 100) == pytest.approx([1])


def test_fit_recovers_the_constants_of_synthetic_slowdowns():
    truth = InterferenceModel(alpha=0.3, beta=0.05)
    cases = [(b, d, 100.0, truth.slowdowns_of(b, d, 100.0)) for b, d in
             (([100, 90], [0.9, 0.5]), ([95, 98], [0.3, 0.8]), ([60, 70], [0.7, 0.9]), ([99, 99], [0.2, 0.1]))]
    fitted = fit_interference(cases)
    assert (fitted.alpha, fitted.beta) == pytest.approx((0.3, 0.05), abs=1e-9)


def test_a_measured_pair_densenet_and_googlenet_on_ddp():
    # datasets/v2/corun-cpu-ddp-w2-1g: DenseNet bs64 + GoogLeNet bs16 measured 2.26x and 2.17x
    from driple.evaluation.schedule import measured_pairs

    pairs = [p for p in measured_pairs(str(ROOT / "datasets"))
             if p["corun"] == "v2/corun-cpu-ddp-w2-1g/corun-ea97c2cce9"]
    assert len(pairs) == 1
    p = pairs[0]
    assert p["slowdown"] == pytest.approx([2.26, 2.17], abs=0.01)
    pred = InterferenceModel().slowdowns_of(p["burst"], p["duty"], p["capacity"])
    assert np.abs(pred / np.array(p["slowdown"]) - 1).max() < 0.10


def test_median_error_on_all_measured_pairs_is_within_ten_percent():
    from driple.evaluation.schedule import check_interference

    result = check_interference(str(ROOT / "datasets"))
    assert result["pairs"] == 24 and result["jobs"] == 48
    assert result["shipped"]["median_error"] < 0.10
    assert result["leave_one_out"]["median_error"] < 0.10
    # the shipped constants are the ones a refit on all pairs gives
    assert (result["shipped"]["alpha"], result["shipped"]["beta"]) == pytest.approx(
        (result["refitted"]["alpha"], result["refitted"]["beta"]))
