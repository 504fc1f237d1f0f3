"""What a job trains: a zoo name or the user's own factory, turned into a workload.

A zoo name goes to :func:`driple.zoo.build_workload`. ``module:function`` or
``path/to/file.py:function`` imports exactly the code the user named and calls the function
with the knobs (and ``batch_size`` when it accepts one). A relative ``file.py`` is looked for in
the current directory, then in the driple checkout (so ``datasets/out-of-zoo/models.py:llama``
works from any directory with an editable install). The function returns one of:

**A workload** (the protocol; :data:`PROTOCOL` is its short form for ``--help``):

- ``model``: the ``nn.Module`` to train;
- ``make_batch(batch_size, generator, device)`` -> ``(inputs, targets)``: a synthetic batch of
  ``batch_size`` samples drawn from ``generator`` (a ``torch.Generator``) on ``device``.
  ``inputs`` is a tensor (called as ``model(inputs)``) or a dict of them (keyword arguments:
  ``model(**inputs)``, e.g. ``input_ids``, ``attention_mask``, ``labels`` of a Hugging Face
  model); integer token ids are fine. ``targets`` may be None;
- ``loss_fn(output, targets)`` -> scalar tensor; optional (absent or None: :func:`default_loss`,
  which reads a Hugging Face ``ModelOutput``, a dict, a tuple or a tensor);
- optional ``name``, ``family``, ``config`` (recorded with the job).

**A plain** ``nn.Module`` with an ``input_shape`` attribute (one sample's shape). It is trained
on random inputs of that shape, float32 by default; ``input_dtype = torch.long`` (or a
``vocab_size`` attribute on the module) makes them token ids in ``[0, vocab_size)``, with
``vocab_size`` from the module or its ``config`` (as on a Hugging Face model). There are no
targets: the loss is :func:`default_loss` of the output (the mean square of its logits or first
tensor) -- real compute and communication, synthetic objective.

Every forward pass goes through :func:`forward` (the tracer, the predictor through it, and the
collector's workers), so a model runs the same way everywhere.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from driple.errors import DripleError

META = "meta"  # the device that holds shapes and dtypes, never data
IGNORE_INDEX = -100  # target id the default cross-entropy skips (as torch's and Hugging Face's)

#: The workload protocol in a few lines, for the commands' ``--help``.
PROTOCOL = """\
Your own model: MODEL = module:function or path/to/file.py:function (a relative file is looked
for in the current directory, then in the driple checkout). The function is called with the
--set knobs (and batch_size= when it takes it) and returns either
  - a workload: an object with .model (nn.Module), .make_batch(batch_size, generator, device)
    -> (inputs, targets) and, optionally, .loss_fn(output, targets) -> scalar. inputs is a
    tensor, called as model(inputs), or a dict, called as model(**inputs) (e.g. input_ids,
    attention_mask, labels); integer token ids are fine; targets may be None; or
  - an nn.Module with .input_shape (one sample's shape), trained on random float inputs, or on
    token ids in [0, vocab_size) when it sets .input_dtype = torch.long (vocab_size from the
    module or its .config), with no targets.
Default loss (no loss_fn): output.loss when the model computed one (a Hugging Face model given
labels), else cross-entropy of output.logits (or the first tensor of the output) against
integer targets aligned with them (class ids [B], or token ids [B, T], -100 skipped, no shift),
MSE against float targets, or the mean square of the logits when there are no targets."""


def call_arguments(inputs: Any) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of the forward call on ``inputs``: a dict (any mapping) is keyword
    arguments, anything else (a tensor, or whatever the model takes) the one positional one."""
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    return (inputs,), {}


def forward(model, inputs: Any):
    """``model(**inputs)`` for a dict of inputs, ``model(inputs)`` otherwise (see
    :func:`call_arguments`); works the same through ``DistributedDataParallel``, which hands
    keyword arguments to the module."""
    args, kwargs = call_arguments(inputs)
    return model(*args, **kwargs)


def step_loss(model, inputs: Any, targets: Any, loss_fn: Callable | None = None):
    """The loss of one training step: ``loss_fn(forward(model, inputs), targets)``, with
    :func:`default_loss` when ``loss_fn`` is None."""
    return (loss_fn or default_loss)(forward(model, inputs), targets)


def _field(output: Any, name: str):
    """``output.<name>`` or ``output[name]`` of a ``ModelOutput``/dict/object; None for a tensor,
    a tuple or a missing field."""
    import torch

    if isinstance(output, Mapping):
        return output.get(name)
    if isinstance(output, (torch.Tensor, tuple, list)):
        return None
    return getattr(output, name, None)


def first_tensor(output: Any):
    """The first tensor of a model's output (itself, or the first in a tuple/list/dict, depth
    first); None when there is none."""
    import torch

    if isinstance(output, torch.Tensor):
        return output
    values = output.values() if isinstance(output, Mapping) else output if isinstance(output, (tuple, list)) else ()
    for v in values:
        t = first_tensor(v)
        if t is not None:
            return t
    return None


def default_loss(output: Any, targets: Any):
    """The loss used when a workload gives no ``loss_fn``, in this order:

    1. ``output.loss`` (or ``output["loss"]``) when the model computed one: a Hugging Face model
       given ``labels`` in its inputs (it shifts a causal LM's labels itself);
    2. else the logits: ``output.logits`` / ``output["logits"]``, or the first tensor of the output
       (a tensor, tuple, list or dict), and then
       - no targets: their mean square (a synthetic objective with the real backward pass);
       - integer targets: mean cross-entropy over the last dimension, targets aligned with the
         logits (``[B, C]`` with ``[B]``, ``[B, T, V]`` with ``[B, T]``), ids -100 skipped.
         Nothing is shifted: a causal LM's ``make_batch`` gives next-token targets (as the zoo's
         ``gpt`` does), or passes ``labels`` in the inputs and lets the model shift them;
       - float targets: mean squared error.
    """
    import torch
    import torch.nn.functional as F

    loss = _field(output, "loss")
    if loss is not None:
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise DripleError(f"the default loss takes the model's output.loss, but it is "
                              f"{_describe(loss)}, not a scalar tensor; pass a loss_fn")
        return loss.reshape(())
    logits = _field(output, "logits")
    if not isinstance(logits, torch.Tensor):
        logits = first_tensor(output)
    if logits is None:
        raise DripleError(f"the default loss found no tensor in the model's output ({_describe(output)}); "
                          "return a tensor, a tuple or a ModelOutput with logits, or pass a loss_fn")
    if targets is None:
        return logits.float().pow(2).mean()
    if not isinstance(targets, torch.Tensor):
        raise DripleError(f"the default loss takes targets as a tensor or None, not {_describe(targets)}; "
                          "pass a loss_fn that reads them")
    if targets.dtype.is_floating_point:
        if targets.shape != logits.shape:
            raise DripleError(f"the default loss compares float targets with the logits by MSE, but the "
                              f"logits are {tuple(logits.shape)} and the targets {tuple(targets.shape)}; "
                              "pass a loss_fn")
        return F.mse_loss(logits.float(), targets.float())
    if logits.dim() < 1 or logits.shape[:-1].numel() != targets.numel():
        raise DripleError(
            f"the default loss takes integer targets as ids over the last dimension of the logits, "
            f"aligned with them: logits {tuple(logits.shape)} need {logits.shape[:-1].numel()} targets "
            f"(shape {tuple(logits.shape[:-1])}), got {tuple(targets.shape)}; pass a loss_fn, or give the "
            "model its labels in the inputs dict so that it computes its own loss")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def _describe(obj: Any) -> str:
    shape = getattr(obj, "shape", None)
    return f"{type(obj).__name__} of shape {tuple(shape)}" if shape is not None else type(obj).__name__


@dataclass
class ModuleWorkload:
    """A user's ``nn.Module`` with random inputs of ``input_shape`` (per sample), float or
    token ids (``input_dtype`` an integer dtype: ids in ``[0, vocab_size)``), and no targets."""

    name: str
    model: Any
    input_shape: tuple
    batch_size: int = 32
    family: str = "user"
    config: dict = field(default_factory=dict)
    input_dtype: Any = None  # torch dtype; None: float32
    vocab_size: int | None = None

    def make_batch(self, batch_size=None, generator=None, device="cpu"):
        """``(inputs, None)``: ``batch_size`` random samples of ``input_shape`` (float32 normal,
        or token ids); on the meta device only their shape and dtype."""
        import torch

        bs = batch_size or self.batch_size
        dtype = self.input_dtype or torch.float32
        shape = (bs, *self.input_shape)
        if torch.device(device).type == META:
            return torch.empty(shape, dtype=dtype, device=META), None
        if dtype.is_floating_point:
            return torch.randn(shape, generator=generator).to(device=device, dtype=dtype), None
        return torch.randint(0, self.vocab_size, shape, generator=generator, dtype=dtype).to(device), None

    loss_fn = staticmethod(default_loss)


class _WithDefaultLoss:
    """A user's workload that gives no ``loss_fn`` (or None): :func:`default_loss`, and every
    other attribute its own."""

    def __init__(self, inner):
        self.__dict__["_inner"] = inner

    loss_fn = staticmethod(default_loss)

    def __getattr__(self, name):
        return getattr(self.__dict__["_inner"], name)


def check_models(names) -> None:
    """Fail early, before any process starts, on a zoo name the zoo does not know or a user
    file (``file.py:function``) that is not there.

    User code is not imported here; a mistake inside it fails its job.
    """
    from driple.zoo.registry import get_spec

    for name in sorted(set(names)):
        if ":" not in name:
            get_spec(name)
        elif name.rpartition(":")[0].endswith(".py"):
            find_user_file(name.rpartition(":")[0], name)


def load_user_function(ref: str) -> Callable:
    """Import ``module:function`` or ``path/to/file.py:function`` and return the function."""
    target, _, func_name = ref.rpartition(":")
    if not target or not func_name:
        raise DripleError(f"cannot read {ref!r}; name user code as 'module:function' or 'file.py:function'")
    if target.endswith(".py"):
        path = find_user_file(target, ref)
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


def checkout_root() -> Path:
    """The directory that holds the ``driple`` package: a checkout's root for an editable
    install (with ``datasets/``), ``site-packages`` for a wheel."""
    return Path(__file__).resolve().parents[2]


def find_user_file(target: str, ref: str | None = None) -> Path:
    """The file of a ``file.py:function`` model: an absolute path as it is; a relative one from
    the current directory, else from the driple checkout (:func:`checkout_root`), so a grid that
    names ``datasets/out-of-zoo/models.py:llama`` runs from any directory, workers included."""
    path = Path(target).expanduser()
    candidates = [path] if path.is_absolute() else [Path.cwd() / path, checkout_root() / path]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    where = " or ".join(str(c) for c in candidates)
    raise DripleError(f"no such file {where} (from model {ref or target!r})")


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
    try:
        inspect.signature(fn).bind(**knobs)
    except TypeError as err:
        raise DripleError(f"calling {model} with {knobs or 'no knobs'} failed: {err}; check the knobs "
                          f"it accepts: {fn.__name__}{inspect.signature(fn)}") from None
    obj = _call_on_meta(fn, knobs) if shapes_only else None
    if obj is None:
        try:
            obj = fn(**knobs)
        except DripleError:
            raise
        except Exception as err:  # noqa: BLE001 - user code: one line, not a traceback
            raise DripleError(f"{model} could not be built: {type(err).__name__}: {err}") from err
    if hasattr(obj, "model") and hasattr(obj, "make_batch"):
        default = params["batch_size"].default if "batch_size" in params else None
        if batch_size is None and getattr(obj, "batch_size", None) is None and isinstance(default, int):
            try:  # the factory's own default (def build(batch_size=8)) is the workload's
                obj.batch_size = default
            except (AttributeError, TypeError):  # a frozen object: --batch-size then
                pass
        return obj if getattr(obj, "loss_fn", None) is not None else _WithDefaultLoss(obj)
    import torch

    if isinstance(obj, torch.nn.Module):
        shape = getattr(obj, "input_shape", None)
        if shape is None:
            raise DripleError(
                f"{model} returned an nn.Module without 'input_shape'; set module.input_shape "
                "(shape of one sample; and input_dtype = torch.long for token ids) or return a "
                "workload with model and make_batch (see `driple predict --help`)"
            )
        dtype, vocab = _module_inputs(model, obj)
        return ModuleWorkload(
            name=model.rpartition(":")[2], model=obj,
            input_shape=(int(shape),) if isinstance(shape, int) else tuple(shape),
            batch_size=batch_size or 32, config=knobs, input_dtype=dtype, vocab_size=vocab,
        )
    raise DripleError(f"{model} returned {type(obj).__name__}; expected a workload or an nn.Module "
                      "(a workload has model and make_batch; a module, input_shape)")


def _module_inputs(model: str, module) -> tuple[Any, int | None]:
    """``(dtype, vocab_size)`` of a plain module's random inputs: ``input_dtype`` (a torch dtype
    or its name, e.g. "long"); unset, token ids (long) when the module has its own int
    ``vocab_size``, else float32. Token ids need a vocabulary size: the module's ``vocab_size``,
    else its ``config.vocab_size`` (a Hugging Face model)."""
    import inspect

    import torch

    given = getattr(module, "input_dtype", None)
    # the module's own (an instance or class attribute, like input_shape; never a submodule or
    # parameter of that name, nor a property that would run code)
    own_vocab = inspect.getattr_static(module, "vocab_size", None)
    own_vocab = own_vocab if isinstance(own_vocab, int) and not isinstance(own_vocab, bool) else None
    raw = getattr(torch, given.removeprefix("torch."), None) if isinstance(given, str) else given
    if given is not None and not isinstance(raw, torch.dtype):
        raise DripleError(f"{model}: input_dtype {given!r} is not a torch dtype "
                          "(e.g. torch.long, torch.float32)")
    if raw is None:
        raw = torch.long if isinstance(own_vocab, int) and not isinstance(own_vocab, bool) else None
    if raw is None or raw.is_floating_point:
        return raw, None
    if raw.is_complex or raw == torch.bool:
        raise DripleError(f"{model}: input_dtype {raw} is neither a float nor an integer dtype")
    vocab = own_vocab if own_vocab is not None else getattr(getattr(module, "config", None), "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1:
        raise DripleError(f"{model}: integer inputs ({raw}) are token ids in [0, vocab_size); set "
                          "module.vocab_size (or a config.vocab_size)")
    return raw, vocab


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
    device directly; a user's workload object gives its own ``example_batch`` (at its own batch
    size) or ``make_batch(batch_size, generator, device="cpu")``, which is then moved to meta."""
    import torch

    from driple.zoo.registry import Workload

    if isinstance(workload, (Workload, ModuleWorkload)):
        return workload.make_batch(batch_size, device=META)
    batch = getattr(workload, "example_batch", None) if batch_size is None else None
    if batch is None:
        batch_size = batch_size or getattr(workload, "batch_size", None)
        if batch_size is None:
            raise DripleError("it has no batch size of its own: pass --batch-size (batch_size= in "
                              "Python), or give the workload a batch_size attribute or its factory "
                              "a batch_size default")
        try:
            batch = workload.make_batch(batch_size, generator=torch.Generator().manual_seed(0), device="cpu")
        except DripleError:
            raise
        except Exception as err:  # noqa: BLE001 - user code: one line, not a traceback
            raise DripleError(f"its make_batch({batch_size}, generator, device='cpu') failed: "
                              f"{type(err).__name__}: {err}") from None
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
