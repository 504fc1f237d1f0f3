"""Tests of the zoo's registry: every family builds, trains a step and traces; mistakes explain themselves.

Batches are tiny (2 samples) so the whole file runs in well under a minute on one core.
"""
from __future__ import annotations

import collections

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from driple.errors import DripleError
from driple.zoo import (
    ModelSpec,
    Workload,
    build_workload,
    list_models,
    make_optimizer,
    resolve_config,
)
from driple.zoo.optim import OPTIMIZERS
from driple.zoo.registry import build_model
from driple.zoo.tasks import IGNORE_INDEX

FAMILIES = ("alexnet", "bert", "densenet", "googlenet", "gpt", "lstm_lm", "mlp", "mobilenetv2", "resnet", "vgg", "vit")
VISION = ("alexnet", "densenet", "googlenet", "mobilenetv2", "resnet", "vgg")


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _expected_output_shape(w: Workload, batch: int) -> tuple:
    c = w.config
    if w.family in ("gpt", "lstm_lm") or (w.family == "bert" and c["head"] == "mlm"):
        return (batch, c["seq_len"], c["vocab_size"])
    return (batch, c["num_classes"])


# --------------------------------------------------------------------------- listing
def test_list_models_covers_every_family_with_defaults_first():
    specs = list_models()
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    assert all(isinstance(s, ModelSpec) for s in specs)
    families = {s.family for s in specs}
    assert set(FAMILIES) <= families
    for fam in FAMILIES:  # the family's own name is its default configuration, never full-size
        spec = next(s for s in specs if s.name == fam)
        assert spec.family == fam and not spec.preset and spec.default_batch_size >= 1
    for name in ("resnet18", "resnet50", "vgg16", "densenet121", "mobilenet_v2", "googlenet_imagenet",
                 "alexnet_imagenet", "bert_base", "gpt2_small", "lstm_lm_large", "vit_b_16"):
        assert next(s for s in specs if s.name == name).preset, name
    for name in ("resnet20_cifar", "gpt_tiny", "bert_tiny", "lstm_lm_small"):
        assert not next(s for s in specs if s.name == name).preset, name


def test_spec_knobs_match_config_and_are_frozen():
    spec = next(s for s in list_models() if s.name == "resnet50")
    assert spec.knobs["depth"] == 50 and spec.knobs["image_size"] == 224
    with pytest.raises(Exception):
        spec.name = "other"
    config = resolve_config("resnet50")
    assert config == {**spec.knobs, "batch_size": spec.default_batch_size}


# --------------------------------------------------------------------------- build + train
@pytest.mark.parametrize("family", FAMILIES)
def test_family_default_trains_one_step(family):
    w = build_workload(family, batch_size=2)
    assert w.family == family and w.config["batch_size"] == 2
    spec = next(s for s in list_models() if s.name == family)
    assert {k: w.config[k] for k in spec.knobs} == spec.knobs
    inputs, targets = w.example_batch
    assert inputs.shape[0] == 2 and targets.shape[0] == 2
    opt = make_optimizer("sgd", w.model.parameters())
    before = [p.detach().clone() for p in w.model.parameters()]
    out = w.model(inputs)
    assert tuple(out.shape) == _expected_output_shape(w, 2)
    loss = w.loss_fn(out, targets)
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    assert all(p.grad is not None for p in w.model.parameters())  # every parameter is used
    opt.step()
    opt.zero_grad()
    assert any(not torch.equal(b, p) for b, p in zip(before, w.model.parameters()))


@pytest.mark.parametrize("family", FAMILIES)
def test_make_batch_is_deterministic_per_generator(family):
    w = build_workload(family, batch_size=3)
    a = w.make_batch(generator=torch.Generator().manual_seed(7))
    b = w.make_batch(generator=torch.Generator().manual_seed(7))
    c = w.make_batch(generator=torch.Generator().manual_seed(8))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    assert all(torch.equal(x, y) for x, y in zip(w.example_batch, w.example_batch))
    inputs, targets = w.make_batch(5)
    assert inputs.shape[0] == 5 and targets.shape[0] == 5
    assert inputs.dtype == (torch.long if family in ("bert", "gpt", "lstm_lm") else torch.float32)


