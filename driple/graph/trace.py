"""Trace one whole training step (forward, loss, backward, optimizer update) into a graph of ATen ops.

The step runs under a :class:`FakeTensorMode`: parameters, buffers, optimizer state and the
example batch are fake tensors (shapes, no data), so no real compute happens and the user's
model and optimizer are left untouched. The optimizer state is initialised (one fake
zero-gradient step) before tracing, so the traced update is the steady-state one (e.g. SGD's
momentum ``mul_``/``add_``, not the first-step ``clone``).

Ops are recorded by :class:`_Recorder`, a ``TorchDispatchMode`` stacked on the fake mode that
notes each ATen op, which recorded tensors it read and the size of what it wrote. It records
what ``make_fx(tracing_mode="real")`` records — same ops, same order, same fx node names (the
same composite decompositions, ``lift_fresh`` → ``lift_fresh_copy``, one ``getitem`` per
element of a tuple output, constant propagation for ``torch.tensor`` scalars) — without the
proxies, fx nodes and generated code that took most of make_fx's time. Two differences, both
corrections: frozen parameters are inputs like buffers (make_fx saw untracked constants, so
ops reading them lost their size and FLOPs), and an op whose kernel returns one tensor twice
is traced the same on every call (see :data:`_ALIASED_OUTPUTS`).
"""
from __future__ import annotations

import collections
import contextlib
import operator
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, is_fake, unset_fake_temporarily
from torch.utils._python_dispatch import TorchDispatchMode

from driple.errors import DripleError
from driple.graph.flops import flop_formula
from driple.hardware.blas import BLAS_OPS
from driple.zoo.workload import call_arguments, default_loss

try:  # newer torch; an older make_fx ran every CompositeImplicitAutograd decomposition it met
    from torch.utils._python_dispatch import autograd_would_have_decomposed
except ImportError:  # pragma: no cover
    def autograd_would_have_decomposed(func, flat_args) -> bool:
        return True

LossFn = Callable[[Any, Any], torch.Tensor]

#: Exceptions that mean "the step's control flow depends on tensor values".
_DATA_DEPENDENT = (
    "DataDependentOutputException",
    "GuardOnDataDependentSymNode",
    "DynamicOutputShapeException",
    "UnsupportedOperatorException",
)


class OpNode:
    """One recorded op (or input) of a traced step; the fields ``driple`` reads from an fx node.

    ``op`` is ``"placeholder"`` (a step input) or ``"call_function"``; ``target`` the ATen
    ``OpOverload`` (or ``operator.getitem`` for one element of a tuple output); ``name`` the
    name ``make_fx`` would give the node; ``all_input_nodes`` the recorded nodes whose tensors
    the op read, in argument order. ``out_numel``/``out_bytes`` are the elements/bytes of its
    tensor outputs when it ran; ``flops`` torch's flop formula for matmul/conv/attention, else
    ``out_numel``. ``args``: for the ops a BLAS library may run
    (:data:`~driple.hardware.blas.BLAS_OPS`), their arguments with each tensor as
    ``(shape, strides)`` (what :mod:`driple.hardware.blas` reads: a product's buffer depends on
    whether an operand is a transposed view), else ().
    """

    __slots__ = ("name", "op", "target", "all_input_nodes", "out_numel", "out_bytes", "flops", "args")

    def __init__(self, name: str, op: str, target: Any, inputs: tuple[OpNode, ...] = ()):
        self.name = name
        self.op = op
        self.target = target
        self.all_input_nodes = inputs
        self.out_numel = 0
        self.out_bytes = 0
        self.flops = 0
        self.args = ()

    def __repr__(self) -> str:
        return f"OpNode({self.name!r}, {self.target})"


class StepGraph:
    """The recorded ops of a traced function, in execution order (inputs first).

    ``graph.nodes`` also works (as on an fx ``GraphModule``), for code written against the
    make_fx trace.
    """

    __slots__ = ("nodes",)

    def __init__(self, nodes: list[OpNode]):
        self.nodes = nodes

    @property
    def graph(self) -> StepGraph:
        return self

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return f"StepGraph({len(self.nodes)} nodes)"


@contextlib.contextmanager
def _no_autocast_cache():
    """As make_fx: the autocast cache would hand out tensors created outside the trace."""
    old = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(False)
    try:
        yield
    finally:
        torch.set_autocast_cache_enabled(old)


