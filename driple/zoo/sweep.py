"""The collector's grid: several hundred zoo configurations that each train in 20 ms - 2 s per
step on one CPU thread, and the step-time estimate that keeps them there.

The estimate is a linear model of what one forward pass at batch 1 does (counted once per model
configuration by running it on uninitialised CPU weights, or on the meta device when the model is
large), fitted to measured steps by ``scripts/bench_zoo_step_time.py --fit``::

    seconds = B x (flops x s_flop[family] + elements x s_elem[family]) + ops x s_op + params x s_param[optimizer]

with B the batch size, flops / elements / ops the forward FLOPs, output elements and ATen calls of
one sample, and params the parameter count. It is a budget check, not a predictor: on its
training steps it is within 0.75-1.33x of the measured time for 90% of them, 0.65-1.5x at worst.
"""
from __future__ import annotations

import functools
import itertools
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from driple.errors import DripleError
from driple.zoo.optim import OPTIMIZERS
from driple.zoo.registry import build_model, families, family_of, resolve_config

BUDGET_SECONDS = (0.03, 1.2)  # estimated; kept inside the 20 ms - 2 s target with a margin for the estimate
DEFAULT_SWEEP_SIZE = 400  # configurations sweep_configs() returns when n is None
META_ABOVE_PARAMS = 30_000_000  # count larger models on the meta device (no memory, slower)

# Fitted with ``scripts/bench_zoo_step_time.py --fit`` to the 165 steps in ``step_times.json``
# (process CPU time, 1 thread, on this project's 2-core Xeon VM: ~85 GFLOP/s single-thread matmul).
SECONDS_PER_FLOP = {  # per forward FLOP of one sample (covers backward)
    "alexnet": 5.32e-11, "bert": 2.9e-11, "densenet": 2.12e-11, "googlenet": 1.84e-11, "gpt": 2.48e-11,
    "lstm_lm": 3.56e-11, "mlp": 1.0e-13, "mobilenetv2": 9.69e-12, "resnet": 2.51e-11, "vgg": 2.79e-11,
    "vit": 3.79e-11,
}
SECONDS_PER_ELEMENT = {  # per forward output element of one sample (memory-bound work)
    "alexnet": 1.0e-12, "bert": 2.18e-09, "densenet": 5.24e-09, "googlenet": 1.11e-08, "gpt": 2.22e-09,
    "lstm_lm": 2.61e-10, "mlp": 5.05e-11, "mobilenetv2": 5.67e-09, "resnet": 5.33e-09, "vgg": 7.35e-09,
    "vit": 4.93e-10,
}
SECONDS_PER_OP = 3.11e-5  # per forward ATen call (dispatch and autograd overhead, forward + backward)
SECONDS_PER_PARAM = {"sgd": 3.27e-9, "adam": 9.29e-9, "adamw": 1.02e-8}  # optimizer step + zero_grad


@dataclass(frozen=True)
class ForwardCost:
    """What one forward pass of one sample does: FLOPs, output elements, ATen calls, parameters."""

    flops: float
    elements: float
    ops: int
    params: int


def estimate_step_seconds(name: str, batch_size: int | None = None, optimizer: str = "sgd", **knobs) -> float:
    """Estimated seconds of one training iteration on one CPU thread of this machine class."""
    optimizer = str(optimizer).lower()
    if optimizer not in OPTIMIZERS:
        raise DripleError(f"unknown optimizer {optimizer!r}; use one of {', '.join(OPTIMIZERS)}")
    config = resolve_config(name, batch_size, **knobs)
    family = family_of(name).name
    return _seconds(family, forward_cost(family, config_key(config)), config["batch_size"], optimizer)


