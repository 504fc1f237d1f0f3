import sys

import numpy as np
import pytest
import torch

from driple.errors import DripleError
from driple.metrics import target_names
from driple.predict.predictor import Predictor, resize_batch


@pytest.fixture
def predictor(registry):
    return Predictor.load("cpu-ddp-w2-lo")


def test_predict_model_gives_profile_with_intervals(tiny_mlp, predictor):
    prof = predictor.predict(tiny_mlp(), torch.randn(4, 8), optimizer="adam", batch_size=6)
    assert prof.setting == "cpu-ddp-w2-lo" and "batch 6" in prof.model
    assert list(prof.metrics) == list(target_names())
    for m in target_names():
        lo, hi = prof.intervals[m]
        assert 0 <= lo <= prof.metrics[m] <= hi
    assert prof.nominal_coverage == 0.9
    assert set(predictor.timings) == {"build_s", "infer_s"}


def test_predict_many_matches_single(tiny_mlp, predictor):
    graphs = [predictor.build_graph(tiny_mlp(h), torch.randn(4, 8)) for h in (8, 64)]
    many = predictor.predict_many(graphs)
    one = predictor.predict_many(graphs[1:])
    assert len(many) == 2 and many[1].metrics == pytest.approx(one[0].metrics, rel=1e-5)
    assert predictor.predict_many([]) == []


def test_predict_job_zoo_and_user_factory(predictor, tmp_path, monkeypatch):
    prof = predictor.predict_zoo("mlp", batch_size=4, hidden=32, layers=1)
    assert prof.model.startswith("mlp") and "hidden=32" in prof.model
    code = tmp_path / "mymodels.py"
    code.write_text("import torch\n"
                    "def build(batch_size=None):\n"
                    "    m = torch.nn.Linear(8, 2)\n    m.input_shape = (8,)\n    return m\n"
                    "def nothing():\n    return 42\n"
                    "def untraceable():\n"
                    "    class M(torch.nn.Module):\n"
                    "        input_shape = (8,)\n"
                    "        def __init__(self):\n            super().__init__(); self.l = torch.nn.Linear(8, 2)\n"
                    "        def forward(self, x):\n"
                    "            return self.l(x) if x.sum() > 0 else -self.l(x)\n"
                    "    return M()\n"
                    "def boom():\n    raise ValueError('bad config')\n")
    prof = predictor.predict_job(f"{code}:build", batch_size=5)
    assert "batch 5" in prof.model
    with pytest.raises(DripleError, match="expected a workload or an nn.Module"):
        predictor.predict_job(f"{code}:nothing")
    with pytest.raises(DripleError, match="data-dependent|control flow|trace"):
        predictor.predict_job(f"{code}:untraceable", batch_size=2)
    with pytest.raises(DripleError, match="could not be built: ValueError: bad config"):
        predictor.predict_job(f"{code}:boom")
    with pytest.raises(DripleError, match="cannot import module"):
        predictor.predict_job("no_such_pkg_xyz.models:build")
    monkeypatch.chdir(tmp_path)  # a file beside the user, named as a module: say how to name it
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    with pytest.raises(DripleError, match=r"mymodels\.py is here: name it as 'mymodels\.py:build'"):
        predictor.predict_job("mymodels:build")
    with pytest.raises(DripleError, match="at least 1"):
        predictor.predict_job("mlp", batch_size=0)


def test_a_user_workload_s_batch_size_and_make_batch_errors(predictor, tmp_path):
    """A workload object whose factory has a batch_size default is predicted at it; one with no
    batch size anywhere asks for --batch-size; a make_batch that raises is one line naming it
    (both gave a traceback from the CLI before)."""
    code = tmp_path / "wl.py"
    code.write_text("import torch\nfrom types import SimpleNamespace\n"
                    "def _batch(batch_size, generator=None, device='cpu'):\n"
                    "    return torch.randn(batch_size, 8, generator=generator), None\n"
                    "def with_default(batch_size=6):\n"
                    "    return SimpleNamespace(model=torch.nn.Linear(8, 2), make_batch=_batch)\n"
                    "def without():\n"
                    "    return SimpleNamespace(model=torch.nn.Linear(8, 2), make_batch=_batch)\n"
                    "def broken():\n"
                    "    def make_batch(batch_size, generator=None, device='cpu'):\n"
                    "        raise KeyError('pixel_values')\n"
                    "    return SimpleNamespace(model=torch.nn.Linear(8, 2), make_batch=make_batch)\n")
    assert "batch 6" in predictor.predict_job(f"{code}:with_default").model
    assert "batch 3" in predictor.predict_job(f"{code}:with_default", batch_size=3).model
    with pytest.raises(DripleError, match=r"wl\.py:without: it has no batch size of its own: pass --batch-size"):
        predictor.predict_job(f"{code}:without")
    assert "batch 4" in predictor.predict_job(f"{code}:without", batch_size=4).model
    with pytest.raises(DripleError, match=r"wl\.py:broken: its make_batch\(4, generator, device='cpu'\) "
                                          r"failed: KeyError: 'pixel_values'"):
        predictor.predict_job(f"{code}:broken", batch_size=4)


