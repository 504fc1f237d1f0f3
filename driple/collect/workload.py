"""Turn a job's model name into a workload the workers can train.

A zoo name goes to :func:`driple.zoo.build_workload`. ``module:function`` or
``path/to/file.py:function`` imports exactly the code the user named and calls the function
with the knobs (and ``batch_size`` when it accepts one). It may return a workload (anything
with ``model``, ``make_batch`` and ``loss_fn``) or a plain ``nn.Module`` that carries an
``input_shape`` attribute (one sample's shape); the latter is trained on random inputs with
the mean square of its output as loss — real compute and communication, synthetic objective.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from driple.errors import DripleError


@dataclass
class ModuleWorkload:
    """A user's ``nn.Module`` with random inputs of ``input_shape`` (per sample)."""

    name: str
    model: Any
    input_shape: tuple
    batch_size: int = 32
    family: str = "user"
    config: dict = field(default_factory=dict)

    def make_batch(self, batch_size=None, generator=None, device="cpu"):
        import torch

        bs = batch_size or self.batch_size
        x = torch.randn((bs, *self.input_shape), generator=generator).to(device)
        return x, None

    @staticmethod
    def loss_fn(out, targets):
        return out.float().pow(2).mean()


def check_models(names) -> None:
    """Fail early, before any process starts, on a zoo name the zoo does not know.

    User code (``module:function``) is not imported here; a mistake there fails its job.
    """
    zoo_names = sorted({n for n in names if ":" not in n})
    if not zoo_names:
        return
    try:
        from driple.zoo import get_spec
    except ImportError:
        return  # the workers will say so
    for name in zoo_names:
        get_spec(name)


def load_user_function(ref: str) -> Callable:
    """Import ``module:function`` or ``path/to/file.py:function`` and return the function."""
    target, _, func_name = ref.rpartition(":")
    if not target or not func_name:
        raise DripleError(f"cannot read {ref!r}; name user code as 'module:function' or 'file.py:function'")
    if target.endswith(".py"):
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise DripleError(f"no such file {path} (from model {ref!r})")
        mod_name = f"_driple_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as err:
            local = Path(*target.split(".")).with_suffix(".py")
            hint = (f"; {local} is here: name it as '{local}:{func_name}', or put its folder on "
                    "PYTHONPATH" if local.is_file() else "; is it installed, or on PYTHONPATH?")
            raise DripleError(f"cannot import module {target!r} for model {ref!r}: {err}{hint}") from err
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise DripleError(f"{target!r} has no function {func_name!r}")
    return fn


def load_workload(model: str, batch_size: int | None = None, knobs: dict | None = None):
    """Build the workload of a job's ``model`` (zoo name or user ``module:function``)."""
    knobs = dict(knobs or {})
    if ":" not in model:
        try:
            from driple.zoo import build_workload
        except ImportError as err:  # the zoo is optional for user code only
            raise DripleError(f"the model zoo is not available ({err}); name user code as 'module:function'") from err
        return build_workload(model, batch_size=batch_size, **knobs)

    fn = load_user_function(model)
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if batch_size is not None and ("batch_size" in params or takes_any):
        knobs["batch_size"] = batch_size
    obj = fn(**knobs)
    if all(hasattr(obj, a) for a in ("model", "make_batch", "loss_fn")):
        return obj
    import torch

    if isinstance(obj, torch.nn.Module):
        shape = getattr(obj, "input_shape", None)
        if shape is None:
            raise DripleError(
                f"{model} returned an nn.Module without 'input_shape'; set module.input_shape "
                "(shape of one sample) or return a workload with model, make_batch and loss_fn"
            )
        return ModuleWorkload(
            name=model.rpartition(":")[2], model=obj, input_shape=tuple(shape),
            batch_size=batch_size or 32, config=knobs,
        )
    raise DripleError(f"{model} returned {type(obj).__name__}; expected a workload or an nn.Module")


def make_optimizer(name: str, params, lr: float | None = None):
    """The zoo's optimizer factory when available, else the same three from torch."""
    try:
        from driple.zoo import make_optimizer as zoo_make_optimizer
    except ImportError:
        zoo_make_optimizer = None
    if zoo_make_optimizer is not None:
        return zoo_make_optimizer(name, params, lr=lr)
    import torch

    defaults = {"sgd": (torch.optim.SGD, 0.01), "adam": (torch.optim.Adam, 1e-3), "adamw": (torch.optim.AdamW, 1e-3)}
    cls, default_lr = defaults[name]
    return cls(params, lr=lr if lr is not None else default_lr)
