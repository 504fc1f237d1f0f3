"""The calibration for jobs of model families an inspector did not train on: modes and intervals
chosen on held-out families, the cross-fitted check, and the Predictor's choice per job."""
import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.predict.unseen import SEEN, UNSEEN, UnseenFamilyCalibration, calibrate, cross_fitted

TARGETS = ["step_time", "compute_idle_duration", "tx_burst_amount"]


def held_out(n: int, seed: int) -> dict:
    """A fold's held-out jobs: the roofline exact on the step time, the inspector exact on the
    idle duration, the other off by x1.5; the amount (no roofline) within x1.25 at random."""
    rng = np.random.default_rng(seed)
    y = rng.uniform(1.0, 4.0, size=(n, 3))
    inspector = y * np.c_[np.full(n, 1.5), np.ones(n), rng.uniform(0.8, 1.25, n)]
    roofline = np.c_[y[:, 0], y[:, 1] * 1.5, np.full(n, np.nan)]
    return {"measured": y, "inspector": inspector, "roofline": roofline}


def test_calibrate_chooses_per_target_on_held_out_jobs():
    fold = held_out(30, 0)
    cal = calibrate(TARGETS, fold["measured"], fold["inspector"], fold["roofline"], families=["b", "a"])
    assert cal.modes == {"step_time": "roofline", "compute_idle_duration": "inspector"}
    assert cal.families == ("a", "b")
    joined = cal.join(fold["inspector"], fold["roofline"], TARGETS)
    assert joined[:, :2] == pytest.approx(fold["measured"][:, :2])  # both durations exact once joined
    low, high = cal.intervals.interval(joined)  # no residual left: intervals of no width
    assert low[:, 0] == pytest.approx(fold["measured"][:, 0]) and high[:, 0] == pytest.approx(fold["measured"][:, 0])
    assert np.mean((low[:, 2] <= fold["measured"][:, 2]) & (fold["measured"][:, 2] <= high[:, 2])) >= 0.9
    assert cal.join(fold["inspector"], None, TARGETS) == pytest.approx(fold["inspector"])  # no roofline
    assert cal.is_unseen("c") and cal.is_unseen(None) and not cal.is_unseen("a")


def test_record_round_trip_and_damage():
    fold = held_out(20, 1)
    cal = calibrate(TARGETS, fold["measured"], fold["inspector"], fold["roofline"], families=["a"],
                    source={"file": "x.json"})
    back = UnseenFamilyCalibration.from_dict(cal.to_dict())
    assert back.modes == cal.modes and back.families == ("a",) and back.source == {"file": "x.json"}
    assert back.intervals.to_dict() == cal.intervals.to_dict()
    with pytest.raises(DripleError, match="unseen-family calibration is damaged"):
        UnseenFamilyCalibration.from_dict({"modes": {}})
    with pytest.raises(DripleError, match="unknown roofline mode"):
        UnseenFamilyCalibration({"step_time": "oracle"}, cal.intervals, ["a"])


def test_cross_fitted_calibrates_each_fold_on_the_others():
    folds = [held_out(15, s) for s in range(4)]
    check = cross_fitted(TARGETS, folds)
    assert check["modes"]["step_time"] == {"roofline": 4} and check["modes"]["compute_idle_duration"] == {"inspector": 4}
    assert check["scores"]["step_time"]["mape"] == pytest.approx(0.0, abs=1e-9)
    assert check["scores"]["step_time"]["n"] == 60
    assert check["coverage"]["n"] == 60 and 0.8 <= check["coverage"]["tx_burst_amount"] <= 1.0
    # a fold the others mislead: its step time is where the inspector, not the roofline, is right
    odd = held_out(15, 9)
    odd["inspector"], odd["roofline"][:, 0] = odd["measured"].copy(), odd["measured"][:, 0] * 2
    check = cross_fitted(TARGETS, folds[:3] + [odd])
    # calibrated on the three others it takes the roofline, off x2 on all its 15 of 60 jobs
    assert check["modes"]["step_time"].get("roofline", 0) >= 1
    assert check["scores"]["step_time"]["mape"] >= 100 / 4 - 1e-6
    with pytest.raises(DripleError, match="at least 3"):
        cross_fitted(TARGETS, folds[:2])