_aten = torch.ops.aten


def _shapes_of(args) -> tuple:
    """``args`` with each tensor as ``(shape, strides)`` (tuples of ints), lists and tuples kept
    as tuples."""
    def one(a):
        if isinstance(a, torch.Tensor):
            return tuple(int(d) for d in a.shape), tuple(int(d) for d in a.stride())
        if isinstance(a, (list, tuple)):
            return tuple(one(x) for x in a)
        return a
    return tuple(one(a) for a in args)


_HANDLED = (torch.Tensor, nn.Parameter, FakeTensor)
_ACCESSORS = (_aten.size.default, _aten.stride.default, _aten.storage_offset.default)
_DEVICE = torch.ops.prim.device.default


def _collect(value: Any, out: list[torch.Tensor]) -> None:
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, out)
    elif isinstance(value, dict):  # a batch's keyword inputs (ATen arguments are never dicts)
        for v in value.values():
            _collect(v, out)


def _flat_tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """Tensors in ``args`` then ``kwargs`` values, in pytree order."""
    out: list[torch.Tensor] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple, dict)):
            _collect(a, out)
    for a in kwargs.values():
        _collect(a, out)
    return out


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], Any]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


class _OpInfo:
    """Per-op facts the recorder needs on every call, looked up once per op."""

    __slots__ = ("short", "data_dependent", "seeded", "formula")

    def __init__(self, func, names: torch.fx.Graph):
        self.short = names._target_to_str(func.overloadpacket.__name__)  # make_fx's name candidate
        self.data_dependent = torch.Tag.data_dependent_output in func.tags
        self.seeded = torch.Tag.nondeterministic_seeded in func.tags
        self.formula = flop_formula(func)


_INFO: dict[Any, _OpInfo] = {}
#: Ops seen returning the same tensor at two output positions (CPU LSTM's backward returns one
#: gradient for both biases). torch's fake-tensor cache rebuilds a cached output tuple as
#: distinct tensors, so from the second call on autograd would see two gradients, steal both,
#: and the graph would lose the copy eager PyTorch makes: such ops skip the cache.
_ALIASED_OUTPUTS: set = set()
if hasattr(torch.ops.aten, "mkldnn_rnn_layer_backward"):  # known up front: code outside driple may
    _ALIASED_OUTPUTS.add(torch.ops.aten.mkldnn_rnn_layer_backward.default)  # have cached it first
_DECOMPOSES: dict[tuple, bool] = {}  # (op, device type of its first tensor arg) -> decompose it?
_CIA = torch._C.DispatchKey.CompositeImplicitAutograd


def _tensor_size(value: Any) -> tuple[int, int]:
    """(elements, bytes) of the tensors in ``value`` (a tensor or nested tuple/list of them)."""
    if isinstance(value, torch.Tensor):
        n = value.numel()
        return n, n * value.element_size()
    if isinstance(value, (list, tuple, dict)):
        numel = nbytes = 0
        for v in (value.values() if isinstance(value, dict) else value):
            a, b = _tensor_size(v)
            numel += a
            nbytes += b
        return numel, nbytes
    return 0, 0


def _repeats_a_tensor(values: list | tuple) -> bool:
    ids = [id(v) for v in values if isinstance(v, torch.Tensor)]
    return len(set(ids)) < len(ids)


def _would_decompose(func, flat: list[torch.Tensor]) -> bool:
    """make_fx's test for running an op's CompositeImplicitAutograd decomposition instead of it."""
    if flat:  # a fake tensor's device is a plain attribute; .device would dispatch prim.device
        first = flat[0]
        key = (func, (first.fake_device if isinstance(first, FakeTensor) else first.device).type)
    else:
        key = (func, None)
    hit = _DECOMPOSES.get(key)
    if hit is None:  # autograd would have decomposed it, and OpOverload.decompose has a decomposition
        hit = autograd_would_have_decomposed(func, flat[:1]) and (
            _CIA in func.py_kernels or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), _CIA))
        _DECOMPOSES[key] = hit
    return hit


