"""What a job trains: zoo names and user factories as workloads, and their shape-only forms."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from driple.errors import DripleError
from driple.zoo.registry import Workload
from driple.zoo.workload import ModuleWorkload, example_batch, load_workload, to_meta

#: The collector tests' user-code workloads (tiny_mlp: a workload object, tiny_module: a module).
USER = Path(__file__).resolve().parents[1] / "collect" / "conftest.py"
TINY = f"{USER}:tiny_mlp"


def test_user_workload_and_plain_module():
    import math

    import torch

    w = load_workload(TINY, batch_size=4, knobs={"width": 16})
    x, y = w.make_batch(4)
    assert x.shape == (4, 64) and w.loss_fn(w.model(x), y).ndim == 0
    # the knob reached the factory: Linear 64->16, 16->16, 16->10 (depth 2) = 1040 + 272 + 170
    assert sum(p.numel() for p in w.model.parameters()) == 1482
    # cross-entropy of all-zero logits over 10 classes is log(10)
    assert w.loss_fn(torch.zeros(4, 10), y).item() == pytest.approx(math.log(10))
    m = load_workload(f"{USER}:tiny_module", batch_size=3)
    assert isinstance(m, ModuleWorkload) and m.input_shape == (8,)
    x, y = m.make_batch()
    assert x.shape == (3, 8) and y is None
    assert m.model(x).shape == (3, 4)
    # a plain module trains on the mean squared output: (1 + 4 + 9 + 16) / 4
    assert m.loss_fn(torch.tensor([[1.0, -2.0], [3.0, -4.0]]), None).item() == pytest.approx(7.5)


def test_user_code_errors_are_explained(tmp_path):
    with pytest.raises(DripleError, match="no function"):
        load_workload(f"{USER}:nope")
    with pytest.raises(DripleError, match="no such file"):
        load_workload(f"{tmp_path}/missing.py:f")
    with pytest.raises(DripleError, match="cannot import"):
        load_workload("no_such_module_xyz:f")
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\ndef f():\n    return torch.nn.Linear(2, 2)\n")
    with pytest.raises(DripleError, match="input_shape"):
        load_workload(f"{bad}:f")
    with pytest.raises(DripleError, match="input_shape"):
        load_workload(f"{bad}:f", shapes_only=True)


def test_shapes_only_builds_on_meta_and_falls_back(tmp_path):
    zoo = load_workload("mlp", batch_size=5, knobs={"hidden": 16, "layers": 1}, shapes_only=True)
    assert isinstance(zoo, Workload) and all(p.is_meta for p in zoo.model.parameters())
    real = load_workload("mlp", batch_size=5, knobs={"hidden": 16, "layers": 1})
    assert [p.shape for p in zoo.model.parameters()] == [p.shape for p in real.model.parameters()]
    user = load_workload(f"{USER}:tiny_module", batch_size=3, shapes_only=True)
    assert all(p.is_meta for p in user.model.parameters())
    code = tmp_path / "reads_values.py"  # a factory that reads a tensor's value cannot run on meta
    code.write_text("import torch\n"
                    "def build():\n    m = torch.nn.Linear(3, 2)\n    torch.nn.init.ones_(m.weight)\n"
                    "    if m.weight.sum().item() != 6.0:\n        raise ValueError('bad init')\n"
                    "    m.input_shape = (3,)\n    return m\n")
    built = load_workload(f"{code}:build", shapes_only=True)
    assert not any(p.is_meta for p in built.model.parameters())
    assert built.model.weight.sum().item() == 6.0


def test_example_batches_are_meta_at_any_size():
    zoo = load_workload("mlp", knobs={"hidden": 16, "layers": 1}, shapes_only=True)
    x, y = example_batch(zoo, 10**9)  # 10^9 samples: as cheap as one
    real_x, real_y = zoo.make_batch(2)
    assert x.is_meta and y.is_meta and x.shape[0] == y.shape[0] == 10**9
    assert x.shape[1:] == real_x.shape[1:] and (x.dtype, y.dtype) == (real_x.dtype, real_y.dtype)
    assert example_batch(zoo)[0].shape[0] == zoo.batch_size
    mod = load_workload(f"{USER}:tiny_module", batch_size=7, shapes_only=True)
    x, y = example_batch(mod, 10**9)
    assert x.is_meta and x.shape == (10**9, 8) and y is None
    user = load_workload(TINY, batch_size=4, knobs={"width": 16})  # its own make_batch, moved to meta
    x, y = example_batch(user, 4)
    assert x.is_meta and x.shape == (4, 64) and y.dtype == torch.long
    nested = to_meta({"a": (torch.zeros(2), [torch.ones(3)]), "n": 1})
    assert nested["a"][0].is_meta and nested["a"][1][0].is_meta and nested["n"] == 1


# ---------------------------------------------------------------------- models written by others
class ModelOutputLike(dict):
    """Shaped like a Hugging Face ``ModelOutput``: a dict whose keys are also attributes, holding
    only the fields that are not None (``loss`` only when labels were given)."""

    __getattr__ = dict.__getitem__


class KeywordLM(torch.nn.Module):
    """Shaped like a Hugging Face causal LM: ``forward(input_ids, attention_mask=None,
    labels=None)`` -> ``ModelOutputLike(logits=[B, T, V], loss=... when labels)``."""

    def __init__(self, vocab: int = 11, width: int = 4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, input_ids, attention_mask=None, labels=None):
        h = self.embed(input_ids)
        if attention_mask is not None:
            h = h * attention_mask.unsqueeze(-1)
        logits = self.head(h)
        if labels is None:
            return ModelOutputLike(logits=logits)
        loss = torch.nn.functional.cross_entropy(  # the model's own loss, shifted as a causal LM does
            logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        return ModelOutputLike(loss=loss, logits=logits)


def test_forward_passes_a_dict_as_keywords():
    from driple.zoo.workload import call_arguments, forward

    x = torch.zeros(2, 3)
    assert call_arguments(x) == ((x,), {})
    args, kwargs = call_arguments({"input_ids": x})
    assert args == () and kwargs["input_ids"] is x

    class Echo(torch.nn.Module):
        def forward(self, a=None, b=None):
            return a, b

    assert forward(Echo(), {"b": 1}) == (None, 1)
    assert forward(Echo(), 5) == (5, None)


def test_default_loss_reads_what_models_return():
    """Hand-computed: zero logits over C classes give cross-entropy log(C)."""
    import math

    from driple.zoo.workload import default_loss

    model_loss = torch.tensor(0.25)
    for targets in (torch.tensor([0, 1]), None):  # the model's own loss wins, targets or not
        assert default_loss(ModelOutputLike(loss=model_loss, logits=torch.ones(2, 3)), targets).item() == 0.25
    # logits [B, C] against class ids [B]
    assert default_loss(ModelOutputLike(logits=torch.zeros(2, 3)), torch.tensor([0, 2])).item() == pytest.approx(math.log(3))
    # logits [B, T, V] against token ids [B, T]; -100 is skipped, nothing is shifted
    tokens = torch.tensor([[1, -100, 3]])
    logits = torch.zeros(1, 3, 4)
    logits[0, 1, 0] = 100.0  # only the skipped position is far from uniform
    assert default_loss({"logits": logits}, tokens).item() == pytest.approx(math.log(4))
    # a tuple (logits, extra) without targets: mean square of the first tensor = (1 + 4 + 9 + 16) / 4
    assert default_loss((torch.tensor([[1.0, -2.0], [3.0, -4.0]]), torch.ones(9)), None).item() == pytest.approx(7.5)
    # float targets: MSE = (1 + 0) / 2
    assert default_loss(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 2.0])).item() == pytest.approx(0.5)


def test_default_loss_errors_name_the_default_loss():
    from driple.zoo.workload import default_loss

    with pytest.raises(DripleError, match="default loss takes integer targets.*pass a loss_fn"):
        default_loss(ModelOutputLike(logits=torch.zeros(2, 5, 7)), torch.tensor([1, 2]))
    with pytest.raises(DripleError, match="default loss found no tensor"):
        default_loss({"hidden": None}, None)
    with pytest.raises(DripleError, match="default loss compares float targets"):
        default_loss(torch.zeros(2, 3), torch.zeros(2))


def test_a_plain_module_can_take_token_ids(tmp_path):
    code = tmp_path / "tokens.py"
    code.write_text(
        "import torch\n"
        "class Config:\n    vocab_size = 11\n"
        f"{_source(ModelOutputLike)}\n{_source(KeywordLM)}\n"
        "def own_vocab():\n    m = KeywordLM(vocab=11)\n    m.input_shape = (5,)\n    m.vocab_size = 11\n    return m\n"
        "def config_vocab():\n    m = KeywordLM(vocab=11)\n    m.input_shape = 5\n    m.config = Config()\n"
        "    m.input_dtype = 'long'\n    return m\n"
        "class Tagger(KeywordLM):\n    input_shape = (5,)\n    input_dtype = torch.long\n    vocab_size = 11\n"
        "def class_vocab():\n    return Tagger(vocab=11)\n"
        "def no_vocab():\n    m = KeywordLM()\n    m.input_shape = (5,)\n    m.input_dtype = torch.int64\n    return m\n"
        "def bad_dtype():\n    m = KeywordLM()\n    m.input_shape = (5,)\n    m.input_dtype = 'token'\n    return m\n")
    for name in ("own_vocab", "config_vocab", "class_vocab"):  # class attributes count, as input_shape
        w = load_workload(f"{code}:{name}", batch_size=64)
        x, y = w.make_batch(generator=torch.Generator().manual_seed(0))
        assert x.dtype == torch.long and x.shape == (64, 5) and y is None
        assert 0 <= int(x.min()) and int(x.max()) <= 10 and int(x.max()) >= 5  # ids of the whole vocabulary
        meta, _ = load_workload(f"{code}:{name}", batch_size=10**9, shapes_only=True).make_batch(device="meta")
        assert meta.is_meta and meta.dtype == torch.long and meta.shape == (10**9, 5)
        out = w.model(x)
        assert w.loss_fn(out, y).item() == pytest.approx(out["logits"].pow(2).mean().item())
    with pytest.raises(DripleError, match="vocab_size"):
        load_workload(f"{code}:no_vocab")
    with pytest.raises(DripleError, match="not a torch dtype"):
        load_workload(f"{code}:bad_dtype")


def test_a_workload_without_loss_fn_gets_the_default_loss(tmp_path):
    from driple.zoo.workload import default_loss, step_loss

    code = tmp_path / "kw.py"
    code.write_text(
        f"import torch\n{_source(ModelOutputLike)}\n{_source(KeywordLM)}\n"
        "class LMWorkload:\n    name = 'kw-lm'\n"
        "    def __init__(self):\n        self.model = KeywordLM()\n"
        "    def make_batch(self, batch_size, generator=None, device='cpu'):\n"
        "        ids = torch.randint(0, 11, (batch_size, 6), generator=generator).to(device)\n"
        "        return {'input_ids': ids, 'attention_mask': torch.ones_like(ids), 'labels': ids}, None\n"
        "def build(batch_size=4):\n    return LMWorkload()\n")
    w = load_workload(f"{code}:build", batch_size=3)
    assert w.loss_fn is default_loss and w.name == "kw-lm"  # everything but the loss is its own
    inputs, targets = w.make_batch(3, generator=torch.Generator().manual_seed(1))
    out = w.model(**inputs)
    assert step_loss(w.model, inputs, targets, w.loss_fn).item() == pytest.approx(out.loss.item())
    x, _ = example_batch(w, 7)  # drawn by its own make_batch, then moved to meta
    assert x["input_ids"].is_meta and x["input_ids"].shape == (7, 6)


def test_a_relative_factory_file_is_found_in_the_checkout(tmp_path, monkeypatch):
    """A grid names ``datasets/out-of-zoo/models.py:...`` relative to the checkout; the sweep
    (and each worker) may run from any directory."""
    monkeypatch.chdir(tmp_path)
    relative = USER.relative_to(Path(__file__).resolve().parents[2])  # tests/collect/conftest.py
    w = load_workload(f"{relative}:tiny_module", batch_size=2)
    assert w.input_shape == (8,)
    (tmp_path / "tests" / "collect").mkdir(parents=True)  # the current directory comes first
    (tmp_path / relative).write_text("import torch\ndef tiny_module():\n"
                                     "    m = torch.nn.Linear(3, 1)\n    m.input_shape = (3,)\n    return m\n")
    assert load_workload(f"{relative}:tiny_module").input_shape == (3,)
    with pytest.raises(DripleError, match="no such file .*nowhere.py or .*nowhere.py"):
        load_workload("nowhere.py:f")


def test_knobs_a_factory_does_not_take_are_named():
    with pytest.raises(DripleError, match=r"check the knobs it accepts: tiny_module\(width"):
        load_workload(f"{USER}:tiny_module", knobs={"depth": 3})


def _source(obj) -> str:
    import inspect
    import textwrap

    return textwrap.dedent(inspect.getsource(obj))


def test_a_sweep_checks_user_files_before_it_starts(tmp_path):
    from driple.zoo.workload import check_models

    check_models(["mlp", f"{USER}:tiny_mlp", "some_package.models:build"])  # modules are not imported
    with pytest.raises(DripleError, match="no such file"):
        check_models(["mlp", f"{tmp_path}/gone.py:build"])
    with pytest.raises(DripleError, match="unknown model"):
        check_models(["no_such_zoo_model"])
