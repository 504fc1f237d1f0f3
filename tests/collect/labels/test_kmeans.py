"""Burst/idle labeller on toy series whose answers are worked out by hand in each test."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from driple.collect.labels.kmeans import SHARES, BurstIdleLabeller, label_rates
from driple.errors import DripleError
from driple.metrics import METRICS, RESOURCES


def test_init_only_stores_params():
    lab = BurstIdleLabeller(random_state=3, min_gap=0.5)
    assert (lab.random_state, lab.min_gap) == (3, 0.5)
    assert not [a for a in vars(lab) if a.endswith("_")]
    assert "min_gap=0.5" in repr(lab)


def test_two_bursts_fixed_period():
    # runs: idle 2 (edge) | burst 3 | idle 3 | burst 3 | idle 1 (edge); dt = 0.5 s
    x = [0, 0, 8, 8, 8, 0, 0, 0, 8, 8, 8, 0]
    lab = BurstIdleLabeller(trim=0)
    assert lab.fit(x, 0.5) is lab  # fit returns the estimator itself, not a copy
    assert lab.labels_.tolist() == [0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0]
    assert lab.centers_ == pytest.approx((0.0, 8.0))
    assert lab.threshold_ == pytest.approx(4.0)
    assert lab.burst_amount_ == pytest.approx(8.0)
    assert lab.burst_duration_ == pytest.approx(1.5)  # both bursts are inside: 3 x 0.5 s
    assert lab.idle_duration_ == pytest.approx(1.5)  # only the middle idle run is inside
    assert lab.window_ == pytest.approx(6.0)
    # BIB: 6 burst samples + the 3 idle between them = 9/12; I: the two edge idles = 3/12
    assert lab.shares_ == pytest.approx({"I": 0.25, "BIB": 0.75, "B": 0.0})
    assert lab.runs_["n"].tolist() == [2, 3, 3, 3, 1]
    assert lab.runs_["edge"].tolist() == [True, False, False, False, True]


def test_burst_amount_trims_transition_samples():
    # burst runs [6, 9, 6] and [9, 9, 9]: the plain mean is 48/6 = 8; trimming the first and
    # last sample of each run leaves [9] and [9] -> 9
    x = [0, 0, 6, 9, 6, 0, 0, 0, 9, 9, 9, 0]
    assert BurstIdleLabeller(trim=0).fit(x, 0.01).burst_amount_ == pytest.approx(8.0)
    assert BurstIdleLabeller(trim=1).fit(x, 0.01).burst_amount_ == pytest.approx(9.0)
    # a 2-sample run is too short to trim: [0, 5, 7, 0] -> 6 with or without trim
    assert BurstIdleLabeller(trim=1).fit([0, 5, 7, 0, 0], 0.01).burst_amount_ == pytest.approx(6.0)


def test_time_weighted_with_irregular_dt():
    # x = 0,10,0,10,0 lasting 1,1,2,3,1 s: bursts 1 s and 3 s (both inside) -> 2 s;
    # inner idle 2 s; BIB = 1+2+3 = 6 of 8 s; I = 2 of 8 s
    lab = BurstIdleLabeller(trim=0).fit([0, 10, 0, 10, 0], [1, 1, 2, 3, 1])
    assert lab.burst_duration_ == pytest.approx(2.0)
    assert lab.idle_duration_ == pytest.approx(2.0)
    assert lab.burst_amount_ == pytest.approx(10.0)
    assert lab.shares_ == pytest.approx({"I": 0.25, "BIB": 0.75, "B": 0.0})


def test_time_weighted_amount():
    # bursts 4 (1 s) and 8 (3 s): time-weighted mean = (4 + 24) / 4 = 7, not (4 + 8) / 2
    lab = BurstIdleLabeller(trim=0).fit([0, 4, 0, 8, 0], [1, 1, 1, 3, 1])
    assert lab.burst_amount_ == pytest.approx(7.0)


def test_burst_is_the_higher_centre_even_when_in_minority_or_majority():
    mostly_busy = [9, 9, 9, 1, 9, 9, 9, 9, 1, 9]
    lab = BurstIdleLabeller().fit(mostly_busy, 1.0)
    assert lab.labels_.tolist() == [1, 1, 1, 0, 1, 1, 1, 1, 0, 1]
    assert lab.centers_ == pytest.approx((1.0, 9.0))
    # inner runs: bursts [9 9 9 9] = 4 s (the edge runs 3 s and 1 s are cut); idles 1 s
    assert lab.burst_duration_ == pytest.approx(4.0)
    assert lab.idle_duration_ == pytest.approx(1.0)
    # every run takes part in a burst-idle-burst cycle
    assert lab.shares_ == pytest.approx({"I": 0.0, "BIB": 1.0, "B": 0.0})


def test_only_edge_runs_are_used_when_nothing_is_inside():
    # burst 3 s then idle 2 s, both cut by the window: use them as they are
    lab = BurstIdleLabeller().fit([5, 5, 5, 0, 0], 1.0)
    assert lab.burst_duration_ == pytest.approx(3.0)
    assert lab.idle_duration_ == pytest.approx(2.0)
    # one burst and no idle between bursts: B = 3/5, I = 2/5
    assert lab.shares_ == pytest.approx({"I": 0.4, "BIB": 0.0, "B": 0.6})


@pytest.mark.parametrize("value", [7.0, 0.0])
def test_constant_series(value):
    lab = BurstIdleLabeller().fit(np.full(50, value), 0.01)
    assert lab.degenerate_
    if value:  # one long burst at the level
        assert (lab.burst_amount_, lab.burst_duration_, lab.idle_duration_) == pytest.approx((7.0, 0.5, 0.0))
        assert lab.shares_ == {"I": 0.0, "BIB": 0.0, "B": 1.0}
        assert lab.threshold_ == -math.inf
    else:  # silence: all idle
        assert (lab.burst_amount_, lab.burst_duration_, lab.idle_duration_) == pytest.approx((0.0, 0.0, 0.5))
        assert lab.shares_ == {"I": 1.0, "BIB": 0.0, "B": 0.0}
        assert lab.threshold_ == math.inf


def test_min_gap_merges_close_levels():
    # centres 50 and 50.4 are 0.4 apart < min_gap 1: one level, burst at the mean 50.2
    x = [50, 50.4] * 10
    lab = BurstIdleLabeller(min_gap=1.0).fit(x, 0.1)
    assert lab.degenerate_ and lab.labels_.min() == 1
    assert lab.burst_amount_ == pytest.approx(50.2)
    assert lab.burst_duration_ == pytest.approx(2.0)
    assert lab.idle_duration_ == 0.0
    # without min_gap the two levels are split
    assert not BurstIdleLabeller().fit(x, 0.1).degenerate_
    # a level within min_gap of zero is idle: 0 / 0.05 traffic with min_gap 0.1
    quiet = BurstIdleLabeller(min_gap=0.1).fit([0, 0.05] * 10, 0.1)
    assert (quiet.burst_duration_, quiet.idle_duration_) == pytest.approx((0.0, 2.0))
    assert quiet.burst_amount_ == pytest.approx(0.025)


def test_single_sample_and_seed_reproducible():
    one = BurstIdleLabeller().fit([3.0], 0.01)
    assert (one.burst_amount_, one.burst_duration_, one.idle_duration_) == pytest.approx((3.0, 0.01, 0.0))
    rng = np.random.default_rng(0)
    x = np.where(rng.random(500) < 0.3, 80 + rng.normal(0, 5, 500), rng.normal(5, 2, 500))
    a = BurstIdleLabeller(random_state=1).fit(x, 0.01)
    b = BurstIdleLabeller(random_state=1).fit(x, 0.01)
    assert np.array_equal(a.labels_, b.labels_) and a.burst_amount_ == b.burst_amount_


def test_bad_input():
    with pytest.raises(DripleError):
        BurstIdleLabeller().fit([], 0.01)
    with pytest.raises(DripleError):
        BurstIdleLabeller().fit([1.0, np.nan], 0.01)
    with pytest.raises(DripleError):
        BurstIdleLabeller().fit([1.0, 2.0], [0.01])
    with pytest.raises(DripleError):
        BurstIdleLabeller().fit([1.0, 2.0], 0.0)


def _rates(n=100, dt=0.01):
    t = np.arange(1, n + 1) * dt
    i = np.arange(n)
    return pd.DataFrame(
        {
            "compute": np.where(i % 10 < 4, 100.0, 0.0),  # 40 ms burst, 60 ms idle
            "memory": np.full(n, 2.0),  # flat
            "tx": np.where(i % 20 < 5, 500.0, 0.0),  # 50 ms at 500 MB/s every 200 ms
            "rx": np.zeros(n),  # silent
        },
        index=pd.Index(t, name="t"),
    )


def test_label_rates_keys_and_values():
    out = label_rates(_rates())
    assert list(out)[:12] == list(METRICS)
    assert list(out)[12:] == [f"{r}_share_{s}" for r in RESOURCES for s in SHARES]
    assert all(np.isfinite(v) for v in out.values())
    assert out["compute_burst_amount"] == pytest.approx(100.0)
    assert out["compute_burst_duration"] == pytest.approx(0.04)
    assert out["compute_idle_duration"] == pytest.approx(0.06)
    assert (out["memory_burst_amount"], out["memory_burst_duration"], out["memory_idle_duration"]) == pytest.approx((2.0, 1.0, 0.0))
    assert out["tx_burst_amount"] == pytest.approx(500.0)
    assert (out["tx_burst_duration"], out["tx_idle_duration"]) == pytest.approx((0.05, 0.15))
    assert (out["rx_burst_amount"], out["rx_burst_duration"], out["rx_idle_duration"]) == pytest.approx((0.0, 0.0, 1.0))
    assert out["rx_share_I"] == 1.0 and out["memory_share_B"] == 1.0
    # compute: last idle run (samples 94..99) is cut -> I = 6/100, the rest is BIB
    assert out["compute_share_I"] == pytest.approx(0.06)
    assert out["compute_share_BIB"] == pytest.approx(0.94)


def test_label_rates_window():
    df = _rates()
    # t in [0.205, 0.595] holds samples 20..58: tx bursts at 20-24 and 40-44, idle 25-39, 45-58
    out = label_rates(df, 0.205, 0.595)
    assert out["tx_burst_duration"] == pytest.approx(0.05)
    assert out["tx_idle_duration"] == pytest.approx(0.15)  # 45-58 is cut by the window edge
    assert out["rx_idle_duration"] == pytest.approx(0.39)
    with pytest.raises(DripleError):
        label_rates(df, 5.0, 6.0)
    with pytest.raises(DripleError):
        label_rates(df.drop(columns="rx"))


def test_label_rates_drops_nan_rows():
    df = _rates()
    df.iloc[:3, df.columns.get_loc("compute")] = np.nan  # e.g. before the first GPU sample
    out = label_rates(df)
    assert np.isfinite(out["compute_burst_amount"]) and out["compute_burst_amount"] == pytest.approx(100.0)
