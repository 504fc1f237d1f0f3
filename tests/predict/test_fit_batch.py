"""The largest-batch search: exact on both sides of the capacity, in few simulations."""
import pytest

from driple.errors import DripleError
from driple.predict.fit_batch import MAX_BATCH, largest_batch


@pytest.mark.parametrize("peak, capacity, expected", [
    (lambda b: 473 + 81.6 * b, 12638, 149),          # resnet50-like: a line
    (lambda b: 5260 + 2900 * b, 12638, 2),            # a large model: few fit
    (lambda b: 100 + 3 * b + 0.001 * b * b, 50000, None),  # curving up
])
def test_the_answer_fits_and_one_more_does_not(peak, capacity, expected):
    found = largest_batch(peak, capacity)
    b = found["batch"]
    assert peak(b) <= capacity < peak(b + 1)
    assert found["peak_mb"] == peak(b) and found["next_peak_mb"] == peak(b + 1)
    if expected is not None:
        assert b == expected
    assert found["traces"] <= 25


def test_a_line_is_solved_in_a_handful_of_simulations():
    assert largest_batch(lambda b: 473 + 81.6 * b, 12638)["traces"] <= 6


def test_nothing_fits_and_memory_that_does_not_limit():
    none = largest_batch(lambda b: 8000 + b, 1000)
    assert none["batch"] == 0 and none["next_peak_mb"] == 8001 and none["traces"] == 1
    free = largest_batch(lambda b: 100 + 1e-6 * b, 12638)
    assert free["unbounded"] and free["batch"] == MAX_BATCH


def test_starting_above_the_answer_still_finds_it():
    assert largest_batch(lambda b: 473 + 81.6 * b, 12638, start=4096)["batch"] == 149


def test_unknown_capacity_is_refused():
    with pytest.raises(DripleError, match="unknown"):
        largest_batch(lambda b: b, 0)
