"""The per-op-class roofline: its design columns by hand, and its rates recovered exactly when
the durations are such sums."""
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.graph.summary_features import BASE_FEATURES, GRAPH_FEATURES, OP_CLASSES, feature_vector
from driple.inspector.estimator_registry import make_estimator
from driple.inspector.roofline import (COMM_COLUMN, MESSAGE_COLUMN, MESSAGE_OVERHEAD_S, OP_OVERHEAD_S,
                                      OVERHEAD_COLUMN, design_matrix, is_duration)
from driple.inspector.roofline_estimator import RooflineEstimator
from driple.metrics import target_names

HOST = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e8, memory_bytes=4e9, loopback_bytes_per_s=1e7)
SETTING = "cpu-ddp-w2-lo"


def features(conv_gflops=0.0, other_traffic_mb=0.0, comm_mb=0.0, compute_ops=0.0, matmul_gflops=0.0,
             messages=0.0):
    f = dict.fromkeys(GRAPH_FEATURES, 0.0)
    f.update({"gflops_conv": conv_gflops, "gflops_matmul": matmul_gflops,
              "traffic_mb_other": other_traffic_mb, "comm_tx_mb": comm_mb, "comm_rx_mb": comm_mb,
              "compute_ops": compute_ops, "comm_messages": messages, "workers": 2.0})
    return f


def test_design_columns_by_hand():
    X = design_matrix(np.array([feature_vector(features(2.0, 50.0, 3.0, 400.0, messages=6.0))]), SETTING, HOST)
    classes = list(OP_CLASSES)
    expected = np.zeros(2 * len(classes) + 3)
    expected[classes.index("conv")] = 2.0  # 2 GFLOP at 1 GFLOP/s
    expected[len(classes) + classes.index("other")] = 0.5  # 50 MB at 100 MB/s
    expected[COMM_COLUMN] = 0.3  # all-reduce: max(tx, rx) 3 MB over a 10 MB/s loopback
    expected[OVERHEAD_COLUMN] = 400 * OP_OVERHEAD_S
    expected[MESSAGE_COLUMN] = 6 * MESSAGE_OVERHEAD_S  # six buckets
    assert X[0] == pytest.approx(expected)
    assert is_duration("compute_idle_duration") and is_duration("step_time")
    assert not is_duration("memory_burst_amount")
    assert GRAPH_FEATURES[:len(BASE_FEATURES)] == BASE_FEATURES  # old checkpoints pick by name


class Jobs:
    """A dataset of graphs with graph-level features and targets, as the estimators read it."""

    def __init__(self, rows, targets):
        self.graphs = [Data(graph_features=torch.tensor([feature_vector(r)], dtype=torch.float64))
                       for r in rows]
        self.targets = np.asarray(targets, dtype=np.float64)
        self.target_names = list(target_names())
        self.setting = SETTING
        self.job_ids = [f"job{i}" for i in range(len(rows))]

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        return self.graphs[i]


def test_rates_recovered_on_unseen_jobs():
    """Every duration is 2 x conv term + 3 x other-traffic term + the communication + 0.5 x the
    op overhead: fitted on 8 jobs, the 4 others are predicted exactly; amounts stay NaN."""
    rng = np.random.default_rng(0)
    rows = [features(*rng.uniform(0.1, 2.0, 2) * [1, 100], rng.uniform(0.1, 1), rng.uniform(50, 500),
                     rng.uniform(0.1, 1)) for _ in range(12)]
    X = design_matrix(np.array([feature_vector(r) for r in rows]), SETTING, HOST)
    classes = list(OP_CLASSES)
    w = np.zeros(X.shape[1])
    w[classes.index("conv")], w[len(classes) + classes.index("other")], w[COMM_COLUMN], w[OVERHEAD_COLUMN] = \
        2.0, 3.0, 1.0, 0.5
    names = list(target_names())
    y = np.where([is_duration(t) for t in names], (X @ w)[:, None], 7.0)
    jobs = Jobs(rows, y)
    est = RooflineEstimator(host=HOST).fit(jobs, range(8))
    pred = est.predict(jobs, range(8, 12))
    durations = [j for j, t in enumerate(names) if is_duration(t)]
    assert pred[:, durations] == pytest.approx(y[8:, durations], rel=1e-6)
    assert np.isnan(np.delete(pred, durations, axis=1)).all()
    assert est.weights_["step_time"][classes.index("matmul")] == pytest.approx(0.0, abs=1e-9)
    assert make_estimator("roofline").name == "roofline"