def test_model_weights_depend_only_on_name_and_knobs():
    torch.manual_seed(123)
    a = build_workload("gpt_tiny").model.state_dict()
    state = torch.random.get_rng_state()
    b = build_workload("gpt_tiny").model.state_dict()
    assert torch.equal(state, torch.random.get_rng_state())  # building leaves the global RNG alone
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_masked_lm_batch_masks_a_fixed_share():
    w = build_workload("bert", batch_size=4, seq_len=20, vocab_size=100)
    inputs, targets = w.example_batch
    masked = targets != IGNORE_INDEX
    assert masked.sum(1).tolist() == [3, 3, 3, 3]  # 15% of 20
    assert (inputs[masked] == 99).all() and (inputs[~masked] != 99).all()
    cls = build_workload("bert", batch_size=4, head="cls", num_classes=5)
    assert tuple(cls.model(cls.example_batch[0]).shape) == (4, 5)


@pytest.mark.parametrize("attention", ["sdpa", "math"])
def test_gpt_is_causal(attention):
    w = build_workload("gpt_tiny", batch_size=2, attention=attention)
    w.model.eval()
    x, _ = w.example_batch
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % w.config["vocab_size"]
    with torch.no_grad():
        a, b = w.model(x), w.model(y)
    torch.testing.assert_close(a[:, :-1], b[:, :-1])
    assert not torch.allclose(a[:, -1], b[:, -1])


def test_attention_implementations_agree():
    x, _ = build_workload("gpt_tiny", batch_size=2).example_batch
    outs = []
    for attention in ("sdpa", "math"):
        model = build_workload("gpt_tiny", attention=attention).model.eval()
        with torch.no_grad():
            outs.append(model(x))
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("family", VISION)
@pytest.mark.parametrize("variant,size", [("cifar", 32), ("imagenet", 64)])
def test_vision_families_run_at_their_smallest_image(family, variant, size):
    knobs = {"growth_rate": 4} if family == "densenet" else {"width": 0.25}
    w = build_workload(family, batch_size=1, image_size=size, variant=variant, **knobs)
    with torch.no_grad():
        assert tuple(w.model(w.example_batch[0]).shape) == (1, 10)
    with pytest.raises(DripleError, match="too small"):
        build_workload(family, image_size=size - 1, variant=variant)


# Parameter counts of torchvision's models and of the reference BERT / GPT-2 implementations.
REFERENCE_PARAMS = {
    "resnet18": 11_689_512, "resnet34": 21_797_672, "resnet50": 25_557_032, "resnet101": 44_549_160,
    "resnet152": 60_192_808, "vgg11": 132_863_336, "vgg16": 138_357_544, "vgg19": 143_667_240,
    "vgg16_bn": 138_365_992, "densenet121": 7_978_856, "densenet161": 28_681_000, "densenet169": 14_149_480,
    "densenet201": 20_013_928, "mobilenet_v2": 3_504_872, "googlenet_imagenet": 6_624_904,
    "alexnet_imagenet": 61_100_840, "vit_b_16": 86_567_656, "gpt2_small": 124_439_808,
    "bert_base": 109_514_298,  # BertForMaskedLM (tied decoder)
    "bert_base_cls": 109_483_778,  # BertForSequenceClassification, 2 labels
    "resnet20_cifar": 269_722,  # He et al. 2016: 0.27 M
    "resnet110_cifar": 1_727_962,  # 1.7 M
}


@pytest.mark.parametrize("name", sorted(REFERENCE_PARAMS))
def test_presets_match_reference_parameter_counts(name):
    config = resolve_config(name)
    family = next(s.family for s in list_models() if s.name == name)
    model = build_model(family, config, device="meta")
    assert sum(p.numel() for p in model.parameters()) == REFERENCE_PARAMS[name]


def test_every_other_preset_builds_on_meta():
    for spec in list_models():
        if spec.name in REFERENCE_PARAMS:
            continue
        model = build_model(spec.family, resolve_config(spec.name), device="meta")
        assert sum(p.numel() for p in model.parameters()) > 0


def test_presets_accept_knob_overrides():
    w = build_workload("resnet50", batch_size=2, image_size=64, num_classes=7, width=0.25)
    assert w.config["depth"] == 50 and w.config["image_size"] == 64
    with torch.no_grad():
        assert tuple(w.model(w.example_batch[0]).shape) == (2, 7)


