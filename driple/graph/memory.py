"""Simulate the memory a training step holds, op by op, over its traced graph: no learning.

The trace (:mod:`driple.graph.trace`) knows every tensor a step makes, its size, and the ops
that read it. Walking the ops in execution order:

- an op's output is a new storage of its bytes, unless its schema returns an alias of an input
  (views, in-place ops: ``Tensor(a)`` / ``Tensor(a!)``), which shares the input's storage; an op
  returning several tensors allocates each at its ``getitem``;
- a storage is freed after the last op that reads any tensor on it (liveness), unless the step
  returns it (the loss, the gradients) or it is an input (parameters, buffers, the batch);
- a CPU LSTM layer (oneDNN's ``mkldnn_rnn_layer``) keeps a workspace from its forward pass to
  its backward pass that the trace's meta kernel reports as empty: it is sized as oneDNN lays
  it out (:func:`lstm_workspace_bytes`);
- parameters, buffers, the batch and the optimizer's state (traced once per kind of parameter
  and scaled to each parameter: SGD's momentum, Adam's two moments) are held all step long;
  the gradients from the moment they are made to the end of the update;
- the distributed strategy's declaration (:class:`~driple.strategies.WorkerMemory`) adds or
  removes the rest: DDP's gradient buckets (a copy of every gradient, held all step); a
  parameter-server worker holds no optimizer state (its server steps) but receives a copy of
  the parameters after its backward pass; an FSDP worker holds 1/W of the parameters,
  gradients and optimizer state, a full copy of a unit's parameters beside its shard while the
  unit computes (the largest unit, and the root unit, which stays gathered from forward to
  backward; a root that is the only unit twice, :func:`_gathered_bytes`), and frees each full
  gradient once it is reduce-scattered.

The peak is the largest total over the step, with its breakdown. ``sampled=True`` gives the
peak the collector's memory label sees instead: a rank reads its allocated bytes at module
boundaries of the forward pass and after each gradient is accumulated (plus iteration marks),
so a transient inside the backward pass between two gradients, or inside the optimizer's
update, is not seen. On a CPU host the label (glibc's in-use bytes) also counts the runtime's
own heap, a level the evaluation fits once on training jobs (:func:`fit_offset`), and the
packing buffers the BLAS keeps between matrix products, which depend on the machine's code path
(:mod:`driple.hardware.blas`, :func:`with_blas_buffers`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PARTS = ("parameters", "gradients", "optimizer_state", "activations", "communication", "batch")


@dataclass
class MemoryEstimate:
    """Peak bytes of a step and what they hold at the peak (``breakdown``, bytes per part of
    :data:`PARTS`); ``phase`` says when the peak falls (``forward/backward`` or ``update``)."""

    peak_bytes: int
    breakdown: dict = field(default_factory=dict)
    phase: str = ""

    @property
    def peak_mb(self) -> float:
        return self.peak_bytes / 1e6

    def to_dict(self) -> dict:
        return {"peak_mb": self.peak_mb, "phase": self.phase,
                "breakdown_mb": {k: v / 1e6 for k, v in self.breakdown.items()}}


#: Ops whose output is a view of their input though their schema declares no alias (autograd
#: does not track the view; the storage is shared all the same).
UNTRACKED_VIEWS = frozenset({"aten::_unsafe_view"})


def _aliases_input(node) -> bool:
    """The op's (first) output shares an input's storage: a view or an in-place op."""
    schema = getattr(getattr(node, "target", None), "_schema", None)
    if schema is None or not schema.returns:
        return False
    return schema.returns[0].alias_info is not None or schema.name in UNTRACKED_VIEWS


def _returns_several(node) -> bool:
    schema = getattr(getattr(node, "target", None), "_schema", None)
    if schema is None:
        return False
    returns = schema.returns
    return len(returns) > 1 or (len(returns) == 1 and str(returns[0].type).endswith("[]"))


def _is_rnn_layer(node) -> bool:
    return getattr(getattr(node, "target", None), "__name__", "") == "mkldnn_rnn_layer.default"


def _good_ld(dim: int) -> int:
    """oneDNN's leading dimension of an f32 RNN buffer: ``dim`` rounded up to 16 floats (64 bytes),
    16 more where that is a multiple of 256 (4K aliasing)."""
    ld = -(-int(dim) // 16) * 16
    return ld + 16 if ld % 256 == 0 else ld


def lstm_workspace_bytes(seq_len: int, batch: int, input_size: int, hidden_size: int) -> int:
    """Bytes of the workspace oneDNN's LSTM keeps from a layer's forward pass (training, f32,
    one direction) to its backward pass: the gates of every step (``T·B·ld(4H)``), the hidden
    outputs (``T·B·ld(H)``), and five state buffers of ``2·(T+1)·B`` rows (layer states and
    the diff states of layer and iteration at ``ld(max(I, H))``, the cell state and its diff at
    ``H``), each region starting on a 4096-byte page."""
    t, b, h = int(seq_len), int(batch), int(hidden_size)
    states = _good_ld(max(int(input_size), h))
    regions = [t * b * _good_ld(4 * h), t * b * _good_ld(h),
               2 * (t + 1) * b * states, 2 * (t + 1) * b * h,
               2 * (t + 1) * b * states, 2 * (t + 1) * b * states, 2 * (t + 1) * b * h]
    total = 0
    for floats in regions:
        total = -(-total // 4096) * 4096 + 4 * floats
    return -(-total // 4096) * 4096


def rnn_workspace_bytes(layer, outputs) -> int:
    """The workspace of a traced ``mkldnn_rnn_layer`` (the CPU's fused LSTM layer), which the
    trace's meta kernel reports as empty: sized from the layer's inputs ``(input, w_ih, w_hh,
    ...)`` and outputs ``(output, h, c, workspace)``; 0 where it is not an f32 LSTM layer."""
    import math

    ins = list(layer.all_input_nodes)
    if len(ins) < 3 or len(outputs) < 2 or not outputs[1].out_numel:
        return 0
    hidden = math.isqrt(int(ins[2].out_numel) // 4)
    if hidden < 1 or 4 * hidden * hidden != ins[2].out_numel or ins[1].out_numel % (4 * hidden):
        return 0  # not an LSTM's w_hh [4H, H]
    out = outputs[0]
    if out.out_bytes != 4 * out.out_numel:
        return 0  # the layout above is f32's
    batch = int(outputs[1].out_numel) // hidden
    seq_len = int(out.out_numel) // max(batch * hidden, 1)
    return lstm_workspace_bytes(seq_len, batch, ins[1].out_numel // (4 * hidden), hidden)


def transient_profile(graph, persistent_nodes, kept_nodes, held: dict | None = None) -> tuple[np.ndarray, dict]:
    """Live bytes after each op of ``graph`` of the storages its ops allocate (inputs in
    ``persistent_nodes`` count elsewhere), and ``{node: bytes}`` of the storages made by
    ``kept_nodes`` (held to the end, not freed at their last use); ``held`` maps nodes to the
    op index their storage lives at least until (a Python reference the graph does not show)."""
    import operator

    nodes = list(graph.nodes)
    storage: dict = {}  # node -> storage id
    size: dict = {}  # storage id -> bytes
    parent_several = set()
    items: dict = {}  # parent -> its getitem nodes, in output order
    read = {src for node in nodes for src in node.all_input_nodes}
    for node in nodes:
        if node.op == "placeholder":
            storage[node] = ("input", id(node))
            continue
        ins = list(node.all_input_nodes)
        if node.target is operator.getitem and ins and ins[0] in parent_several:
            parent = ins[0]
            items.setdefault(parent, []).append(node)
            if _aliases_input(parent) and parent.all_input_nodes:
                storage[node] = storage.get(parent.all_input_nodes[0], ("input", id(parent)))
            else:
                storage[node] = ("own", id(node))
                size[storage[node]] = int(node.out_bytes)
                if len(items[parent]) == 4 and node in read and _is_rnn_layer(parent):
                    size[storage[node]] = rnn_workspace_bytes(parent, items[parent])
            continue
        if _returns_several(node):
            parent_several.add(node)
            storage[node] = ("none", id(node))
            continue
        if _aliases_input(node) and ins:
            storage[node] = storage.get(ins[0], ("input", id(ins[0])))
            continue
        storage[node] = ("own", id(node))
        size[storage[node]] = int(node.out_bytes)
    last_use: dict = {}
    for i, node in enumerate(nodes):
        for src in node.all_input_nodes:
            last_use[storage.get(src)] = i
    for node, until in (held or {}).items():
        if node in storage:
            last_use[storage[node]] = max(last_use.get(storage[node], until), until)
    kept = {storage[n] for n in kept_nodes if n is not None and n in storage}
    made_at = {}
    for i, node in enumerate(nodes):
        s = storage[node]
        if s[0] == "own" and s not in made_at:
            made_at[s] = i
    delta = np.zeros(len(nodes) + 1)
    for s, i in made_at.items():
        delta[i] += size[s]
        if s not in kept:
            end = max(last_use.get(s, i), i)
            delta[end + 1] -= size[s]
    live = np.cumsum(delta)[: len(nodes)]
    return live, {n: size.get(storage[n], 0) for n in kept_nodes if n is not None and n in storage}


def simulate(traced, strategy: str = "ddp", sampled: bool = False, workers: int = 2) -> MemoryEstimate:
    """The peak of one training step of ``traced`` (:class:`~driple.graph.trace.TracedStep`) for
    one worker of ``strategy`` (a registered strategy's name, or ``none`` for a single process)
    among ``workers``; with ``sampled``, the peak at the points the collector samples (module
    docstring)."""
    return _estimate(_step_memory(traced, strategy, workers), sampled)


def simulate_both(traced, strategy: str = "ddp", workers: int = 2,
                  parts: dict | None = None) -> tuple[MemoryEstimate, MemoryEstimate]:
    """``(whole peak, peak at the sampled points)`` of :func:`simulate`, from one walk of the step
    (``parts``, :func:`step_parts`, when already made)."""
    parts = parts if parts is not None else _step_memory(traced, strategy, workers)
    return _estimate(parts, False), _estimate(parts, True)


def step_parts(traced, strategy: str = "ddp", workers: int = 2) -> dict:
    """One walk of the step: what :func:`simulate_both` and
    :func:`driple.graph.memory_cycle.memory_cycle` read (the live bytes after each op, what is
    held all step, the gradients, the strategy's buffers)."""
    return _step_memory(traced, strategy, workers)


def _step_memory(traced, strategy: str, workers: int = 2) -> dict:
    """What both estimates read: the live transient bytes after each op, what is held all step,
    the gradients, the optimizer's state and update transient, the strategy's buffers."""
    from driple.strategies import worker_memory

    declared = worker_memory(strategy)
    graph = traced.graph_module
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    params = int(sum(traced.param_bytes))
    param_set = set(traced.param_nodes)
    batch = int(sum(n.out_bytes for n in placeholders[:2]))
    other_inputs = int(sum(n.out_bytes for n in placeholders[2:] if n not in param_set))  # frozen, buffers
    grads = [g for g in traced.grad_nodes if g is not None]
    # the model's outputs (logits) live until it returns, where the collector samples: after the
    # loss when the model computes it
    position = {n: i for i, n in enumerate(graph.nodes)}
    outputs = [n for n in getattr(traced, "output_nodes", []) if n in position]
    model_exit = max((position[n] for n in outputs), default=None)
    live, kept = transient_profile(graph, placeholders, [traced.loss_node, *grads],
                                   held={n: model_exit + 1 for n in outputs})  # past the exit's frees
    grad_bytes = int(sum(kept.get(g, 0) for g in grads))
    state, update_peak = _optimizer(traced)
    comm, comm_after_backward, gathered = 0, 0, 0
    if declared.gradient_copy:
        comm = grad_bytes
    if not declared.optimizer_on_worker:
        state, update_peak, comm_after_backward = 0, 0, params
    if declared.sharded:
        from driple.strategies.registry import resolve_function

        w = max(int(workers), 1)
        units = resolve_function(declared.units)(list(traced.param_names))
        live = _scattered(traced, units, live, kept, w)
        kept = {}
        gathered = _gathered_bytes(traced, units)
        params, state, update_peak, grad_bytes = params // w, state // w, update_peak // w, grad_bytes // w
    return {"traced": traced, "live": live, "kept": kept, "grads": grads, "grad_bytes": grad_bytes,
            "params": params + other_inputs, "batch": batch, "state": state, "update_peak": update_peak,
            "comm": comm, "comm_after_backward": comm_after_backward, "gathered": gathered,
            "held": params + other_inputs + state + batch + comm, "model_exit": model_exit}


def _scattered(traced, units: list, live, kept: dict, workers: int):
    """The live bytes of a sharded step: a unit's full gradients stay until its last one is made
    (its reduce-scatter then runs), and only their shard is kept after it. ``units``: the
    strategy's ``[(unit name, parameter indices), ...]``."""
    position = {n: i for i, n in enumerate(traced.graph_module.nodes)}
    live = live.astype(np.float64).copy()
    for _name, params in units:
        grads = [traced.grad_nodes[i] for i in params if traced.grad_nodes[i] is not None]
        where = [position[g] for g in grads if g in position]
        if not where:
            continue
        full = sum(kept.get(g, 0) for g in grads)
        live[max(where) + 1:] -= full - full // workers
    return live


def _gathered_bytes(traced, units: list) -> int:
    """Bytes an FSDP worker holds beyond its shards while it computes. FSDP2 unshards a unit
    into a full-size copy beside the shard, and keeps the all-gather's output buffer (the
    unit's size again) until the next all-gather or the root's forward ends: the root's
    parameters once, and the largest block's (its copy, or the buffer of its gather); a root
    with no blocks (an LSTM language model) twice, from its gather to the forward's end
    (measured with a two-rank ``fully_shard`` on this project's CPU hosts: glibc in-use bytes
    at module boundaries). The number of workers does not change it: a copy is full whatever
    the shard."""
    sizes = traced.param_bytes
    root = sum(sum(sizes[i] for i in params) for name, params in units if not name)
    blocks = [sum(sizes[i] for i in params) for name, params in units if name]
    return int(max(blocks) + root if blocks else 2 * root)


def _estimate(p: dict, sampled: bool) -> MemoryEstimate:
    traced, live, grads, grad_bytes = p["traced"], p["live"], p["grads"], p["grad_bytes"]
    graph = traced.graph_module
    update_peak = p["update_peak"]
    if sampled and len(live):
        position = {n: i for i, n in enumerate(graph.nodes)}
        points = [position[n] for n in [traced.loss_node, *grads] if n in position]
        levels = live[points] if points else live
        exit_at = p.get("model_exit")
        if exit_at is not None:  # the model's forward hook fires as it returns: its op's dead inputs freed
            settled = min(live[exit_at], live[exit_at + 1]) if exit_at + 1 < len(live) else live[exit_at]
            levels = np.append(levels, settled)
        live = levels
        update_peak = 0
    fb_peak = int(live.max()) + p["gathered"] if len(live) else 0
    update_total = grad_bytes + update_peak + p["comm_after_backward"]
    if fb_peak >= update_total:
        # at the forward/backward peak: the gradients made so far are part of the live bytes
        phase, transient, gathered = "forward/backward", fb_peak, p["gathered"]
        if not p["kept"]:  # sharded: the gradient shards are part of the update's bytes only
            grads_at_peak = 0
        elif sampled:
            grads_at_peak = min(grad_bytes, fb_peak)
        else:
            grads_at_peak = _grads_at_peak(graph, live, p["kept"], grads)
    else:
        phase, transient, grads_at_peak, gathered = "update", update_total, grad_bytes, 0
    after = p["comm_after_backward"] if phase == "update" else 0
    breakdown = {"parameters": p["params"] + gathered, "gradients": grads_at_peak,
                 "optimizer_state": p["state"],
                 "activations": transient - grads_at_peak - after - gathered,
                 "communication": p["comm"] + after, "batch": p["batch"]}
    return MemoryEstimate(int(p["held"] + transient), breakdown, phase)


def _grads_at_peak(graph, live, kept, grads) -> int:
    nodes = list(graph.nodes)
    at = int(np.argmax(live))
    position = {n: i for i, n in enumerate(nodes)}
    return int(sum(kept.get(g, 0) for g in grads if position.get(g, len(nodes)) <= at))


def _optimizer(traced) -> tuple[int, int]:
    """``(state bytes, largest transient bytes of one parameter's update)`` of the optimizer,
    from its per-kind template scaled to each parameter."""
    t = traced.update
    if t is None:
        return 0, 0
    placeholders = [n for n in t.graph_module.nodes if n.op == "placeholder"]
    n_reps = len(t.param_nodes)
    state_nodes = placeholders[2 * n_reps:]
    # state tensors in template order, each representative's in turn (as traced); a scalar (Adam's
    # step) is one per parameter, a tensor scales with the parameter's elements
    per_rep_state, per_rep_scalar = np.zeros(n_reps), np.zeros(n_reps)
    per = len(state_nodes) // n_reps if n_reps and len(state_nodes) % n_reps == 0 else 0
    for r in range(n_reps if per else 0):
        for n in state_nodes[r * per:(r + 1) * per]:
            if n.out_numel <= 1:
                per_rep_scalar[r] += n.out_bytes
            else:
                per_rep_state[r] += n.out_bytes
    live, _ = transient_profile(t.graph_module, placeholders, [])
    # the template updates each kind's largest parameter in turn (torch's per-parameter loop on a
    # CPU), so its peak is the largest one-parameter transient
    biggest = float(live.max()) if len(live) else 0.0
    state = 0.0
    for i, r in enumerate(t.rep_of):
        if r is None:
            continue
        numel = float(np.prod(traced.param_shapes[i])) if traced.param_shapes[i] else 1.0
        state += per_rep_state[r] * numel / max(t.rep_numel[r], 1) + per_rep_scalar[r]
    return int(state), int(biggest)


def simulate_job(model: str, batch_size: int, optimizer: str = "sgd", strategy: str = "ddp",
                 sampled: bool = False, workers: int = 2, blas_path: str = "", **knobs) -> MemoryEstimate:
    """:func:`simulate` for a zoo model or a user factory, traced on the meta device; with a
    ``blas_path``, the buffers the BLAS keeps on it added (:func:`with_blas_buffers`)."""
    from driple.graph.trace import trace_training_step
    from driple.zoo.workload import example_batch, load_workload

    wl = load_workload(model, batch_size, knobs, shapes_only=True)
    traced = trace_training_step(wl.model, example_batch(wl, batch_size), wl.loss_fn, optimizer)
    return with_blas_buffers(simulate(traced, strategy, sampled=sampled, workers=workers), traced, blas_path)


def with_blas_buffers(estimate: MemoryEstimate, traced, blas_path: str) -> MemoryEstimate:
    """``estimate`` with what the BLAS of code path ``blas_path`` keeps all step long
    (:func:`driple.hardware.blas.kept_buffer_bytes`: ``blas_buffers`` in the breakdown); as it is
    for a path not measured."""
    from driple.hardware.blas import kept_buffer_bytes

    kept = kept_buffer_bytes(traced, blas_path)
    if not kept:
        return estimate
    return MemoryEstimate(estimate.peak_bytes + kept, {**estimate.breakdown, "blas_buffers": kept}, estimate.phase)


def fit_offset(simulated_mb, measured_mb) -> tuple[float, float]:
    """``(offset MB, scale)`` with measured ≈ offset + scale × simulated, on the relative error
    (the runtime's own heap is a level; the allocator's rounding a share)."""
    from scipy.optimize import least_squares

    s, m = np.asarray(simulated_mb, dtype=np.float64), np.asarray(measured_mb, dtype=np.float64)
    ok = np.isfinite(s) & np.isfinite(m) & (m > 0)
    if not ok.any():
        return 0.0, 1.0
    res = least_squares(lambda p: (p[0] + p[1] * s[ok]) / m[ok] - 1.0, x0=[100.0, 1.0],
                        bounds=([0.0, 0.5], [np.inf, 2.0]))
    return float(res.x[0]), float(res.x[1])


_HEAP_SCRIPT = """
import importlib, json, sys
import torch, torch.distributed
from driple.hardware.allocator import allocated_bytes_reader
from driple.zoo.workload import load_workload
read, _ = allocated_bytes_reader("cpu")
for name in json.loads(sys.argv[4]):  # what the strategy's worker imports anyway
    importlib.import_module(name)
load_workload("resnet", 4, {})  # what a zoo job's worker holds (built as a worker builds it): in the offset
before = read()
load_workload(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), shapes_only=True)
print(json.dumps({"mb": (read() - before) / 1e6}))
"""
_HEAPS: dict = {}


def library_heap_mb(model: str, batch_size: int, knobs: dict | None = None, strategy: str = "ddp",
                    timeout: float = 180.0) -> float:
    """The heap a user's model code adds to a worker of ``strategy`` beyond a zoo model's (MB):
    the libraries it imports (Hugging Face ``transformers`` adds ~25 MB, and ~49 MB in a
    parameter-server worker, which has not imported ``torch._dynamo`` as DDP and FSDP workers
    have: the strategy's ``runtime_modules``) and the objects it builds, which no trace sees.
    Measured by loading the workload on the meta device in a fresh interpreter (the code the
    user named, nothing else; the meta build itself imports ``torch._dynamo``, so a model whose
    code would not is charged it in a parameter-server worker); 0 for a zoo model (its heap is
    in the fitted offset) and when it cannot be measured (no glibc, a failure). Cached per
    process."""
    import json
    import subprocess
    import sys

    from driple.strategies import worker_memory

    if ":" not in str(model):
        return 0.0
    modules = json.dumps(list(worker_memory(strategy).runtime_modules))
    key = (str(model), int(batch_size), json.dumps(knobs or {}, sort_keys=True), modules)
    if key not in _HEAPS:
        try:
            done = subprocess.run([sys.executable, "-c", _HEAP_SCRIPT, str(model), str(int(batch_size)), key[2],
                                   modules], capture_output=True, text=True, timeout=timeout)
            _HEAPS[key] = max(0.0, float(json.loads(done.stdout.strip().splitlines()[-1])["mb"]))
        except Exception:  # noqa: BLE001 - a figure missing, never a failed prediction
            _HEAPS[key] = 0.0
    return _HEAPS[key]