class _Recorder(TorchDispatchMode):
    """Records the ATen ops run under it as :class:`OpNode` s, the way make_fx's proxy mode does.

    One recorder per trace. A tensor maps to the node that last produced it (an in-place op
    re-maps its input) through a weak reference, as make_fx's tracker does: a strong one would
    raise the tensor's use count and change what autograd does (``AccumulateGrad`` copies a
    gradient it may not steal, adding ``new_empty_strided`` + ``copy_`` per parameter).
    """

    def __init__(self, fake_mode):
        super().__init__()
        self.fake_mode = fake_mode
        self.nodes: list[OpNode] = []
        # id(tensor) -> (weak ref to it, node whose output it is now, its value if a small constant)
        self._entries: dict[int, tuple[weakref.ref, OpNode, torch.Tensor | None]] = {}
        self._has_const = False
        self._names = torch.fx.Graph()  # fx's namer: node names match make_fx's

    def _name(self, candidate: str) -> str:
        return self._names._graph_namespace.create_name(candidate, None)

    def placeholder(self, value: Any, position: int) -> OpNode:
        node = OpNode(self._name(f"arg{position}_1"), "placeholder", None)
        node.out_numel, node.out_bytes = _tensor_size(value)
        node.flops = node.out_numel
        self.nodes.append(node)
        for t in _flat_tensors((value,), {}):
            self._track(t, node, None)
        return node

    def _entry(self, t: torch.Tensor):
        e = self._entries.get(id(t))
        return e if e is not None and e[0]() is t else None

    def node_of(self, value: Any) -> OpNode | None:
        e = self._entry(value) if isinstance(value, torch.Tensor) else None
        return e[1] if e is not None else None

    def _track(self, t: torch.Tensor, node: OpNode, constant: torch.Tensor | None) -> None:
        self._entries[id(t)] = (weakref.ref(t), node, constant)
        self._has_const = self._has_const or constant is not None

    def _track_tree(self, out: Any, node: OpNode, constant: Any) -> None:
        if isinstance(out, torch.Tensor):
            self._track(out, node, constant)
        elif isinstance(out, (list, tuple)):
            for i, item in enumerate(out):  # as make_fx: a getitem node per element, used or not
                item_node = OpNode(self._name("getitem"), "call_function", operator.getitem, (node,))
                item_node.out_numel, item_node.out_bytes = _tensor_size(item)
                item_node.flops = item_node.out_numel
                self.nodes.append(item_node)
                self._track_tree(item, item_node, None if constant is None else constant[i])

    def _uncached(self, func, args, kwargs):
        """Run ``func`` past the fake-tensor cache, which would return distinct tensors where
        the kernel returns one tensor twice (see :data:`_ALIASED_OUTPUTS`)."""
        enabled = self.fake_mode.cache_enabled
        self.fake_mode.cache_enabled = False
        try:
            return func(*args, **kwargs)
        finally:
            self.fake_mode.cache_enabled = enabled

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # Mirrors torch.fx.experimental.proxy_tensor.proxy_call for tracing_mode="real" without
        # a decomposition table; comments there explain each special case.
        kwargs = kwargs or {}
        if func is _DEVICE:  # asked from C++ for every op on a fake tensor (GPT-2 small: ~4500
            t = args[0]      # times); answered as FakeTensorMode's device handler would
            if isinstance(t, FakeTensor):
                return torch.device("meta") if t.fake_mode.in_kernel_invocation else t.fake_device
            return func(*args, **kwargs)
        flat = _flat_tensors(args, kwargs)
        entries = {}  # id -> entry, for the tensors of this call the trace has seen
        for t in flat:
            e = self._entry(t)
            if e is not None:
                entries[id(t)] = e
            elif type(t) not in _HANDLED:  # other tensor subclasses handle themselves first
                return NotImplemented
        if func not in _ACCESSORS and _would_decompose(func, flat):
            with self:
                r = func.decompose(*args, **kwargs)
                if r is not NotImplemented:
                    return r
        if func is _aten.is_nonzero.default:
            with self:
                torch._check(args[0].numel() == 1,
                             lambda: "Boolean value of Tensor with more than one value is ambiguous")
                return (args[0] != 0).item()

        if self._has_const:
            all_constant = all(e[2] is not None for e in entries.values())
            any_constant = any(e[2] is not None for e in entries.values())
        else:
            all_constant, any_constant = not entries, False  # vacuously all constant with no inputs

        def constant_args():
            def swap(t):
                e = entries.get(id(t))
                return t if e is None else e[2]
            return _map_tensors(args, swap), _map_tensors(kwargs, swap)

        info = _INFO.get(func)
        if info is None:
            info = _INFO[func] = _OpInfo(func, self._names)
        if info.data_dependent:
            if all_constant:
                cargs, ckwargs = constant_args()
                with unset_fake_temporarily():
                    return func(*cargs, **ckwargs)
            if not any(is_fake(t) for t in flat):
                raise RuntimeError(
                    f"It appears that you're trying to get value out of a tracing tensor with {func} - "
                    "erroring out! It's likely that this is caused by data-dependent control flow or similar.")
        if func is _aten.lift_fresh.default:  # the copy: later in-place ops must not alter the constant
            func = _aten.lift_fresh_copy.default
            info = _INFO.get(func) or _INFO.setdefault(func, _OpInfo(func, self._names))

        node = OpNode(self._name(info.short), "call_function", func,
                      tuple(dict.fromkeys([e[1] for e in entries.values()])))
        self.nodes.append(node)
        if func in _ALIASED_OUTPUTS:
            out = self._uncached(func, args, kwargs)
        else:
            out = func(*args, **kwargs)
            if isinstance(out, (tuple, list)) and _repeats_a_tensor(out):
                _ALIASED_OUTPUTS.add(func)

        node.out_numel, node.out_bytes = _tensor_size(out)
        node.flops = node.out_numel
        if func in BLAS_OPS:
            node.args = _shapes_of(args)
        if info.formula is not None:  # tensors the trace had not seen read as None, as in the fx graph
            fargs = [(a if id(a) in entries else None) if isinstance(a, torch.Tensor) else a for a in args]
            fkwargs = {k: (v if id(v) in entries else None) if isinstance(v, torch.Tensor) else v
                       for k, v in kwargs.items()}
            try:
                node.flops = int(info.formula(*fargs, out_val=out, **fkwargs))
            except Exception:  # noqa: BLE001 — an unusual signature; keep the elementwise count
                pass

        constant = None
        if func is _aten.lift_fresh_copy.default and out.numel() <= 1:
            with unset_fake_temporarily():
                constant = args[0].clone()
        elif any_constant and all_constant and not info.seeded and all(
                t.numel() <= 1 for t in _flat_tensors((out,), {})):
            cargs, ckwargs = constant_args()
            with unset_fake_temporarily():
                constant = func(*cargs, **ckwargs)
        self._track_tree(out, node, constant)
        return out


