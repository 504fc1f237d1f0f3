"""The model zoo: parameterised families of standard architectures and named presets, each
ready to train on synthetic data.

    >>> from driple.zoo import build_workload, make_optimizer
    >>> w = build_workload("resnet", depth=32, batch_size=64)
    >>> opt = make_optimizer("sgd", w.model.parameters())
    >>> inputs, targets = w.example_batch
    >>> loss = w.loss_fn(w.model(inputs), targets); loss.backward(); opt.step(); opt.zero_grad()

Modules: ``registry`` (specs, knobs, build), ``vision`` / ``sequence`` / ``tabular`` (families
and presets), ``blocks`` (Transformer layers), ``tasks`` (synthetic batches and losses),
``optim`` (optimizers), ``workload`` (a job's model: zoo name or the user's own factory),
``sweep`` (the collector's grid of configurations).
"""
from __future__ import annotations

from driple._lazy import lazy_attributes

_LAZY = {
    "ModelSpec": "driple.zoo.registry",
    "Workload": "driple.zoo.registry",
    "build_workload": "driple.zoo.registry",
    "get_spec": "driple.zoo.registry",
    "list_models": "driple.zoo.registry",
    "resolve_config": "driple.zoo.registry",
    "OPTIMIZERS": "driple.zoo.optim",
    "make_optimizer": "driple.zoo.optim",
    "estimate_step_seconds": "driple.zoo.sweep",
    "sweep_configs": "driple.zoo.sweep",
    "load_workload": "driple.zoo.workload",
}

# lazy: the optimizer list and the job syntax are read without importing torch; the families
# register themselves when the registry is first asked (driple.zoo.registry.FAMILY_MODULES)
__getattr__, __all__ = lazy_attributes(__name__, _LAZY)
