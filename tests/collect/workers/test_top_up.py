"""Topping up a measurement that the warm-up's plan left shorter than asked."""
from __future__ import annotations

from driple.collect.workers.common import top_up_iterations


def test_long_enough_needs_nothing():
    assert top_up_iterations(3.2, 100, 3.0, None) == 0
    assert top_up_iterations(3.0, 100, 3.0, 240.0) == 0


def test_short_measurement_is_topped_up_at_the_measured_rate():
    # 400 iterations in 1.4 s (3.5 ms each); 1.6 s more is 458 iterations (rounded up)
    assert top_up_iterations(1.4, 400, 3.0, None) == 458


def test_top_up_stays_within_the_cap():
    # 10 iterations took 2 s (0.2 s each); 6 s asked but the cap is 3 s: 5 more fit
    assert top_up_iterations(2.0, 10, 6.0, 3.0) == 5
    assert top_up_iterations(2.0, 10, 6.0, 2.0) == 0


def test_degenerate_inputs():
    assert top_up_iterations(0.0, 0, 3.0, None) == 0
    assert top_up_iterations(0.0, 10, 3.0, None) == 0