def _record(fn: Callable, inputs: list, fake_mode) -> tuple[StepGraph, list[OpNode], list[OpNode | None]]:
    """Run ``fn(*inputs)`` under ``fake_mode`` and record its ATen ops.

    Returns the graph, one placeholder per input, and per output of ``fn`` (a tuple) the node
    that produced it (``None`` for a non-tensor or a tensor the trace never saw).
    """
    rec = _Recorder(fake_mode)
    placeholders = [rec.placeholder(x, i) for i, x in enumerate(inputs)]
    with fake_mode, rec, _no_autocast_cache():
        outputs = fn(*inputs)
    return StepGraph(rec.nodes), placeholders, [rec.node_of(o) for o in outputs]


@dataclass
class TracedStep:
    """A traced training step and where its parameters and gradients are in the graph.

    ``graph_module`` holds forward and backward (a :class:`StepGraph`; the name is kept from
    the make_fx trace it replaces); ``grad_nodes[i]`` is the node that produces the gradient
    of trainable parameter ``i`` (``None`` if it received none); ``loss_node`` ends the
    forward pass; ``update`` is the optimizer's per-kind update template; ``output_nodes`` make
    the tensors the model returned (its logits, and the loss where the model computes it).
    """

    graph_module: StepGraph
    param_names: list[str]
    param_shapes: list[tuple[int, ...]]
    param_dtypes: list[torch.dtype]
    param_nodes: list[OpNode]
    grad_nodes: list[OpNode | None]
    loss_node: OpNode
    batch_size: int
    seconds: float
    optimizer: str = ""
    update: "UpdateTemplate | None" = None
    output_nodes: list = field(default_factory=list)

    @property
    def param_bytes(self) -> list[int]:
        return [
            int(torch.Size(s).numel()) * torch.empty((), dtype=d).element_size()
            for s, d in zip(self.param_shapes, self.param_dtypes)
        ]

    @property
    def num_params(self) -> int:
        return sum(int(torch.Size(s).numel()) for s in self.param_shapes)