def test_a_cost_per_message_is_recovered_and_counts_with_the_compute():
    """Jobs whose step is compute (2 x conv term + 3 x the message term: a wait per collective call)
    and communication with half the shorter hidden: the fit recovers the message rate and predicts
    held-out jobs exactly; without the term (a checkpoint from before it, fitted again alike) it
    cannot, and its member says so through a checkpoint's state."""
    from driple.inspector.roofline import RooflineMember, fit_member, overlapped

    rng = np.random.default_rng(5)
    rows = [features(conv_gflops=rng.uniform(0.1, 1.0), comm_mb=rng.uniform(0.5, 20.0),
                     messages=float(rng.integers(1, 60))) for _ in range(16)]
    X = design_matrix(np.array([feature_vector(r) for r in rows]), SETTING, HOST)
    w = np.zeros(X.shape[1])
    w[list(OP_CLASSES).index("conv")], w[COMM_COLUMN], w[MESSAGE_COLUMN] = 2.0, 1.0, 3.0
    step = overlapped(X, w, 0.5)
    compute = 2.0 * X[:, list(OP_CLASSES).index("conv")] + 3.0 * X[:, MESSAGE_COLUMN]
    assert step == pytest.approx(compute + X[:, COMM_COLUMN] - 0.5 * np.minimum(compute, X[:, COMM_COLUMN]))
    names = list(target_names())
    y = np.repeat(step[:, None], len(names), 1)
    member = fit_member(np.array([feature_vector(r) for r in rows[:12]]), y[:12], names, SETTING, HOST, overlap=True)
    jobs = [Data(graph_features=torch.tensor([feature_vector(r)], dtype=torch.float64)) for r in rows[12:]]
    j = names.index("step_time")
    assert member.messages and member.weights["step_time"][MESSAGE_COLUMN] == pytest.approx(3.0, rel=1e-6)
    assert member.predict(jobs)[:, j] == pytest.approx(step[12:], rel=1e-6)
    without = fit_member(np.array([feature_vector(r) for r in rows[:12]]), y[:12], names, SETTING, HOST,
                         overlap=True, messages=False)
    assert without.weights["step_time"][MESSAGE_COLUMN] == 0.0
    assert not np.allclose(without.predict(jobs)[:, j], step[12:], rtol=1e-3)
    assert RooflineMember.from_state(member.to_state()).messages
    old = without.to_state()
    assert "messages" not in old  # a checkpoint from before the term reads as it did
    old["weights"] = {t: v[:MESSAGE_COLUMN] for t, v in old["weights"].items()}  # its shorter rows
    again = RooflineMember.from_state(old)
    assert not again.messages and again.predict(jobs) == pytest.approx(without.predict(jobs), nan_ok=True)
    newer = member.to_state()
    newer["weights"] = {t: v + [1.0] for t, v in newer["weights"].items()}  # a term this driple lacks
    with pytest.raises(DripleError, match="newer driple"):
        RooflineMember.from_state(newer)


def test_physical_terms_weight_only_flops_of_compute_classes_and_traffic_of_the_rest():
    """Jobs whose step time is 2 x conv FLOP term + 3 x other-traffic term + 5 x conv traffic
    term: the full fit recovers all three rates; the physical fit may not weight conv traffic
    (nor other-class FLOPs), so its conv-traffic weight is 0 and the member records its terms,
    through a checkpoint's state too."""
    from driple.inspector.roofline import COMPUTE_CLASSES, RooflineMember, term_columns

    classes, k = list(OP_CLASSES), len(OP_CLASSES)
    mask = term_columns("physical")
    assert [mask[classes.index(c)] for c in classes] == [c in COMPUTE_CLASSES for c in classes]
    assert [mask[k + classes.index(c)] for c in classes] == [c not in COMPUTE_CLASSES for c in classes]
    assert mask[[COMM_COLUMN, OVERHEAD_COLUMN, MESSAGE_COLUMN]].all() and term_columns("all").all()
    assert not term_columns("all", messages=False)[MESSAGE_COLUMN]
    with pytest.raises(DripleError, match="unknown roofline terms"):
        term_columns("some")
    rng = np.random.default_rng(2)
    rows = [{**features(*rng.uniform(0.1, 2.0, 2) * [1, 100]), "traffic_mb_conv": rng.uniform(1, 100)}
            for _ in range(10)]
    X = design_matrix(np.array([feature_vector(r) for r in rows]), SETTING, HOST)
    w = np.zeros(X.shape[1])
    w[classes.index("conv")], w[k + classes.index("other")], w[k + classes.index("conv")] = 2.0, 3.0, 5.0
    names = list(target_names())
    jobs = Jobs(rows, np.repeat((X @ w)[:, None], len(names), 1))
    full = RooflineEstimator(host=HOST).fit(jobs, range(10))
    assert full.weights_["step_time"][k + classes.index("conv")] == pytest.approx(5.0, rel=1e-6)
    physical = RooflineEstimator(host=HOST, terms="physical").fit(jobs, range(10))
    assert physical.name == "roofline-physical" and make_estimator("roofline-physical").terms == "physical"
    both = make_estimator("roofline-physical-overlap")
    assert both.name == "roofline-physical-overlap" and both.terms == "physical" and both.overlap
    assert physical.weights_["step_time"][k + classes.index("conv")] == 0.0
    assert physical.weights_["step_time"][classes.index("conv")] > 2.0  # the FLOP rate takes the traffic's share
    assert physical.member_.terms["step_time"] == "physical" and full.member_.terms == {}
    again = RooflineMember.from_state(physical.member_.to_state())
    assert again.terms == physical.member_.terms and again.weights == physical.member_.weights
    assert "terms" not in full.member_.to_state()  # checkpoints of every term read as before


