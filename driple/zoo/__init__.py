"""The model zoo: parameterised families of standard architectures and named presets, each
ready to train on synthetic data.

    >>> from driple.zoo import build_workload, make_optimizer
    >>> w = build_workload("resnet", depth=32, batch_size=64)
    >>> opt = make_optimizer("sgd", w.model.parameters())
    >>> inputs, targets = w.example_batch
    >>> loss = w.loss_fn(w.model(inputs), targets); loss.backward(); opt.step(); opt.zero_grad()

Modules: ``registry`` (specs, knobs, build), ``vision`` / ``sequence`` / ``tabular`` (families
and presets), ``blocks`` (Transformer layers), ``tasks`` (synthetic batches and losses),
``optim`` (optimizers), ``sweep`` (the collector's grid of configurations).
"""
from __future__ import annotations

from driple.zoo import sequence, tabular, vision  # noqa: F401  (registers the families)
from driple.zoo.optim import OPTIMIZERS, make_optimizer
from driple.zoo.registry import ModelSpec, Workload, build_workload, get_spec, list_models, resolve_config
from driple.zoo.sweep import estimate_step_seconds, sweep_configs

__all__ = [
    "ModelSpec",
    "Workload",
    "OPTIMIZERS",
    "build_workload",
    "estimate_step_seconds",
    "get_spec",
    "list_models",
    "make_optimizer",
    "resolve_config",
    "sweep_configs",
]
