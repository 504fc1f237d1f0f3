"""Jobs sharing a resource: collision probability, the overload level and capacities, by hand."""
import itertools

import numpy as np
import pytest

from driple.errors import DripleError
from driple.sharing import check_capacity, collision_probability, overload_level


def brute_collision(d):
    """P(>= 2 in burst) by listing every state."""
    total = 0.0
    for s in itertools.product([0, 1], repeat=len(d)):
        if sum(s) >= 2:
            total += np.prod([di if si else 1 - di for di, si in zip(d, s)])
    return total


def test_collision_two_and_three_jobs():
    assert collision_probability([0.2, 0.5]) == pytest.approx(0.1)  # d1 x d2
    assert collision_probability([0.5, 0.5, 0.5]) == pytest.approx(0.5)  # 1 - 1/8 - 3/8
    # 0.2, 0.5, 0.75: none 0.8*0.5*0.25 = 0.1; exactly one 0.025 + 0.1 + 0.3 = 0.425 -> 0.475
    assert collision_probability([0.2, 0.5, 0.75]) == pytest.approx(0.475)
    assert collision_probability([0.3]) == 0.0
    rng = np.random.default_rng(0)
    for n in (2, 3, 5):
        d = rng.uniform(size=n)
        assert collision_probability(d) == pytest.approx(brute_collision(d))


def test_overload_level_tolerates_rounding_only():
    assert overload_level(200.0) > 200.0 and overload_level(200.0) - 200.0 < 1e-6
    assert overload_level(0.5) == pytest.approx(0.5 + 1e-9)


def test_capacity_is_checked_and_ordered_by_the_declaration():
    assert list(check_capacity({"rx": 1, "compute": 2, "tx": None})) == ["compute", "rx"]
    with pytest.raises(DripleError, match="unknown resource"):
        check_capacity({"disk": 1})
    with pytest.raises(DripleError, match="positive"):
        check_capacity({"tx": 0})
    with pytest.raises(DripleError, match="dict"):
        check_capacity([1, 2])