def _optimizer_names() -> str:
    from driple.zoo.optim import OPTIMIZERS

    return ", ".join(repr(name) for name in OPTIMIZERS)


def _make_optimizer(spec: Any, params: list[nn.Parameter]) -> torch.optim.Optimizer:
    """Build the optimizer over the fake parameters from a name, a factory or an instance."""
    if isinstance(spec, str):
        from driple.zoo import make_optimizer

        opt = make_optimizer(spec, params)
    elif isinstance(spec, torch.optim.Optimizer):
        opt = type(spec)(params, **{k: v for k, v in spec.defaults.items() if k != "params"})
    elif isinstance(spec, type) and issubclass(spec, torch.optim.Optimizer):
        opt = spec(params)
    elif callable(spec):
        opt = spec(params)
        if not isinstance(opt, torch.optim.Optimizer):
            raise DripleError(
                f"the optimizer factory returned {type(opt).__name__}, not a torch.optim.Optimizer; "
                f"pass a name ({_optimizer_names()}), an optimizer class, or a function params -> optimizer"
            )
    else:
        raise DripleError(
            f"cannot use {spec!r} as an optimizer; pass a name ({_optimizer_names()}), an "
            "optimizer class, an optimizer instance, or a function params -> optimizer"
        )
    for group in opt.param_groups:  # per-parameter kernels, as on CPU; fused/foreach would hide them
        for key in ("foreach", "fused"):
            if key in group:
                group[key] = False if key == "foreach" else None
    return opt


def _like(t: torch.Tensor, fake_mode) -> torch.Tensor:
    """A fake tensor with ``t``'s shape, strides and dtype on the default device.

    What ``torch.empty_strided`` makes under ``fake_mode``, built straight from a meta tensor
    (as the fake mode itself does): no dispatch, about a fifth of the cost, no data read.
    """
    meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return fake_mode.fake_tensor_converter.from_meta_and_device(fake_mode, meta, torch.get_default_device())


def _fake_parameter(t: torch.Tensor, fake_mode) -> torch.Tensor:
    """A fake trainable parameter shaped like ``t``: what ``nn.Parameter(_like(t))`` returns
    (a leaf fake tensor that requires grad and passes ``isinstance(_, nn.Parameter)``), without
    the ``detach`` dispatch ``nn.Parameter`` spends on a tensor subclass."""
    p = _like(t, fake_mode).requires_grad_(True)
    p._is_param = True
    return p


def _fake_batch(value: Any, fake_mode) -> Any:
    """The example batch as the trace reads it: a meta tensor (shapes only, see
    :func:`driple.zoo.workload.example_batch`) becomes a fake tensor on the default device, a
    real tensor a fake one (its data is never read); so are those nested in tuples, lists and
    dicts (keyword inputs)."""
    return _map_tensors(value, lambda t: _like(t, fake_mode) if t.is_meta else fake_mode.from_tensor(t))


def _split_batch(example_batch: Any) -> tuple[Any, Any]:
    if isinstance(example_batch, (torch.Tensor, dict)):  # inputs only (a dict: keyword inputs)
        return example_batch, None
    if isinstance(example_batch, (tuple, list)) and len(example_batch) == 2:
        return example_batch[0], example_batch[1]
    raise DripleError(
        "the example batch must be inputs (a tensor, or a dict of keyword inputs) or a pair "
        f"(inputs, targets); got {type(example_batch).__name__}"
    )


#: Per phase of the traced step: where it failed, and what to check.
_PHASES = {
    "forward": ("in the model's forward",
                "Check that the inputs have the shape and dtype the model expects (a dict of inputs "
                "is passed as keyword arguments; a plain module gets float inputs unless it sets "
                "input_dtype, e.g. torch.long for token ids) and that the forward runs eagerly on CPU "
                "with them."),
    "default loss": ("in the default loss (no loss_fn was given)",
                     "It takes output.loss when the model computed one, else cross-entropy of the "
                     "logits against integer targets aligned with them, MSE against float targets, or "
                     "the mean square of the logits without targets; pass a loss_fn(output, targets) "
                     "for anything else."),
    "loss": ("in the loss_fn you gave",
             "Check that it accepts (output, targets) as the model returns them (a tensor, a tuple "
             "or a ModelOutput) and returns a scalar tensor."),
    "backward": ("in the backward pass", "Check that the step runs eagerly on CPU with that batch."),
}