def test_a_class_no_training_job_has_takes_the_rates_of_the_class_it_runs_like():
    """Trained on conv + matmul jobs (step = 2 x conv term + 4 x matmul term), a job made only of
    a recurrent layer (1 GFLOP: 1 s at the host's peak) is charged at matmul's rate, 4 s, not 0;
    with a recurrent job among the training jobs its own rate is fitted."""
    from driple.graph.summary_features import feature_vector as fv
    from driple.inspector.roofline import UNSEEN_CLASS_RATES, fill_unseen_classes

    assert UNSEEN_CLASS_RATES["rnn"] == "matmul"
    rng = np.random.default_rng(1)
    rows = [features(conv_gflops=rng.uniform(0.1, 2), matmul_gflops=rng.uniform(0.1, 2)) for _ in range(6)]
    rnn_job = {**features(), "gflops_rnn": 1.0}
    classes = list(OP_CLASSES)
    w = np.zeros(2 * len(classes) + 3)
    w[classes.index("conv")], w[classes.index("matmul")] = 2.0, 4.0
    names = list(target_names())
    X = design_matrix(np.array([fv(r) for r in rows]), SETTING, HOST)
    est = RooflineEstimator(host=HOST).fit(Jobs(rows, np.repeat((X @ w)[:, None], len(names), 1)), range(6))
    step = names.index("step_time")
    assert est.predict(Jobs([rnn_job], np.ones((1, len(names)))))[0, step] == pytest.approx(4.0, rel=1e-6)
    # seen: the fitted weight stays (here a recurrent job of 3 s per GFLOP among the training jobs)
    w_rnn = fill_unseen_classes(w + np.eye(len(w))[classes.index("rnn")] * 3.0,
                                design_matrix(np.array([fv(rnn_job)]), SETTING, HOST))
    assert w_rnn[classes.index("rnn")] == 3.0


def test_nothing_to_fit_on_is_a_clear_error():
    names = list(target_names())
    jobs = Jobs([features(1.0)], np.zeros((1, len(names))))
    with pytest.raises(DripleError, match="no training job with a positive measured value"):
        RooflineEstimator(host=HOST).fit(jobs, [0])


def test_modes_chosen_by_validation_mape():
    from driple.inspector.roofline import apply_modes, choose_modes

    targets = ["step_time", "compute_idle_duration", "tx_burst_duration", "memory_burst_amount"]
    measured = np.array([[2.0, 1.0, 4.0, 5.0], [4.0, 1.0, 4.0, 5.0]])
    inspector = np.array([[1.0, 1.0, 2.0, 9.0], [2.0, 1.0, 2.0, 9.0]])
    roofline = np.array([[2.0, 3.0, 8.0, np.nan], [4.0, 3.0, 8.0, np.nan]])
    modes = choose_modes(targets, inspector, roofline, measured)
    # step time: the roofline is exact; idle: the inspector is; tx: sqrt(2 x 8) = 4 is exact
    assert modes == {"step_time": "roofline", "compute_idle_duration": "inspector", "tx_burst_duration": "mean"}
    assert apply_modes(inspector, roofline, targets, modes) == pytest.approx(
        np.array([[2.0, 1.0, 4.0, 9.0], [4.0, 1.0, 4.0, 9.0]]))