def test_nested_choice_decides_on_the_other_folds_only():
    """Four folds where the modes win (roofline exact on the step time): every fold takes them.
    One fold where the inspector is exact and the roofline 2x off cannot make itself chosen as
    is: its own figures never enter its decision."""
    from driple.predict.unseen import nested_choice

    folds = [held_out(15, s) for s in range(4)]
    out = nested_choice(TARGETS, folds)
    assert out["chosen"] == ["modes"] * 4 and out["scores"]["step_time"]["mape"] == pytest.approx(0, abs=1e-9)
    odd = held_out(15, 9)
    odd["inspector"], odd["roofline"][:, 0] = odd["measured"].copy(), odd["measured"][:, 0] * 2
    out = nested_choice(TARGETS, folds + [odd])
    assert out["chosen"][-1] == "modes"  # decided by the four others
    assert out["predicted"].shape == (75, len(TARGETS))  # the folds' rows, in order
    exact = nested_choice(TARGETS, folds)["predicted"]
    assert exact[15:30, 0] == pytest.approx(folds[1]["roofline"][:, 0])  # the step: the roofline's, exact
    from driple.shipping.unseen_families import nested_held_out

    ids = [{"test_job_ids": [f"f{k}-{i}" for i in range(15)]} for k in range(5)]
    kept = nested_held_out(out, ids, TARGETS)
    assert kept["per_job"]["step_time"]["f4-0"] == pytest.approx(out["predicted"][60, 0])
    assert set(kept["per_job"]) == {"step_time"} and kept["mape"]["step_time"] == out["scores"]["step_time"]["mape"]
    with pytest.raises(DripleError, match="at least 4"):
        nested_choice(TARGETS, folds[:3])


def test_modes_over_several_rooflines_name_the_one_they_join():
    """Two rooflines offered: each target takes the one that is right on it, the mode names it,
    and joining applies each from its own predictions; a checkpoint naming a roofline it does not
    carry is refused, and a nested choice between roofline sets picks the one that wins."""
    from driple.predict.unseen import best_option, nested_choice

    fold = held_out(30, 2)
    fold["inspector"][:, 1] *= 1.5  # the inspector off on the idle duration too: only "physical" is right
    rooflines = {"all": fold["roofline"], "physical": np.c_[fold["roofline"][:, 0] * 2, fold["measured"][:, 1],
                                                           np.full(30, np.nan)]}
    cal = calibrate(TARGETS, fold["measured"], fold["inspector"], rooflines, families=["a"])
    assert cal.modes == {"step_time": "roofline:all", "compute_idle_duration": "roofline:physical"}
    joined = cal.join(fold["inspector"], rooflines, TARGETS)
    assert joined[:, :2] == pytest.approx(fold["measured"][:, :2])
    only_all = cal.join(fold["inspector"], {"all": rooflines["all"]}, TARGETS)  # a roofline missing: left out
    assert only_all[:, 1] == pytest.approx(fold["inspector"][:, 1])
    with pytest.raises(DripleError, match="unknown roofline mode"):  # names a roofline it does not carry
        UnseenFamilyCalibration.from_dict(cal.to_dict())
    folds = [held_out(15, s) for s in range(4)]
    options = {"all": folds,
               "bad": [{**f, "roofline": {"x": f["roofline"] * 3}} for f in folds]}
    best, checks = best_option(TARGETS, options)
    assert best == "all" and set(checks) == {"all", "bad"}
    assert nested_choice(TARGETS, options)["chosen"] == ["all"] * 4


# ---------------------------------------------------------------------- in the Predictor
@pytest.fixture
def shipped(registry):
    from driple.inspector.checkpoint import load_inspector
    from driple.predict.registry import resolve

    path, entry = resolve("cpu-ddp-w2-lo")
    return load_inspector(str(path)), entry


def with_calibration(inspector, families, modes, scale=3.0):
    """``inspector`` with an unseen-family calibration of intervals x``scale`` around the
    prediction (wider than its own)."""
    from driple.predict.intervals import ConformalIntervals

    names = list(inspector.targets)
    rng = np.random.default_rng(0)
    pred = rng.uniform(1, 10, size=(40, len(names)))
    ints = ConformalIntervals(0.9, names=names).fit(pred * rng.choice([1 / scale, scale], size=pred.shape), pred)
    inspector.info["unseen_family"] = UnseenFamilyCalibration(modes, ints, families).to_dict()
    return inspector