def _explain(exc: Exception, what: str, phase: str | None = None, labels_in_inputs: bool = False) -> DripleError:
    """One clear error for a failure inside the traced step. ``labels_in_inputs``: the batch's
    inputs are a dict with ``labels`` (a Hugging Face model computing its own loss, where
    heads such as DeBERTa-v2's select the valid labels with ``nonzero()``)."""
    name = type(exc).__name__
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    where, hint = _PHASES.get(phase, ("", ""))
    where = f" {where}" if where else ""
    if name in _DATA_DEPENDENT or "data-dependent" in str(exc) or "data dependent" in str(exc):
        labels = (" The inputs hold `labels`: a model that computes its own loss from them may "
                  "select the valid ones by value; return them as targets instead (make_batch -> "
                  "(inputs, labels)) and driple's default loss is used.") if labels_in_inputs else ""
        return DripleError(
            f"{what} cannot be traced{where} because its control flow or output shapes depend on tensor "
            f"values ({name}: {first}). driple traces with fake tensors that have shapes but no "
            "values, so Python `if`/`while` on a tensor, `.item()`, `.tolist()`, `nonzero()` or "
            "boolean masking in forward cannot be followed. Rewrite that part with tensor ops "
            "(torch.where, masks multiplied in) or make the decision from shapes/config instead." + labels
        )
    return DripleError(
        f"{what} failed on the example batch{where} ({name}: {first}). " + (hint or
        "Check that the example batch has the shape and dtype the model expects (inputs first, "
        "then targets) and that the step runs eagerly on CPU with that batch.")
    )


def trace_training_step(
    model: nn.Module,
    example_batch: Any,
    loss_fn: LossFn | None = None,
    optimizer: Any = "sgd",
) -> TracedStep:
    """Trace forward + loss + backward + ``optimizer.step()`` of ``model`` on ``example_batch``.

    ``example_batch`` is ``(inputs, targets)`` or ``inputs``, real or meta tensors (only shapes
    and dtypes are read); ``loss_fn(output, targets)`` defaults to :func:`default_loss`. Nothing
    real is computed and the model is not modified.

    Forward and backward are traced whole. The optimizer update is traced once per *kind* of
    parameter (same param group, rank and dtype) on a representative, since torch's
    per-parameter update runs the same ops for every parameter of a kind; the op graph
    replicates it per parameter (see :mod:`driple.graph.opgraph`). This keeps tracing cost
    independent of the parameter count.
    """
    if not isinstance(model, nn.Module):
        raise DripleError(f"expected a torch.nn.Module to trace, got {type(model).__name__}")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call

    # never blame a loss the user did not pass (a workload without one hands on default_loss)
    loss_phase = "default loss" if loss_fn is None or loss_fn is default_loss else "loss"
    loss_fn = loss_fn or default_loss
    inputs, targets = _split_batch(example_batch)
    start = time.perf_counter()
    fake_mode = FakeTensorMode()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise DripleError("the model has no trainable parameters: there is no training step to trace")
    # fresh fake tensors of the same layout: cheaper than from_tensor, no data read
    params = {n: _fake_parameter(p, fake_mode) for n, p in named}
    frozen = {n: _like(p, fake_mode) for n, p in model.named_parameters() if not p.requires_grad}
    buffers = {n: _like(b, fake_mode) for n, b in model.named_buffers()}
    plist = list(params.values())
    opt = _make_optimizer(optimizer, plist)
    fake_inputs, fake_targets = _fake_batch(inputs, fake_mode), _fake_batch(targets, fake_mode)

    phase = ["forward"]  # the part of the step running, for the error message

    def step(x, y, *_state):
        args, kwargs = call_arguments(x)  # model(x), or model(**x) for a dict: as driple.zoo.workload.forward
        out = functional_call(model, {**params, **frozen, **buffers}, args, kwargs)
        phase[0] = loss_phase
        loss = loss_fn(out, y)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise DripleError(f"the {'loss function' if loss_phase == 'loss' else 'default loss'} must "
                              f"return a scalar tensor, not {type(loss).__name__}"
                              + (f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""))
        phase[0] = "backward"
        loss.backward()
        grads = [p.grad for p in plist]
        for p in plist:
            p.grad = None
        outputs = []  # what the model returned: alive until its caller takes the loss
        _collect(out, outputs)
        return (loss, *grads, *outputs)

    was_training = model.training
    model.train()
    try:  # frozen parameters are inputs too, like buffers: the ops reading them see their size
        graph, placeholders, outs = _record(
            step, [fake_inputs, fake_targets, *plist, *frozen.values(), *buffers.values()], fake_mode)
    except DripleError:
        raise
    except Exception as exc:  # noqa: BLE001 — user code may raise anything; explain it
        raise _explain(exc, "the training step", phase[0],
                       labels_in_inputs=isinstance(inputs, dict) and "labels" in inputs) from None
    finally:
        model.train(was_training)
    grad_nodes, output_nodes = outs[1:1 + len(plist)], [n for n in outs[1 + len(plist):] if n is not None]
    template = _trace_optimizer_template(opt, plist, [g is not None for g in grad_nodes], fake_mode)
    first = next(iter(_flat_tensors((inputs,), {})), None)  # the first input tensor's first dimension
    batch = int(first.shape[0]) if first is not None and first.dim() else 1
    return TracedStep(
        graph_module=graph,
        param_names=[n for n, _ in named],
        param_shapes=[tuple(p.shape) for _, p in named],
        param_dtypes=[p.dtype for _, p in named],
        param_nodes=placeholders[2 : 2 + len(plist)],
        grad_nodes=grad_nodes,
        loss_node=outs[0],
        output_nodes=output_nodes,
        batch_size=batch,
        seconds=time.perf_counter() - start,
        optimizer=type(opt).__name__,
        update=template,
    )