def test_huge_batches_are_traced_as_shapes(predictor, tiny_mlp, tmp_path):
    """10^7 samples of 1000 floats would be 40 GB: a prediction makes only their shapes (meta
    tensors), so it runs at any batch size, as fast as at batch 4."""
    code = tmp_path / "wide.py"
    code.write_text("import torch\n"
                    "def build(batch_size=None):\n    m = torch.nn.Linear(1000, 2)\n"
                    "    m.input_shape = (1000,)\n    return m\n")
    assert "batch 10000000" in predictor.predict_job(f"{code}:build", batch_size=10**7).model
    prof = predictor.predict_zoo("mlp", batch_size=10**7, input_dim=1000, hidden=16, layers=1)
    assert "batch 10000000" in prof.model
    assert "batch 100000000" in predictor.predict(tiny_mlp(), torch.randn(4, 8), batch_size=10**8).model
    graph = predictor.build_graph(tiny_mlp(), torch.empty(10**9, 8, device="meta"))
    assert graph.summary["batch_size"] == 10**9


def test_predict_zoo_builds_with_the_checkpoint_options(predictor):
    graph = predictor.build_graph(*_mlp_step())
    assert graph.feature_set == "driple" and graph.num_groups <= 8  # the registry's builder options
    prof = predictor.predict_zoo("mlp", batch_size=4, input_dim=8, hidden=16, layers=1)
    assert list(prof.metrics) == list(target_names()) and all(np.isfinite(list(prof.metrics.values())))
    predictor.inspector.info["setting"] = None
    with pytest.raises(DripleError, match="no single setting"):
        predictor.predict_zoo("mlp", batch_size=4, input_dim=8, hidden=16, layers=1)


def _mlp_step():
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 3))
    return model, (torch.randn(4, 8), torch.randint(0, 3, (4,)))


def test_resize_batch():
    x, y = torch.arange(3).view(3, 1).float(), torch.arange(3)
    bx, by = resize_batch((x, y), 7)
    assert bx.shape == (7, 1) and by.tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert resize_batch({"a": x}, 2)["a"].shape == (2, 1)
    mx, my = resize_batch((x, y), 10**9, device="meta")  # shapes only: nothing allocated
    assert mx.is_meta and my.is_meta and mx.shape == (10**9, 1) and my.dtype == y.dtype
    with pytest.raises(DripleError, match="different first dimensions"):
        resize_batch((x, torch.zeros(5)), 4)
    with pytest.raises(DripleError, match="at least 1"):
        resize_batch(x, 0)


def test_load_by_path(registry):
    p = Predictor.load(str(registry / "cpu-ddp-w2-lo"))
    assert p.setting == "cpu-ddp-w2-lo" and p.intervals is not None
    with pytest.raises(DripleError, match="no inspector checkpoint"):
        Predictor.load(str(registry / "nowhere" / "x.pt"))


def test_a_duration_raised_to_its_floor_has_no_interval_below_it(predictor, tiny_mlp, monkeypatch):
    """0.025 s [0.005, ...] was shown before: the interval's low end now starts at the floor
    (the cycle's fit to the step time, which would shrink it again, is tested on its own)."""
    import driple.predict.bounds as bounds

    monkeypatch.setattr(bounds, "hold_together", lambda values, notes, flags: values)
    ts = predictor.inspector.target_scaler
    j = target_names().index("tx_burst_duration")
    ts.low_ = list(ts.low_)
    ts.low_[j] = 1e4  # far above anything this inspector predicts: the value is raised
    prof = predictor.predict(tiny_mlp(), torch.randn(4, 8))
    assert prof.metrics["tx_burst_duration"] == 1e4
    lo, hi = prof.intervals["tx_burst_duration"]
    assert lo >= 1e4 and hi >= lo
    assert any("tx_burst_duration" in n and "shown as 10000" in n for n in prof.notes)