def test_predictor_uses_the_unseen_calibration_for_other_families_only(shipped, tiny_mlp, monkeypatch):
    import driple.predict.bounds as bounds

    # what is tested is which calibration a job gets; fitting each cycle into its step (which
    # moves the other durations with the step time) is tested on its own
    monkeypatch.setattr(bounds, "hold_together", lambda values, notes, flags: values)
    from driple.hardware.host_speed import HostSpeed
    from driple.inspector.roofline import RooflineMember, design_matrix
    from driple.predict.predictor import Predictor, family_of

    inspector, entry = shipped
    plain = Predictor(inspector, entry)
    seen_graph = plain.build_graph(tiny_mlp(16), torch.randn(4, 8))
    assert family_of(seen_graph) is None
    assert plain.predict_many([seen_graph])[0].calibration is None  # no calibration: no claim

    host = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
    width = design_matrix(np.zeros((1, len(seen_graph.graph_features[0]))), inspector.setting, host).shape[1]
    targets = list(inspector.targets)
    inspector.attach_roofline(RooflineMember(targets, inspector.setting, host,
                                             {"step_time": [1e3] * width}, {"step_time": "inspector"}))
    with_calibration(inspector, families=["mlp"], modes={"step_time": "roofline"})
    p = Predictor(inspector, entry)
    zoo = p.build_graph(tiny_mlp(16), torch.randn(4, 8))
    zoo.summary["family"] = "mlp"  # the same network, as the zoo family the inspector trained on
    user = p.build_graph(tiny_mlp(16), torch.randn(4, 8))
    seen, unseen = p.predict_many([zoo, user])
    assert (seen.calibration, unseen.calibration) == (SEEN, UNSEEN)
    j = targets.index("step_time")
    assert seen.metrics["step_time"] == pytest.approx(float(inspector.predict([zoo])[0, j]), rel=1e-6)
    assert unseen.metrics["step_time"] == pytest.approx(float(inspector.roofline.predict([user])[0, j]), rel=1e-6)
    assert seen.metrics["compute_idle_duration"] == pytest.approx(unseen.metrics["compute_idle_duration"])
    width_of = {prof.calibration: np.log(prof.intervals["compute_idle_duration"][1] /
                                         prof.intervals["compute_idle_duration"][0]) for prof in (seen, unseen)}
    assert width_of[UNSEEN] > width_of[SEEN]  # the unseen-family intervals, not the seen ones
    assert unseen.to_dict()["calibration"] == UNSEEN
    assert type(unseen).from_dict(unseen.to_dict()).calibration == UNSEEN
    assert p.describe()["unseen_family"]["families"] == ["mlp"]
    # a calibration with a roofline of its own joins that one, not the inspector's
    own = RooflineMember(targets, inspector.setting, host, {"step_time": [5e2] * width}, {})
    record = UnseenFamilyCalibration({"step_time": "roofline:physical"}, p.unseen.intervals, ["mlp"],
                                     rooflines={"physical": own}).to_dict()
    inspector.info["unseen_family"] = record
    mine = Predictor(inspector, entry).predict_many([user])[0]
    assert mine.metrics["step_time"] == pytest.approx(float(own.predict([user])[0, j]), rel=1e-6)
    assert mine.metrics["step_time"] == pytest.approx(unseen.metrics["step_time"] / 2, rel=1e-6)
    inspector.info["unseen_family"] = UnseenFamilyCalibration.from_dict(record).to_dict()  # round trip
    assert Predictor(inspector, entry).unseen.rooflines["physical"].weights == own.weights
    # a profile's description names the rooflines, without their rates
    assert Predictor(inspector, entry).describe()["unseen_family"]["rooflines"] == {
        "physical": {"terms": ["all"], "overlap": False}}
    with_calibration(inspector, families=["mlp"], modes={"step_time": "roofline"})
    # by name: a zoo model carries its family, a user's model (or a bare module) is "user"
    assert p.predict_zoo("mlp", batch_size=4, hidden=16, layers=1).calibration == SEEN
    assert p.predict_zoo("resnet", batch_size=2).calibration == UNSEEN
    assert p.predict(tiny_mlp(16), torch.randn(4, 8)).calibration == UNSEEN
    assert p.predict(tiny_mlp(16), torch.randn(4, 8), family="mlp").calibration == SEEN

    from driple.predict.formatting import format_profile

    text = format_profile(unseen, {"unseen_family": {"source": {"coverage": 0.89}, "modes": {}}})
    assert "measured coverage 89% on held-out model families" in text
    assert "did not train on: intervals as calibrated" in text
    assert "did not train on" not in format_profile(seen, {})
    text = format_profile(unseen, p.describe())
    assert "did not train on: durations and intervals as calibrated" in text


def test_a_profile_refuses_an_unknown_calibration():
    from driple.metrics import target_names
    from driple.predict.profile import ResourceProfile

    with pytest.raises(DripleError, match="calibration must be"):
        ResourceProfile("cpu-ddp-w2-lo", "m", dict.fromkeys(target_names(), 1.0), calibration="maybe")


def test_rules_judge_the_modes_on_all_targets_or_on_the_ones_a_roofline_changes():
    from driple.predict.unseen import modes_win, rule_score

    def table(step, idle, amount):
        return {"step_time": {"mape": step}, "compute_idle_duration": {"mape": idle}, "tx_burst_amount": {"mape": amount}}

    as_is, joined = table(12.0, 30.0, 5.0), table(8.0, 31.0, 5.0)
    # over all three targets the median is the step time's; over the durations the mean of two
    assert rule_score(as_is) == 12.0 and rule_score(as_is, "duration-mean") == 21.0
    assert modes_win(joined, as_is) and modes_win(joined, as_is, "duration-mean")
    hidden = table(12.0, 30.0, 20.0)  # the amount is the median: the modes cannot move it
    assert not modes_win(table(8.0, 31.0, 20.0), hidden) and modes_win(table(8.0, 31.0, 20.0), hidden, "duration-median")
    with pytest.raises(DripleError, match="unknown rule"):
        rule_score(as_is, "best")