@dataclass
class UpdateTemplate:
    """The optimizer update traced on one representative parameter per kind.

    ``rep_of[i]`` is the representative of parameter ``i`` (``None``: no gradient, no update);
    ``param_nodes[r]``/``grad_nodes[r]`` are representative ``r``'s placeholders in
    ``graph_module``; ``rep_numel[r]`` its element count (to scale sizes to parameter ``i``).
    """

    graph_module: StepGraph
    rep_of: list[int | None]
    param_nodes: list[OpNode]
    grad_nodes: list[OpNode]
    rep_numel: list[int]


def _trace_optimizer_template(opt, plist, has_grad, fake_mode) -> UpdateTemplate:
    import copy

    group_of = {id(p): gi for gi, g in enumerate(opt.param_groups) for p in g["params"]}
    kinds: dict[tuple, list[int]] = {}  # (param group, rank, dtype) -> parameter indices
    for i, (p, ok) in enumerate(zip(plist, has_grad)):
        if ok:
            kinds.setdefault((group_of[id(p)], p.dim(), p.dtype), []).append(i)
    rep_of: list[int | None] = [None] * len(plist)
    reps: list[nn.Parameter] = []
    groups: list[list[nn.Parameter]] = [[] for _ in opt.param_groups]
    for (gi, _, _), members in kinds.items():
        rep = max(members, key=lambda i: plist[i].numel())  # largest: scalars stay unambiguous
        for i in members:
            rep_of[i] = len(reps)
        reps.append(plist[rep])
        groups[gi].append(plist[rep])
    mini = copy.copy(opt)  # same class, hyper-parameters and hooks; only the representatives
    mini.param_groups = [{**g, "params": ps} for g, ps in zip(opt.param_groups, groups) if ps]
    mini.state = collections.defaultdict(dict)
    with fake_mode:
        grads = [torch.zeros_like(r) for r in reps]
        for r, g in zip(reps, grads):  # one zero-gradient step: steady-state optimizer state
            r.grad = g
        try:
            mini.step()
        except Exception as exc:  # noqa: BLE001 — any failure here is the optimizer's
            raise _explain(exc, "the optimizer step") from None
        state = [t for r in reps for t in mini.state[r].values() if isinstance(t, torch.Tensor)]

    def update(*_tensors):
        for r, g in zip(reps, grads):
            r.grad = g
        mini.step()
        for r in reps:
            r.grad = None
        return ()

    try:
        graph, ph, _ = _record(update, [*reps, *grads, *state], fake_mode)
    except Exception as exc:  # noqa: BLE001
        raise _explain(exc, "the optimizer step") from None
    n = len(reps)
    return UpdateTemplate(graph, rep_of, ph[:n], ph[n : 2 * n], [r.numel() for r in reps])