# --------------------------------------------------------------------------- tracing
@pytest.mark.parametrize("family", FAMILIES)
def test_family_default_traces_with_make_fx_fake(family, training_step):
    w = build_workload(family, batch_size=2)
    opt = make_optimizer("sgd", w.model.parameters())
    graph = make_fx(training_step(w, opt), tracing_mode="fake", _allow_non_fake_inputs=True)(*w.example_batch)
    ops = collections.Counter(str(n.target).split(".")[1] for n in graph.graph.nodes if n.op == "call_function"
                              and str(n.target).startswith("aten."))
    assert sum(ops.values()) > 20
    assert any(k in ops for k in ("convolution", "mm", "addmm", "bmm", "_scaled_dot_product_flash_attention_for_cpu"))
    assert any("backward" in k for k in ops)  # the backward pass is in the graph


def _step_fn_or_backward(w: Workload, opt, training_step):
    """The training step, or with ``opt=None`` forward and backward only."""
    if opt is not None:
        return training_step(w, opt)

    def step(inputs, targets):
        loss = w.loss_fn(w.model(inputs), targets)
        loss.backward()
        return loss

    return step


def _traced_ops(w: Workload, optimizer, training_step) -> collections.Counter:
    """How many times each aten op occurs in the traced step (``optimizer=None``: no update)."""
    opt = make_optimizer(optimizer, w.model.parameters()) if optimizer else None
    graph = make_fx(_step_fn_or_backward(w, opt, training_step), tracing_mode="fake",
                    _allow_non_fake_inputs=True)(*w.example_batch)
    return collections.Counter(str(n.target).split(".")[1] for n in graph.graph.nodes if n.op == "call_function"
                               and str(n.target).startswith("aten."))


def _layer_params(d: int, ffn: int) -> int:
    """Parameters of one transformer layer: qkv (3d^2 + 3d), proj (d^2 + d), fc1 (d*ffn + ffn),
    fc2 (ffn*d + d), two LayerNorms (2 * 2d)."""
    return 4 * d * d + 2 * d * ffn + 9 * d + ffn


# One more transformer layer: its 4 Linear layers add 4 addmm forward and 8 mm backward (grad of
# input and weight), 2 LayerNorms, 1 softmax, 1 GELU; SGD adds one p.add_ per parameter tensor (12).
ONE_MORE_LAYER_OPS = {"addmm": 4, "mm": 8, "native_layer_norm": 2, "_softmax": 1, "gelu": 1, "add_": 12}


@pytest.mark.parametrize("name,knobs,change,params,tensors,ops", [
    ("gpt_tiny", {"attention": "math", "layers": 1}, {"layers": 2}, _layer_params(64, 256), 12,
     ONE_MORE_LAYER_OPS),
    ("vit", {"layers": 1, "attention": "math"}, {"layers": 2}, _layer_params(192, 768), 12, ONE_MORE_LAYER_OPS),
    # twice the vocabulary: 64 more word-embedding rows of d=128; the same ops on a larger table
    ("bert", {"head": "cls", "attention": "math", "layers": 1, "vocab_size": 64}, {"vocab_size": 128},
     64 * 128, 0, {}),
    # an untied decoder: its own 64 x 200 weight, one more tensor for SGD to update
    ("lstm_lm", {"dropout": 0.5, "vocab_size": 64, "seq_len": 5, "tie_weights": True}, {"tie_weights": False},
     64 * 200, 1, {"add_": 1}),
    # no dropout: the masks on the embedding, between the 2 LSTM layers and before the decoder go
    ("lstm_lm", {"dropout": 0.5, "vocab_size": 64, "seq_len": 5, "tie_weights": True}, {"dropout": 0.0},
     0, 0, {"bernoulli_": -3}),
])
def test_knob_variants_trace(name, knobs, change, params, tensors, ops, training_step):
    base = build_workload(name, batch_size=2, **knobs)
    varied = build_workload(name, batch_size=2, **{**knobs, **change})
    a, b = _traced_ops(base, "sgd", training_step), _traced_ops(varied, "sgd", training_step)
    assert sum(a.values()) > 50
    sizes = [[p.numel() for p in w.model.parameters()] for w in (base, varied)]
    assert sum(sizes[1]) - sum(sizes[0]) == params and len(sizes[1]) - len(sizes[0]) == tensors
    assert {op: b[op] - a[op] for op in ops} == ops
    if not ops:
        assert a == b