def sweep_configs(seed: int = 0, n: int | None = None) -> list[dict]:
    """Distinct ``{"name", "knobs", "batch_size", "optimizer", "est_seconds"}`` configurations.

    Spans every family, several sizes of each, batch sizes and all optimizers; every entry's
    estimated single-thread step time lies in :data:`BUDGET_SECONDS`. ``n`` (default
    :data:`DEFAULT_SWEEP_SIZE`) entries are drawn with ``seed``, in equal shares per family and
    round-robin over each family's model sizes, so any prefix of the list is balanced too.
    ``name`` is the family; ``knobs`` hold the grid's knob values (plain JSON/YAML types), the
    other knobs keep the family defaults; ``est_seconds`` is :func:`estimate_step_seconds`.
    """
    n = DEFAULT_SWEEP_SIZE if n is None else int(n)
    rng = random.Random(seed)
    pools = []
    for family, variants in SWEEP_GRID.items():
        per_variant = []
        for knobs, batch_sizes in variants:
            config = resolve_config(family, **knobs)
            cost = forward_cost(family, config_key(config))
            fits = [
                {"name": family, "knobs": _plain(knobs), "batch_size": b, "optimizer": opt,
                 "est_seconds": round(_seconds(family, cost, b, opt), 4)}
                for b in batch_sizes for opt in OPTIMIZERS
                if BUDGET_SECONDS[0] <= _seconds(family, cost, b, opt) <= BUDGET_SECONDS[1]
            ]
            rng.shuffle(fits)
            if fits:
                per_variant.append(fits)
        rng.shuffle(per_variant)
        # round-robin over model sizes, so each family's first picks are all different models
        pools.append([c for group in itertools.zip_longest(*per_variant) for c in group if c is not None])
    out = []
    for group in itertools.zip_longest(*pools):  # one per family in turn: any prefix is balanced
        out += [c for c in group if c is not None]
    return out[:n]


# --------------------------------------------------------------------------- the grid
def _grid(batch_sizes, **axes):
    """Every combination of the knob values in ``axes``, each with ``batch_sizes``."""
    keys = list(axes)
    return [(dict(zip(keys, values)), batch_sizes) for values in itertools.product(*axes.values())]


_IMG_BATCH = (8, 16, 32, 64, 128)
_SEQ_BATCH = (4, 8, 16, 32, 64)
SWEEP_GRID: dict[str, list[tuple[dict, tuple[int, ...]]]] = {
    "vgg": _grid(_IMG_BATCH, depth=(11, 13, 16, 19), width=(0.25, 0.5, 1.0), batch_norm=(True, False)),
    "resnet": _grid(_IMG_BATCH, depth=(8, 14, 20, 32, 44, 56), width=(0.5, 1.0, 2.0))
    + _grid(_IMG_BATCH, depth=(18, 34, 50), width=(0.25, 0.5)),
    "densenet": _grid(_IMG_BATCH, growth_rate=(8, 12, 16, 24),
                      block_config=((6, 6, 6), (4, 8, 16, 12), (16, 16, 16), (6, 12, 24, 16))),
    "mobilenetv2": _grid(_IMG_BATCH, width=(0.25, 0.35, 0.5, 0.75, 1.0, 1.4)),
    "googlenet": _grid((4, 8, 16, 32, 64), width=(0.125, 0.25, 0.375, 0.5, 0.75)),
    "alexnet": _grid((16, 32, 64, 128, 256), width=(0.25, 0.5, 0.75, 1.0))
    + _grid((4, 8, 16, 32), width=(0.25, 0.5, 1.0), image_size=(128, 224)),
    "vit": _grid(_IMG_BATCH, layers=(2, 4, 6, 8), d_model=(96, 192, 256), patch_size=(4, 8)),
    "mlp": _grid((64, 128, 256, 512, 1024), input_dim=(784, 3072), hidden=(256, 1024, 2048, 4096), layers=(1, 2, 4)),
    "lstm_lm": _grid((8, 16, 32, 64), hidden_size=(128, 256, 512, 650), layers=(1, 2, 3), seq_len=(20, 35))
    + _grid((8, 16, 32), hidden_size=(1024, 1500), layers=(2,), seq_len=(35,)),
    "bert": _grid(_SEQ_BATCH, layers=(2, 4), d_model=(128, 256), seq_len=(64, 128), head=("mlm", "cls"))
    + _grid((2, 4, 8), layers=(4, 8), d_model=(512,), seq_len=(128,), head=("mlm", "cls")),
    "gpt": _grid(_SEQ_BATCH, layers=(2, 4, 6), d_model=(64, 128, 256), seq_len=(32, 64, 128), vocab_size=(8192,))
    + _grid((2, 4, 8), layers=(6, 12), d_model=(384, 512), seq_len=(128,), vocab_size=(16384,)),
}
for _knobs, _ in SWEEP_GRID["lstm_lm"]:  # Zaremba et al.: embedding as wide as the LSTM
    _knobs["embed_dim"] = _knobs["hidden_size"]
