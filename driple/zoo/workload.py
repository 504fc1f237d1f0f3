"""What a job trains: a zoo name or the user's own factory, turned into a workload.

A zoo name goes to :func:`driple.zoo.build_workload`. ``module:function`` or
``path/to/file.py:function`` imports exactly the code the user named and calls the function
with the knobs (and ``batch_size`` when it accepts one). It may return a workload (anything
with ``model``, ``make_batch`` and ``loss_fn``) or a plain ``nn.Module`` that carries an
``input_shape`` attribute (one sample's shape); the latter is trained on random inputs with
the mean square of its output as loss — real compute and communication, synthetic objective.

For a prediction only shapes matter: ``shapes_only=True`` builds the model on the meta device
(no weights in memory) and :func:`example_batch` gives the batch as meta tensors, so a
prediction costs the same at batch 32 or 100,000 and a large language model never needs its
weights in memory.
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

META = "meta"  # the device that holds shapes and dtypes, never data


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
        """``(inputs, None)``: ``batch_size`` random samples of ``input_shape`` (float32); on the
        meta device only their shape."""
        import torch

        bs = batch_size or self.batch_size
        if torch.device(device).type == META:
            return torch.empty((bs, *self.input_shape), device=META), None
        x = torch.randn((bs, *self.input_shape), generator=generator).to(device)
        return x, None

    @staticmethod
    def loss_fn(out, targets):
        return out.float().pow(2).mean()


def check_models(names) -> None:
    """Fail early, before any process starts, on a zoo name the zoo does not know.

    User code (``module:function``) is not imported here; a mistake there fails its job.
    """
    from driple.zoo.registry import get_spec

    for name in sorted({n for n in names if ":" not in n}):
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


def load_workload(model: str, batch_size: int | None = None, knobs: dict | None = None,
                  shapes_only: bool = False):
    """Build the workload of a job's ``model`` (zoo name or user ``module:function``).

    ``shapes_only``: build the model on the meta device (parameters with shapes, no memory), for
    tracing; a model that cannot be built there (an initialiser without a meta kernel, a factory
    that reads weights from a file) is built as usual, so a user factory may then run twice.
    """
    knobs = dict(knobs or {})
    if ":" not in model:
        from driple.zoo.registry import build_workload

        return build_workload(model, batch_size=batch_size, shapes_only=shapes_only, **knobs)

    fn = load_user_function(model)
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if batch_size is not None and ("batch_size" in params or takes_any):
        knobs["batch_size"] = batch_size
    obj = _call_on_meta(fn, knobs) if shapes_only else None
    if obj is None:
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


def _call_on_meta(fn: Callable, knobs: dict):
    """``fn(**knobs)`` with tensors created on the meta device; None when that fails."""
    import torch

    try:
        with torch.device(META):
            return fn(**knobs)
    except Exception:  # noqa: BLE001 - user code; built again as usual, which reports its errors
        return None


def example_batch(workload, batch_size: int | None = None):
    """The workload's example batch at ``batch_size`` samples (default: its own) as meta tensors:
    shapes and dtypes, nothing allocated. A zoo workload or a plain module draws it on the meta
    device directly; a user's workload object gives its own ``example_batch`` (or
    ``make_batch(batch_size)``), which is then moved to meta."""
    from driple.zoo.registry import Workload

    if isinstance(workload, (Workload, ModuleWorkload)):
        return workload.make_batch(batch_size, device=META)
    batch = getattr(workload, "example_batch", None)
    if batch is None:
        batch = workload.make_batch(batch_size)
    return to_meta(batch)


def to_meta(batch):
    """``batch`` (tensors, or tuples/lists/dicts of them) with every tensor on the meta device."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.to(META)
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_meta(b) for b in batch)
    if isinstance(batch, dict):
        return {k: to_meta(v) for k, v in batch.items()}
    return batch