def test_an_inspector_with_a_roofline_keeps_it_in_its_checkpoint(dataset, tmp_path):
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.roofline import RooflineMember
    from driple.inspector.splits import random_split
    from driple.inspector.train import preset, train_inspector

    split = random_split(dataset)
    config, options = preset("hybrid", hidden_channels=8, num_repeats=2, epochs=3, patience=3, networks=1)
    host = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
    model = train_inspector(dataset[split.train], dataset[split.val], options, config, host=host,
                            progress=False)
    joined = with_roofline(model, dataset, split)
    assert model.roofline is None and joined.configuration_name == "hybrid+roofline"
    member = joined.roofline
    assert set(member.modes) == {t for t in model.targets if is_duration(t)}
    graphs = [dataset[i] for i in split.test]
    network, roof = model.predict(graphs), member.predict(graphs)
    for j, t in enumerate(model.targets):
        mode = member.modes.get(t, "inspector")
        want = {"inspector": network[:, j], "roofline": roof[:, j],
                "mean": np.sqrt(network[:, j] * roof[:, j])}[mode]
        assert joined.predict(graphs)[:, j] == pytest.approx(want, rel=1e-9), t
    loaded = load_inspector(joined.save(str(tmp_path / "joined")))
    assert isinstance(loaded.roofline, RooflineMember) and loaded.roofline.modes == member.modes
    assert np.array_equal(loaded.predict(graphs), joined.predict(graphs))

    state = member.to_state()
    state["modes"] = {"step_time": "oracle"}
    with pytest.raises(DripleError, match="unknown roofline mode"):
        RooflineMember.from_state(state)
    with pytest.raises(DripleError, match="the roofline predicts"):
        model.attach_roofline(RooflineMember(model.targets[:-1], "cpu-ddp-w2-lo", host, {}, {}))

    from driple.inspector.evaluate import _inspector_factory, evaluate
    from driple.inspector.roofline_estimator import WithRoofline

    assert isinstance(_inspector_factory(joined, dataset, None, None, 0, None, None, False, None)(split),
                      WithRoofline)
    report = evaluate(joined, dataset, split="family", baselines=["roofline"], families=["alpha"],
                      overrides={"epochs": 2}, progress=False)
    assert report["estimators"] == ["inspector", "roofline"] and report["n_test"] > 0


def _overlap_jobs(alpha, n=14, seed=3):
    """Jobs whose durations are compute (2 x conv term + 0.5 x op overhead) and communication
    with ``alpha`` of the shorter hidden: the communication as long as the compute or shorter or
    longer, so that both sides are the shorter on some jobs."""
    rng = np.random.default_rng(seed)
    rows = [features(conv_gflops=rng.uniform(0.1, 1.0), comm_mb=rng.uniform(0.5, 20.0),
                     compute_ops=rng.uniform(50, 500)) for _ in range(n)]
    X = design_matrix(np.array([feature_vector(r) for r in rows]), SETTING, HOST)
    compute = 2.0 * X[:, list(OP_CLASSES).index("conv")] + 0.5 * X[:, OVERHEAD_COLUMN]
    comm = X[:, COMM_COLUMN]
    return rows, X, compute + comm - alpha * np.minimum(compute, comm)


def test_overlap_by_hand():
    from driple.inspector.roofline import overlapped

    X = np.zeros((2, 2 * len(OP_CLASSES) + 3))
    X[:, 0] = [3.0, 1.0]  # compute seconds
    X[:, COMM_COLUMN] = [1.0, 4.0]  # communication seconds
    w = np.zeros(X.shape[1])
    w[0] = w[COMM_COLUMN] = 1.0
    # 3 + 1 - 0.5 x 1 = 3.5 (half the communication hidden); 1 + 4 - 0.5 x 1 = 4.5 (half the compute)
    assert overlapped(X, w, 0.5) == pytest.approx([3.5, 4.5])
    assert overlapped(X, w, 1.0) == pytest.approx([3.0, 4.0])  # all of the shorter: the longer alone
    assert overlapped(X, w) == pytest.approx(X @ w)


def test_overlap_fraction_and_rates_recovered_on_unseen_jobs():
    """Durations with half the shorter of compute and communication hidden: the overlap fit finds
    alpha 0.5 and predicts 4 held-out jobs exactly; the plain sum cannot (it over-predicts)."""
    rows, X, step = _overlap_jobs(0.5)
    names = list(target_names())
    jobs = Jobs(rows, np.repeat(step[:, None], len(names), 1))
    est = RooflineEstimator(host=HOST, overlap=True).fit(jobs, range(10))
    j = names.index("step_time")
    assert est.member_.overlap["step_time"] == 0.5 and est.name == "roofline-overlap"
    assert est.predict(jobs, range(10, 14))[:, j] == pytest.approx(step[10:], rel=1e-6)
    plain = RooflineEstimator(host=HOST).fit(jobs, range(10)).predict(jobs, range(10, 14))[:, j]
    assert np.abs(plain / step[10:] - 1).max() > 0.05
    assert make_estimator("roofline-overlap").name == "roofline-overlap"


