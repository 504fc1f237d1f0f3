import numpy as np
import pandas as pd
import pytest

from driple.errors import DripleError
from driple.inspector.baselines import (HGBBaseline, JobRows, MeanBaseline, NearestArchitecture,
                                        job_rows)
from driple.inspector.estimator_registry import (estimator_names, make_estimator,
                                                 register_estimator, unregister_estimator)
from driple.inspector.estimators import Estimator


def rows(attrs, optimizers, models, y=None, batch=None):
    attrs = np.asarray(attrs, dtype=np.float64)
    n = len(attrs)
    table = pd.DataFrame({"job_id": [f"j{i}" for i in range(n)], "family": models, "model": models,
                          "architecture": [f"{m} {a[0]:g}" for m, a in zip(models, attrs)],
                          "batch_size": batch or [8] * n, "optimizer": optimizers})
    return JobRows(attrs, table, None if y is None else np.asarray(y, dtype=np.float64))


def test_mean_by_hand():
    train = rows([[1], [2], [3]], ["sgd"] * 3, ["m"] * 3, y=[[1.0, np.nan], [2.0, 4.0], [6.0, 8.0]])
    pred = MeanBaseline().fit_rows(train).predict_rows(rows([[9], [9]], ["sgd"] * 2, ["m"] * 2))
    assert pred.tolist() == [[3.0, 6.0], [3.0, 6.0]]


def test_nearest_architecture_by_hand():
    # attributes e^1 - 1, e^2 - 1, e^4 - 1: log1p gives 1, 2, 4 (mean 7/3, std sqrt(14/9))
    a = np.expm1([[1.0], [2.0], [4.0]])
    train = rows(a, ["sgd", "sgd", "adam"], ["cnn", "cnn", "lm"], y=[[10.0], [20.0], [40.0]])
    knn = NearestArchitecture().fit_rows(train)
    std = np.sqrt(14 / 9)
    # a job at log1p = 2.9 with sgd, model cnn: distances |2.9 - x| / std (+ 1 for adam, + 1 for lm)
    query = rows(np.expm1([[2.9]]), ["sgd"], ["cnn"])
    d = knn.distances(query)[0]
    assert d == pytest.approx([1.9 / std, 0.9 / std, 1.1 / std + 2])
    assert knn.predict_rows(query).tolist() == [[20.0]]  # copies the nearest configuration
    # the same job with adam on an lm: the third configuration is now at 1.1 / std
    assert knn.predict_rows(rows(np.expm1([[2.9]]), ["adam"], ["lm"])).tolist() == [[40.0]]
    # k = 2 averages the two nearest configurations
    assert NearestArchitecture(k=2).fit_rows(train).predict_rows(query).tolist() == [[15.0]]


def test_nearest_architecture_averages_the_jobs_of_a_configuration():
    # two measurements of one configuration (same architecture, batch, optimizer) and another
    train = rows([[1.0], [1.0], [50.0]], ["sgd"] * 3, ["m"] * 3, y=[[2.0, np.nan], [4.0, 6.0], [100.0, 100.0]])
    knn = NearestArchitecture().fit_rows(train)
    assert knn.labels_.tolist() == [[3.0, 6.0], [100.0, 100.0]]
    assert knn.predict_rows(rows([[1.5]], ["sgd"], ["m"])).tolist() == [[3.0, 6.0]]


def test_hgb_learns_a_log_scale_relation_and_chooses_iterations_on_validation():
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(0, 7, size=(200, 1)))  # 1 to 1100, evenly on a log scale
    y = np.hstack([3 * x, np.full((200, 1), 5.0)])  # a target proportional to x; a constant
    opts = ["sgd"] * 200
    train, val = rows(x[:150], opts[:150], ["m"] * 150, y[:150]), rows(x[150:], opts[150:], ["m"] * 50, y[150:])
    hgb = HGBBaseline(max_iter=50, min_samples_leaf=5).fit_rows(train, val)
    assert 1 <= hgb.n_iter_[0] <= 50
    pred = hgb.predict_rows(rows([[10.0], [500.0]], ["adam", "sgd"], ["m", "m"]))  # adam: unseen
    assert pred[:, 0] == pytest.approx([30.0, 1500.0], rel=0.25)
    assert pred[:, 1] == pytest.approx([5.0, 5.0], rel=1e-6)
    assert HGBBaseline(max_iter=7).fit_rows(train).n_iter_[0] == 7  # no validation: all iterations


def test_estimators_on_a_dataset(dataset):
    train, val, test = list(range(6)), [6, 7], [8, 9, 10, 11]
    y = dataset.targets
    for name in ("mean", "hgb", "knn"):
        est = make_estimator(name).fit(dataset, train, val)
        assert isinstance(est, Estimator) and est.predict(dataset, test).shape == (4, y.shape[1])
        assert est.predict(dataset).shape == y.shape
    assert np.allclose(make_estimator("mean").fit(dataset, train, val).predict(dataset, [0])[0],
                       y[train].mean(0))
    r = job_rows(dataset, [3, 1])
    assert r.table["job_id"].tolist() == [dataset.job_ids[3], dataset.job_ids[1]]
    assert np.allclose(r.attrs, dataset.graph_attrs[[3, 1]]) and np.allclose(r.y, y[[3, 1]])