# What one optimizer step adds to the traced step of the 1-hidden-layer MLP, per parameter tensor
# (4: weight and bias of its 2 Linear layers), with torch's per-parameter CPU kernels:
OPTIMIZER_OPS_PER_TENSOR = {
    # momentum buffer = clone(grad).detach() on the first step; p.add_(buf, alpha=-lr)
    "sgd": {"clone": 1, "detach": 1, "add_": 1},
    # moments m, v = zeros_like(p) x2; step = tensor(0.) (lift_fresh_copy), step.add_(1);
    # m.lerp_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2); denom = (v.sqrt() / c2).add_(eps);
    # p.addcdiv_(m, denom, -step_size)
    "adam": {"zeros_like": 2, "lift_fresh_copy": 1, "add_": 2, "lerp_": 1, "mul_": 1, "addcmul_": 1,
             "sqrt": 1, "div": 1, "addcdiv_": 1},
    # Adam and the decoupled weight decay p.mul_(1 - lr * wd)
    "adamw": {"zeros_like": 2, "lift_fresh_copy": 1, "add_": 2, "lerp_": 1, "mul_": 2, "addcmul_": 1,
              "sqrt": 1, "div": 1, "addcdiv_": 1},
}


@pytest.mark.parametrize("optimizer", OPTIMIZERS)
def test_every_optimizer_traces(optimizer, training_step):
    def mlp():  # a fresh one per trace: a traced backward leaves .grad behind
        return build_workload("mlp", batch_size=2, hidden=16, layers=1)

    assert len(list(mlp().model.parameters())) == 4
    without = _traced_ops(mlp(), None, training_step)
    with_step = _traced_ops(mlp(), optimizer, training_step)
    assert not without - with_step  # the update only adds ops
    assert dict(with_step - without) == {op: 4 * n for op, n in OPTIMIZER_OPS_PER_TENSOR[optimizer].items()}


# --------------------------------------------------------------------------- user mistakes
def test_unknown_model_suggests_close_names():
    with pytest.raises(DripleError) as err:
        build_workload("resnet5")
    msg = str(err.value)
    assert "resnet50" in msg and "driple zoo" in msg and "\n" not in msg
    with pytest.raises(DripleError, match="Did you mean 'gpt2_small'"):
        build_workload("GPT2-small")


def test_unknown_knob_lists_the_valid_ones():
    with pytest.raises(DripleError) as err:
        build_workload("resnet", dept=18)
    msg = str(err.value)
    assert "'depth'" in msg and "image_size" in msg and "width" in msg


@pytest.mark.parametrize("name,knobs,fragment", [
    ("vgg", {"depth": 12}, "must be one of"),
    ("resnet", {"depth": 21}, r"6n\+2"),
    ("resnet", {"width": "wide"}, "takes a number"),
    ("gpt", {"d_model": 100, "heads": 3}, "multiple of heads"),
    ("gpt", {"seq_len": 64, "max_positions": 32}, "longer than max_positions"),
    ("densenet", {"block_config": "6,0,3"}, "block_config"),
    ("lstm_lm", {"tie_weights": True, "embed_dim": 100}, "tie_weights"),
    ("bert", {"head": "qa"}, "mlm"),
    ("mlp", {"layers": True}, "takes an integer"),
])
def test_bad_knob_values_explain_themselves(name, knobs, fragment):
    with pytest.raises(DripleError, match=fragment):
        build_workload(name, **knobs)


def test_bad_batch_size():
    for bad in (0, -3, 2.5, "many"):
        with pytest.raises(DripleError, match="batch_size"):
            build_workload("mlp", batch_size=bad)


def test_knob_strings_are_converted():
    config = resolve_config("densenet", batch_size="4", growth_rate="8", block_config="2,3",
                            variant="CIFAR")
    assert config["batch_size"] == 4 and config["growth_rate"] == 8
    assert config["block_config"] == (2, 3) and config["variant"] == "cifar"
    assert resolve_config("vgg", batch_norm="false", width="0.25")["batch_norm"] is False
