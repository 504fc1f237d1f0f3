"""The test-retest rule, worked by hand."""
import numpy as np
import pytest

from driple.collect.retest import differences


def test_amounts_are_judged_relative_to_their_mean():
    judged, plain = differences([100.0, 50.0], [110.0, 50.0], [1.0, 1.0], is_duration=False)
    assert judged.tolist() == pytest.approx([10 / 105, 0.0])
    assert plain.tolist() == pytest.approx([10 / 105, 0.0])


def test_short_durations_are_judged_against_the_step():
    # 4 ms vs 6 ms idle in a 500 ms step: 40 % apart, but 2 ms is 0.4 % of the step.
    # scale = max(5 ms, 0.2 x 500 ms = 100 ms): judged 2 / 100 = 2 %
    judged, plain = differences([0.004], [0.006], [0.5], is_duration=True)
    assert plain[0] == pytest.approx(0.4)
    assert judged[0] == pytest.approx(0.02)
    # a long duration keeps its own scale: 300 vs 360 ms of a 500 ms step -> 60 / 330
    judged, _ = differences([0.30], [0.36], [0.5], is_duration=True)
    assert judged[0] == pytest.approx(0.06 / 0.33)


def test_equal_zeros_agree():
    judged, plain = differences([0.0], [0.0], [0.0], is_duration=True)
    assert judged[0] == 0 and plain[0] == 0
    judged, _ = differences([np.nan], [1.0], [1.0], is_duration=False)
    assert np.isnan(judged[0])
