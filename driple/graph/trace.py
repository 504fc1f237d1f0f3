"""Trace one whole training step (forward, loss, backward, optimizer update) into an ATen graph.

The step runs under ``make_fx`` with fake tensors: parameters, buffers, optimizer state and the
example batch are converted to :class:`FakeTensor` first, so no real compute happens and the
user's model and optimizer are left untouched. The optimizer state is initialised (one fake
zero-gradient step) before tracing, so the traced update is the steady-state one (e.g. SGD's
momentum ``mul_``/``add_``, not the first-step ``clone``).
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from driple.errors import DripleError

LossFn = Callable[[Any, Any], torch.Tensor]

#: Exceptions that mean "the step's control flow depends on tensor values".
_DATA_DEPENDENT = (
    "DataDependentOutputException",
    "GuardOnDataDependentSymNode",
    "DynamicOutputShapeException",
    "UnsupportedOperatorException",
)


@dataclass
class TracedStep:
    """A traced training step and where its parameters and gradients are in the graph.

    ``graph_module`` holds forward and backward; ``grad_nodes[i]`` is the fx node that produces
    the gradient of trainable parameter ``i`` (``None`` if it received none); ``loss_node``
    ends the forward pass; ``update`` is the optimizer's per-kind update template.
    """

    graph_module: torch.fx.GraphModule
    param_names: list[str]
    param_shapes: list[tuple[int, ...]]
    param_dtypes: list[torch.dtype]
    param_nodes: list[torch.fx.Node]
    grad_nodes: list[torch.fx.Node | None]
    loss_node: torch.fx.Node
    batch_size: int
    seconds: float
    optimizer: str = ""
    update: "UpdateTemplate | None" = None

    @property
    def param_bytes(self) -> list[int]:
        return [
            int(torch.Size(s).numel()) * torch.empty((), dtype=d).element_size()
            for s, d in zip(self.param_shapes, self.param_dtypes)
        ]

    @property
    def num_params(self) -> int:
        return sum(int(torch.Size(s).numel()) for s in self.param_shapes)


def default_loss(output: Any, targets: Any) -> torch.Tensor:
    """Cross-entropy for integer targets (class ids or tokens), MSE for float targets."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    if targets is None:
        return output.float().pow(2).mean()
    if not targets.dtype.is_floating_point:
        return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), targets.reshape(-1))
    return nn.functional.mse_loss(output, targets)


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
                "pass a name ('sgd', 'adam', 'adamw'), an optimizer class, or a function params -> optimizer"
            )
    else:
        raise DripleError(
            f"cannot use {spec!r} as an optimizer; pass a name ('sgd', 'adam', 'adamw'), an "
            "optimizer class, an optimizer instance, or a function params -> optimizer"
        )
    for group in opt.param_groups:  # per-parameter kernels, as on CPU; fused/foreach would hide them
        for key in ("foreach", "fused"):
            if key in group:
                group[key] = False if key == "foreach" else None
    return opt


def _like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor with ``t``'s shape, strides and dtype (fake under a FakeTensorMode)."""
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype)


def _split_batch(example_batch: Any) -> tuple[Any, Any]:
    if isinstance(example_batch, torch.Tensor):
        return example_batch, None
    if isinstance(example_batch, (tuple, list)) and len(example_batch) == 2:
        return example_batch[0], example_batch[1]
    raise DripleError(
        "the example batch must be a tensor of inputs or a pair (inputs, targets); got "
        f"{type(example_batch).__name__}"
    )


def _explain(exc: Exception, what: str) -> DripleError:
    name = type(exc).__name__
    first = (str(exc).strip().splitlines() or [""])[0][:300]
    if name in _DATA_DEPENDENT or "data-dependent" in str(exc) or "data dependent" in str(exc):
        return DripleError(
            f"{what} cannot be traced because its control flow or output shapes depend on tensor "
            f"values ({name}: {first}). driple traces with fake tensors that have shapes but no "
            "values, so Python `if`/`while` on a tensor, `.item()`, `.tolist()`, `nonzero()` or "
            "boolean masking in forward cannot be followed. Rewrite that part with tensor ops "
            "(torch.where, masks multiplied in) or make the decision from shapes/config instead."
        )
    return DripleError(
        f"{what} failed on the example batch ({name}: {first}). Check that the example batch "
        "has the shape and dtype the model expects (inputs first, then targets), that the loss "
        "function accepts (output, targets), and that the step runs eagerly on CPU with that batch."
    )


