"""The declaration of resources and targets: names, order, units, and what it refuses."""
import pytest

import driple.metrics as metrics
from driple.errors import DripleError
from driple.metrics import Resource, Target, register_resource, register_target, resource, unit, unregister


def test_the_twelve_burst_idle_targets_in_their_order():
    assert metrics.RESOURCES == ("compute", "memory", "tx", "rx")
    assert metrics.METRICS[:3] == ("compute_burst_amount", "compute_burst_duration", "compute_idle_duration")
    assert len(metrics.METRICS) == 12 and metrics.TARGETS == metrics.target_names()
    assert metrics.UNITS == {"compute": "%", "memory": "%", "tx": "MB/s", "rx": "MB/s"}
    assert unit("tx_burst_amount") == "MB/s" and unit("memory_idle_duration") == "s"
    assert [t.raise_to_training_min for t in metrics.targets()[:3]] == [False, True, True]
    assert resource("tx").words("1314", "cpu") == "1314 MB/s"
    assert resource("compute").words("116", "cpu") == "116% of a core"
    # labels v2 (declared): memory's amount is the peak allocated MB, a level on every host
    assert resource("memory").level_on == {"cpu": "peak allocated", "gpu": "peak allocated"}
    assert resource("memory").amount == "MB" and resource("rx").network
    assert metrics.target_names()[12:] == ("step_time",) and unit("step_time") == "s"
    with pytest.raises(DripleError, match="unknown resource 'disk'"):
        resource("disk")
    with pytest.raises(DripleError, match="unknown target"):
        unit("disk_burst_amount")


def test_a_resource_brings_its_three_targets_and_leaves_with_them():
    disk = Resource("disk", unit="MB/s", title="disk", short="disk", amount_words={}, axis_label={},
                    rate={"cpu": ("bytes", "read_bytes")}, min_gap=0.1, capacity=None)
    register_resource(disk)
    try:
        assert metrics.RESOURCES[-1] == "disk"
        assert metrics.target_names()[-3:] == ("disk_burst_amount", "disk_burst_duration", "disk_idle_duration")
        with pytest.raises(ValueError, match="twice"):
            register_resource(disk)
        with pytest.raises(ValueError, match="undeclared resource"):
            register_target(Target("x", unit="s", label="x", resource="tape"))
    finally:
        unregister("disk")
    assert "disk" not in metrics.RESOURCES and len(metrics.METRICS) == 12