def test_no_overlap_is_the_plain_fit_and_old_states_read_the_same():
    """Jobs that are plain sums: the overlap fit keeps alpha 0 and the NNLS weights; a member's
    state without ``overlap`` (checkpoints from before it) predicts the plain sum."""
    from driple.inspector.roofline import RooflineMember, fit_overlap, fit_rates

    rows, X, step = _overlap_jobs(0.0)
    w, alpha = fit_overlap(X, step)
    assert alpha == 0.0 and w == pytest.approx(fit_rates(X, step))
    names = list(target_names())
    member = RooflineMember(names, SETTING, HOST, {"step_time": list(w)}, {"step_time": "roofline"},
                            {"step_time": 0.25})
    state = member.to_state()
    assert state["overlap"] == {"step_time": 0.25}
    old = {k: v for k, v in state.items() if k != "overlap"}
    jobs = Jobs(rows, np.ones((len(rows), len(names))))
    j = names.index("step_time")
    assert RooflineMember.from_state(old).predict(jobs.graphs)[:, j] == pytest.approx(X @ w)
    assert RooflineMember.from_state(state).predict(jobs.graphs)[:, j] == pytest.approx(
        member.predict(jobs.graphs)[:, j])
    with pytest.raises(DripleError, match="between 0 and 1"):
        RooflineMember(names, SETTING, HOST, {"step_time": list(w)}, {}, {"step_time": 1.5})


def test_an_evaluation_keeps_the_network_predictions_and_rejoin_reproduces_its_inspector():
    """A network joined with a roofline (WithRoofline over the training mean here), evaluated on
    two folds: each fold keeps the network's own validation and test predictions; joining a
    roofline fitted again on them (rejoin) gives the evaluated predictions exactly, without
    refitting the network; another roofline (physical terms) gives its own."""
    from driple.inspector.estimators import Estimator
    from driple.inspector.evaluate import run_folds, to_json
    from driple.inspector.roofline_estimator import WithRoofline, rejoin
    from driple.inspector.splits import Split

    rng = np.random.default_rng(3)
    rows = [{**features(*rng.uniform(0.1, 2.0, 2) * [1, 100], 0.2, rng.uniform(50, 500)),
             "traffic_mb_conv": rng.uniform(1, 50)} for _ in range(16)]
    X = design_matrix(np.array([feature_vector(r) for r in rows]), SETTING, HOST)
    classes, k = list(OP_CLASSES), len(OP_CLASSES)
    w = np.zeros(X.shape[1])
    w[classes.index("conv")], w[k + classes.index("other")], w[k + classes.index("conv")] = 2.0, 3.0, 4.0
    names = list(target_names())
    y = np.repeat((X @ w * rng.uniform(0.8, 1.2, len(rows)))[:, None], len(names), 1)
    jobs = Jobs(rows, y)
    folds = [Split("family", train=list(range(0, 8)), val=list(range(8, 12)), test=list(range(12, 16)), held_out="a"),
             Split("family", train=list(range(8, 16)), val=list(range(0, 4)), test=list(range(4, 8)), held_out="b")]
    class TrainMean(Estimator):
        name = "mean"

        def fit(self, dataset, train, val):
            self.mean_ = np.asarray(dataset.targets)[list(train)].mean(0)
            return self

        def predict(self, dataset, idx=None):
            n = len(dataset) if idx is None else len(idx)
            return np.repeat(self.mean_[None], n, 0)

    report = run_folds(jobs, folds, {"inspector": lambda fold: WithRoofline(TrainMean(), host=HOST)},
                       progress=False)
    kept = [{"test_job_ids": f["test_job_ids"], **to_json(f["network"]["inspector"])} for f in report["folds"]]
    assert kept[0]["val_job_ids"] == ["job8", "job9", "job10", "job11"] and len(kept[0]["train_job_ids"]) == 8
    assert np.allclose(kept[1]["test"], y[8:16].mean(0))  # the network: the training mean
    assert "network" not in to_json(report)["folds"][0]  # the CLI's JSON stays as it was
    again = rejoin(jobs, kept, HOST)
    for fold, p in zip(report["folds"], again):
        assert p == pytest.approx(fold["predictions"]["inspector"], rel=1e-12)
    physical = rejoin(jobs, kept, HOST, terms="physical")
    assert not np.allclose(np.concatenate(physical), np.concatenate(again), equal_nan=True)
    with pytest.raises(DripleError, match="not in"):
        rejoin(jobs, [{**kept[0], "test_job_ids": ["nope"]}], HOST)