def trace_training_step(
    model: nn.Module,
    example_batch: Any,
    loss_fn: LossFn | None = None,
    optimizer: Any = "sgd",
) -> TracedStep:
    """Trace forward + loss + backward + ``optimizer.step()`` of ``model`` on ``example_batch``.

    ``example_batch`` is ``(inputs, targets)`` or ``inputs``; ``loss_fn(output, targets)``
    defaults to :func:`default_loss`. Nothing real is computed and the model is not modified.

    Forward and backward are traced whole. The optimizer update is traced once per *kind* of
    parameter (same param group, rank and dtype) on a representative, since torch's
    per-parameter update runs the same ops for every parameter of a kind; the op graph
    replicates it per parameter (see :mod:`driple.graph.opgraph`). This keeps tracing cost
    independent of the parameter count.
    """
    if not isinstance(model, nn.Module):
        raise DripleError(f"expected a torch.nn.Module to trace, got {type(model).__name__}")
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.func import functional_call

    loss_fn = loss_fn or default_loss
    inputs, targets = _split_batch(example_batch)
    start = time.perf_counter()
    fake_mode = FakeTensorMode()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not named:
        raise DripleError("the model has no trainable parameters: there is no training step to trace")
    with fake_mode:  # fresh fake tensors of the same layout: cheaper than from_tensor, no data read
        params = {n: nn.Parameter(_like(p), requires_grad=True) for n, p in named}
        frozen = {n: _like(p) for n, p in model.named_parameters() if not p.requires_grad}
        buffers = {n: _like(b) for n, b in model.named_buffers()}
    plist = list(params.values())
    opt = _make_optimizer(optimizer, plist)
    fake_inputs = fake_mode.from_tensor(inputs) if isinstance(inputs, torch.Tensor) else inputs
    fake_targets = fake_mode.from_tensor(targets) if isinstance(targets, torch.Tensor) else targets

    def step(x, y, *_state):
        out = functional_call(model, {**params, **frozen, **buffers}, (x,))
        loss = loss_fn(out, y)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise DripleError("the loss function must return a scalar tensor")
        loss.backward()
        grads = [p.grad for p in plist]
        for p in plist:
            p.grad = None
        return (loss, *grads)

    was_training = model.training
    model.train()
    try:
        with fake_mode:
            gm = make_fx(step, tracing_mode="real")(fake_inputs, fake_targets, *plist, *buffers.values())
    except DripleError:
        raise
    except Exception as exc:  # noqa: BLE001 — user code may raise anything; explain it
        raise _explain(exc, "the training step") from None
    finally:
        model.train(was_training)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    grad_nodes = [g if isinstance(g, torch.fx.Node) else None for g in outs[1:]]
    template = _trace_optimizer_template(opt, plist, [g is not None for g in grad_nodes], fake_mode, make_fx)
    batch = int(inputs.shape[0]) if isinstance(inputs, torch.Tensor) and inputs.dim() else 1
    return TracedStep(
        graph_module=gm,
        param_names=[n for n, _ in named],
        param_shapes=[tuple(p.shape) for _, p in named],
        param_dtypes=[p.dtype for _, p in named],
        param_nodes=placeholders[2 : 2 + len(plist)],
        grad_nodes=grad_nodes,
        loss_node=outs[0],
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

    graph_module: torch.fx.GraphModule
    rep_of: list[int | None]
    param_nodes: list[torch.fx.Node]
    grad_nodes: list[torch.fx.Node]
    rep_numel: list[int]


def _trace_optimizer_template(opt, plist, has_grad, fake_mode, make_fx) -> UpdateTemplate:
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
            gm = make_fx(update, tracing_mode="real")(*reps, *grads, *state)
        except Exception as exc:  # noqa: BLE001
            raise _explain(exc, "the optimizer step") from None
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    n = len(reps)
    return UpdateTemplate(gm, rep_of, ph[:n], ph[n : 2 * n], [r.numel() for r in reps])