def test_registry():
    assert estimator_names()[:10] == ("mean", "hgb", "hgb-priors", "knn", "analytic", "roofline", "roofline-overlap",
                                      "roofline-physical", "roofline-physical-overlap", "gnn")
    with pytest.raises(DripleError, match="unknown estimator 'nope'"):
        make_estimator("nope")
    with pytest.raises(DripleError, match="built in"):
        register_estimator("mean", lambda **_: MeanBaseline())
    register_estimator("zero", lambda **_: MeanBaseline())
    try:
        assert "zero" in estimator_names() and isinstance(make_estimator("zero"), MeanBaseline)
    finally:
        unregister_estimator("zero")
    assert "zero" not in estimator_names()


def test_inspector_configurations_by_name_keep_their_scaling():
    from driple.inspector.train import TrainOptions

    assert {"hybrid", "features"} <= set(estimator_names())
    for name in ("hybrid", "features"):
        est = make_estimator(name, seed=3, options=TrainOptions(target_scaling="max", epochs=7))
        # the user's epochs are kept; the priors' log scaling is not overridden
        assert est.name == name and est.config.kind == name and est.config.residual
        assert est.options.target_scaling == "ln" and est.options.epochs == 7 and est.options.seed == 3
    assert make_estimator("gnn").config is None


class _Jobs:
    """Duck-typed jobs for :class:`HGBPriors`: graph-level features, targets, a setting."""

    setting = "cpu-ddp-w2-1g"

    def __init__(self, features, y, names):
        import torch
        from types import SimpleNamespace

        self.targets, self.target_names = np.asarray(y, dtype=np.float64), list(names)
        self.graphs = [SimpleNamespace(graph_features=torch.tensor(f, dtype=torch.float64),
                                       y=torch.tensor(t, dtype=torch.float64)) for f, t in zip(features, self.targets)]

    def __len__(self):
        return len(self.graphs)

    def __getitem__(self, i):
        return self.graphs[i]


def test_hgb_priors_extrapolates_along_the_prior_where_trees_cannot():
    """A step time of exactly 3x its prior: trained on small jobs, asked about 20x larger ones,
    ``hgb-priors`` (trees on ln(y / prior)) follows the prior; plain trees stop at the largest
    training value."""
    from driple.hardware.host_speed import HostSpeed
    from driple.graph.summary_features import GRAPH_FEATURES, priors
    from driple.inspector.baselines import HGBPriors
    from driple.metrics import DECLARED_LABELS, use_labels

    host = HostSpeed(flops_per_s=1e10, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
    rng = np.random.default_rng(0)

    def features(gflops):
        f = {k: 0.0 for k in GRAPH_FEATURES}
        f.update(gflops=gflops, traffic_mb=10.0 * gflops, param_mb=5.0, activation_mb=20.0, comm_tx_mb=5.0,
                 comm_rx_mb=5.0, comm_messages=2.0, largest_message_mb=3.0, batch_size=32.0, workers=2.0,
                 n_ops=50.0, opt_sgd=1.0)
        return [f[k] for k in GRAPH_FEATURES]

    small = [features(g) for g in rng.uniform(1, 5, 40)]
    large = [features(g) for g in (60.0, 100.0)]
    step = 3.0 * priors(np.array(small + large), "cpu-ddp-w2-1g", host)["prior_step_s"]
    y = np.stack([step, np.full(len(step), 50.0)], axis=1)  # step_time; a constant without a prior
    try:
        use_labels("v2")
        jobs = _Jobs(small + large, y, ["step_time", "compute_burst_amount"])
        train, val, test = list(range(30)), list(range(30, 40)), [40, 41]
        est = HGBPriors(host=host).fit(jobs, train, val)
        pred = est.predict(jobs, test)
        assert pred[:, 0] == pytest.approx(y[test, 0], rel=0.02)
        assert pred[:, 1] == pytest.approx([50.0, 50.0], rel=0.02)
        flat = HGBBaseline().fit_arrays(est._arrays([jobs[i] for i in train])[0], y[train])  # no prior offset
        assert flat.predict_arrays(est._arrays([jobs[i] for i in test])[0])[:, 0].max() <= y[train, 0].max() * 1.01
    finally:
        use_labels(DECLARED_LABELS)


def test_an_ensemble_is_the_geometric_mean_of_its_members(dataset):
    from driple.inspector.estimators import EnsembleEstimator

    class Const(Estimator):
        def __init__(self, value, name):
            self.value, self.name = value, name

        def fit(self, dataset, train, val):
            self.fitted = (list(train), list(val))
            return self

        def predict(self, dataset, idx=None):
            out = np.full((len(dataset) if idx is None else len(idx), len(dataset.target_names)), self.value)
            if self.value == 4.0:
                out[:, 0] = np.nan  # this member does not predict the first target
            return out

    a, b = Const(1.0, "a"), Const(4.0, "b")
    ens = EnsembleEstimator([a, b]).fit(dataset, [0, 1, 2], [3])
    assert ens.name == "a+b" and a.fitted == b.fitted == ([0, 1, 2], [3])
    pred = ens.predict(dataset, [5, 6])
    assert pred[:, 1:] == pytest.approx(2.0)  # sqrt(1 x 4)
    assert pred[:, 0] == pytest.approx(1.0)  # only a predicts it
    with pytest.raises(DripleError, match="at least two"):
        EnsembleEstimator([a])
    assert "hybrid+hgb-priors" in estimator_names()
    assert [m.name for m in make_estimator("hybrid+hgb-priors").members] == ["hybrid", "hgb-priors"]