for _fam in ("vit", "bert", "gpt"):  # one head per 64 channels, as in BERT, GPT-2 and ViT
    for _knobs, _ in SWEEP_GRID[_fam]:
        _knobs["heads"] = max(1, _knobs["d_model"] // 64)
        _knobs["ffn"] = 4 * _knobs["d_model"]


# --------------------------------------------------------------------------- cost counting
def _seconds(family: str, cost: ForwardCost, batch_size: int, optimizer: str) -> float:
    per_sample = cost.flops * SECONDS_PER_FLOP[family] + cost.elements * SECONDS_PER_ELEMENT[family]
    return batch_size * per_sample + cost.ops * SECONDS_PER_OP + cost.params * SECONDS_PER_PARAM[optimizer]


def config_key(config: dict) -> str:
    """A canonical form of a config without its batch size; with the family, the cost cache key
    (families with the same knobs, e.g. alexnet and mobilenetv2, share keys)."""
    return json.dumps({k: v for k, v in config.items() if k != "batch_size"}, sort_keys=True, default=list)


def _plain(knobs: dict) -> dict:
    """Knob values as YAML/JSON-friendly types (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in knobs.items()}


class _CountingMode(TorchDispatchMode):
    """Counts ATen calls, output elements and FLOPs (torch's flop formulas) of what runs under it."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = self.elements = self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.ops += 1
        self.elements += sum(t.numel() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.flops += formula(*args, **kwargs, out_val=out)
        return out


@functools.lru_cache(maxsize=None)
def forward_cost(family: str, config_key: str) -> ForwardCost:
    """One forward pass of one sample of a configuration: from the shipped table, else counted."""
    shipped = _shipped_costs().get((family, config_key))
    return shipped if shipped is not None else _count_forward(family, config_key)


def _count_forward(family: str, config_key: str) -> ForwardCost:
    """Run one sample through the model under a counting mode (tens to hundreds of ms)."""
    config = dict(json.loads(config_key), batch_size=1)
    for name, value in config.items():
        if isinstance(value, list):
            config[name] = tuple(value)
    meta = build_model(family, config, device="meta")
    params = sum(p.numel() for p in meta.parameters())
    device = "meta" if params > META_ABOVE_PARAMS else "cpu"
    model = meta if device == "meta" else meta.to_empty(device="cpu")
    inputs, _ = families()[family].task(config).make_batch(config, 1, torch.Generator().manual_seed(0))
    if device == "meta":
        inputs = inputs.to("meta")
    elif inputs.is_floating_point():
        inputs = inputs.to(model.parameters().__next__().dtype)
    counter = _CountingMode()
    with torch.no_grad(), counter:
        model(inputs)
    flops = counter.flops
    if device == "cpu":  # the CPU LSTM kernel is one opaque call: add its matmuls by hand
        flops += sum(_lstm_flops(m, config["seq_len"]) for m in model.modules() if isinstance(m, nn.LSTM))
    return ForwardCost(float(flops), float(counter.elements), counter.ops, params)


def _lstm_flops(lstm: nn.LSTM, steps: int) -> float:
    """Multiply-add FLOPs of one sequence through an nn.LSTM: 4 gates x (input + hidden) x hidden."""
    total, width = 0.0, lstm.input_size
    for _ in range(lstm.num_layers):
        total += 2 * 4 * lstm.hidden_size * (width + lstm.hidden_size) * steps
        width = lstm.hidden_size
    return total


# --------------------------------------------------------------------------- shipped cost table
COST_TABLE = Path(__file__).with_name("sweep_costs.json")


@functools.lru_cache(maxsize=1)
def _shipped_costs() -> dict[tuple[str, str], ForwardCost]:
    """Forward costs of the grid's configurations, counted ahead (counting all takes ~20 s)."""
    if not COST_TABLE.exists():
        return {}
    rows = json.loads(COST_TABLE.read_text())
    return {(row["family"], row["key"]): ForwardCost(row["flops"], row["elements"], row["ops"], row["params"])
            for row in rows}


def write_cost_table(path: Path = COST_TABLE) -> int:
    """Count every grid configuration and write the table :func:`sweep_configs` reads; returns rows."""
    rows = []
    for family, variants in SWEEP_GRID.items():
        for knobs, _ in variants:
            key = config_key(resolve_config(family, **knobs))
            cost = _count_forward(family, key)
            rows.append({"family": family, "key": key, **cost.__dict__})
    path.write_text(json.dumps(rows, indent=0) + "\n")
    return len(rows)
