"""Graph-level features of a training step and the physical priors computed from them.

A hybrid inspector (:mod:`driple.inspector.model`) joins its graph embedding with a handful of
numbers a scheduler could compute by hand: how much work a step is, how many bytes it moves
and what that costs on the setting's hardware. Two kinds:

**Graph-level features** (:data:`GRAPH_FEATURES`, per worker and training step, from the traced
op graph and the setting's strategy; recorded in ``Data.graph_features`` by
:func:`driple.graph.build.build_input`; they do not depend on the host or the link):

- ``gflops``: floating-point operations of the compute ops (forward, backward, optimizer), GFLOP
  (torch's formulas for matmul/conv/attention, one per output element otherwise; see
  :mod:`driple.graph.opgraph`). Ops that return a view of an input (``view``, ``t``,
  ``transpose``, ``expand``, ...) are no compute ops here: they reshape metadata, computing and
  moving nothing, and counting them as one FLOP and a read and write per element had a
  transformer's step look like 40 % more elementwise traffic than it moves (builder v5);
- ``traffic_mb``: memory traffic, bytes read (inputs) + written (outputs) by the compute ops, MB;
- ``param_mb``: trainable parameter bytes, MB;
- ``activation_mb``: bytes of the forward ops' outputs, MB;
- ``optimizer_state_mb``: the optimizer's state, parameter bytes x :data:`OPTIMIZER_STATE_COPIES`;
- ``comm_tx_mb``, ``comm_rx_mb``: bytes one worker sends / receives per step, MB (ring
  all-reduce over W workers: 2(W-1)/W of each bucket both ways; parameter server: the pushed
  gradients out, the pulled parameters in);
- ``comm_messages``: buckets (DDP) or shards (PS) per step; ``largest_message_mb``: the largest;
- ``batch_size`` (per worker), ``workers``, ``servers``, ``n_ops`` (ops in the graph);
- ``opt_sgd``, ``opt_adam``, ``opt_adamw``, ``opt_other``: the optimizer, one-hot;
- ``compute_ops``: the compute ops (forward, backward, optimizer) of the graph;
- ``gflops_<class>``, ``traffic_mb_<class>``: FLOPs and memory traffic split by op class
  (:data:`OP_CLASSES`: convolutions, matmuls, attention, recurrent cells, normalization, pooling,
  embeddings, the rest). A CPU runs each class at its own fraction of its GEMM peak and copy
  bandwidth; a family's step time follows its mix of classes (the per-class roofline of
  :mod:`driple.inspector.roofline`).

:data:`BASE_FEATURES` are the features before the op-class split (what the hybrid and the
tree models read by default).

**Physical priors** (:data:`PRIORS`; :func:`priors` computes them for a setting and the host
figures of :mod:`driple.hardware.host_speed`; units in the names):

- ``link_mb_s``: the link rate (emulated links: the setting's rate; loopback:
  :data:`~driple.hardware.host_speed.LOOPBACK_BYTES_PER_S`), MB/s;
- ``prior_compute_s`` = FLOPs / the host's GEMM FLOP/s; ``prior_memory_s`` = traffic bytes /
  its copy bandwidth; ``prior_busy_s`` = their sum (the roofline's two terms added: a
  conservative step without overlap);
- ``prior_comm_s``: communication time, as the setting's strategy declares its link use
  (:data:`~driple.strategies.LINK_USES`): collectives max(tx, rx) bytes / link rate (both
  directions at once); parameter server (tx + rx) x workers / servers / link rate (push then
  pull, through each server's link, which carries every worker's share);
- ``prior_step_s`` = ``prior_busy_s`` + ``prior_comm_s``: the analytic step time (roofline
  compute and memory terms plus communication, no overlap);
- ``prior_memory_mb``: parameters + gradients + optimizer state (divided over the workers
  when the strategy shards them) + forward outputs, MB (a peak allocation estimate); ``prior_memory_pct``: the same in % of the host's memory.

Which target a prior stands for is declared with the target (:mod:`driple.metrics`,
``Resource.priors`` / ``Target.prior``).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

import networkx as nx
import numpy as np

from driple.errors import DripleError
from driple.hardware.host_speed import HostSpeed
from driple.strategies import find_strategy

OPTIMIZERS = ("sgd", "adam", "adamw")
#: Copies of the parameters an optimizer keeps as state (SGD with momentum: the velocity; Adam,
#: AdamW: the two moments); an optimizer not listed counts as 2.
OPTIMIZER_STATE_COPIES = {"sgd": 1, "adam": 2, "adamw": 2}
BASE_FEATURES = (
    "gflops", "traffic_mb", "param_mb", "activation_mb", "optimizer_state_mb",
    "comm_tx_mb", "comm_rx_mb", "comm_messages", "largest_message_mb",
    "batch_size", "workers", "servers", "n_ops",
    "opt_sgd", "opt_adam", "opt_adamw", "opt_other",
)
#: Op classes by substrings of the ATen op name, first match wins (``convolution_backward`` is a
#: convolution, ``addmm`` a matmul, ``mkldnn_rnn_layer`` a recurrent cell); the rest: ``other``.
OP_CLASSES = {
    "conv": ("convolution", "conv"),
    "matmul": ("mm", "addmm", "bmm", "matmul", "linear", "baddbmm"),
    "attn": ("scaled_dot_product", "_efficient_attention", "_flash"),
    "rnn": ("lstm", "gru", "rnn"),
    "norm": ("batch_norm", "layer_norm", "native_batch_norm", "native_layer_norm", "group_norm"),
    "pool": ("pool",),
    "embed": ("embedding",),
    "other": (),
}
OP_CLASS_FEATURES = ("compute_ops", *(f"gflops_{c}" for c in OP_CLASSES),
                     *(f"traffic_mb_{c}" for c in OP_CLASSES))
GRAPH_FEATURES = (*BASE_FEATURES, *OP_CLASS_FEATURES)
PRIORS = ("link_mb_s", "prior_compute_s", "prior_memory_s", "prior_busy_s", "prior_comm_s",
          "prior_step_s", "prior_memory_mb", "prior_memory_pct")
#: Features that are not sizes or counts (no log scale): the optimizer's one-hot columns.
ONE_HOT = ("opt_sgd", "opt_adam", "opt_adamw", "opt_other")
_TX_ONLY, _RX_ONLY = ("comm.push",), ("comm.pull",)


def optimizer_key(name: str) -> str:
    """``"sgd"``, ``"adam"``, ``"adamw"`` for those optimizers (any case, class or zoo name),
    ``"other"`` otherwise."""
    key = str(name or "").lower()
    return key if key in OPTIMIZERS else "other"


def op_class(op: str) -> str:
    """The class of an ATen op name in :data:`OP_CLASSES`."""
    name = str(op).lower()
    for cls, keys in OP_CLASSES.items():
        if any(k in name for k in keys):
            return cls
    return "other"


def graph_features(graph: nx.DiGraph, param_bytes: Sequence[int], batch_size: int,
                   optimizer: str, workers: int, servers: int,
                   comm: Sequence[Mapping] = ()) -> dict:
    """The graph-level features of one step (module docstring) as ``{name: float}``.

    Args:
        graph: The op graph with its communication nodes (:mod:`driple.graph.opgraph`,
            :mod:`driple.graph.comm`): every node has ``phase``, ``op``, ``flops``,
            ``in_bytes`` and ``out_bytes``; a communication node's ``out_bytes`` is what one
            worker moves for it in each direction it uses.
        param_bytes: Bytes of every trainable parameter.
        batch_size: Per-worker batch size.
        optimizer: Its name (``"sgd"``, ``"Adam"``, ...).
        workers, servers: Of the setting.
        comm: The strategy's messages per step (``{"bytes": payload}`` per bucket or shard).
    """
    flops = traffic = activation = tx = rx = 0.0
    class_flops, class_traffic = dict.fromkeys(OP_CLASSES, 0.0), dict.fromkeys(OP_CLASSES, 0.0)
    compute_ops = 0
    for _, d in graph.nodes(data=True):
        if d["phase"] == "comm":
            moved = float(d["out_bytes"])
            tx += 0.0 if d["op"] in _RX_ONLY else moved
            rx += 0.0 if d["op"] in _TX_ONLY else moved
            continue
        if d.get("view"):  # a new shape over the same storage: no work (module docstring)
            continue
        cls = op_class(d["op"])
        compute_ops += 1
        class_flops[cls] += float(d["flops"])
        class_traffic[cls] += float(d["in_bytes"]) + float(d["out_bytes"])
        flops += float(d["flops"])
        traffic += float(d["in_bytes"]) + float(d["out_bytes"])
        if d["phase"] == "forward":
            activation += float(d["out_bytes"])
    params = float(sum(param_bytes))
    opt = optimizer_key(optimizer)
    payloads = [float(c["bytes"]) for c in comm]
    out = {
        "gflops": flops / 1e9,
        "traffic_mb": traffic / 1e6,
        "param_mb": params / 1e6,
        "activation_mb": activation / 1e6,
        "optimizer_state_mb": params * OPTIMIZER_STATE_COPIES.get(opt, 2) / 1e6,
        "comm_tx_mb": tx / 1e6,
        "comm_rx_mb": rx / 1e6,
        "comm_messages": float(len(payloads)),
        "largest_message_mb": max(payloads, default=0.0) / 1e6,
        "batch_size": float(batch_size),
        "workers": float(workers),
        "servers": float(servers),
        "n_ops": float(graph.number_of_nodes()),
    }
    out.update({f"opt_{k}": float(opt == k) for k in (*OPTIMIZERS, "other")})
    out["compute_ops"] = float(compute_ops)
    out.update({f"gflops_{c}": v / 1e9 for c, v in class_flops.items()})
    out.update({f"traffic_mb_{c}": v / 1e6 for c, v in class_traffic.items()})
    return {k: out[k] for k in GRAPH_FEATURES}


def feature_vector(features: Mapping) -> list:
    """The features in :data:`GRAPH_FEATURES` order."""
    missing = [k for k in GRAPH_FEATURES if k not in features]
    if missing:
        raise DripleError(f"graph features lack {', '.join(missing)}")
    return [float(features[k]) for k in GRAPH_FEATURES]


def link_bytes_per_s(setting, host: HostSpeed) -> float:
    """Rate of one worker's link in bytes/s: the setting's (emulated or real) link rate, or the
    host's loopback rate for a setting without one."""
    s = _setting(setting)
    return s.link_bps / 8.0 if s.link_bps else float(host.loopback_bytes_per_s)


def _setting(setting):
    from driple.settings import Setting, parse_setting

    return setting if isinstance(setting, Setting) else parse_setting(str(setting))


def priors(features, setting, host: HostSpeed) -> dict:
    """The physical priors (module docstring) of graphs in ``setting`` on ``host``.

    ``features``: one graph's ``{name: value}`` or an array ``[n, len(GRAPH_FEATURES)]``
    (``Data.graph_features`` stacked). Returns ``{prior: array [n]}`` (length 1 for a dict);
    ``prior_memory_pct`` is NaN when the host's memory is unknown.
    """
    if isinstance(features, Mapping):
        f = np.asarray([feature_vector(features)], dtype=np.float64)
    else:
        f = np.atleast_2d(np.asarray(features, dtype=np.float64))
        if f.shape[1] != len(GRAPH_FEATURES):
            raise DripleError(f"expected {len(GRAPH_FEATURES)} graph features per graph "
                              f"({', '.join(GRAPH_FEATURES)}), got {f.shape[1]}")
    col = {k: f[:, i] for i, k in enumerate(GRAPH_FEATURES)}
    link = link_bytes_per_s(setting, host)
    compute = col["gflops"] * 1e9 / host.flops_per_s
    memory = col["traffic_mb"] * 1e6 / host.memory_bytes_per_s
    tx, rx = col["comm_tx_mb"] * 1e6, col["comm_rx_mb"] * 1e6
    strategy = find_strategy(_setting(setting).strategy)
    if strategy is not None and strategy.link_use == "fan_in":
        comm = col["workers"] / np.maximum(col["servers"], 1) * (tx + rx) / link
    else:
        comm = np.maximum(tx, rx) / link
    state_mb = 2 * col["param_mb"] + col["optimizer_state_mb"]
    if strategy is not None and strategy.memory.sharded:
        state_mb = state_mb / np.maximum(col["workers"], 1)
    peak_mb = state_mb + col["activation_mb"]
    host_mb = host.memory_mb
    return {
        "link_mb_s": np.full(len(f), link / 1e6),
        "prior_compute_s": compute,
        "prior_memory_s": memory,
        "prior_busy_s": compute + memory,
        "prior_comm_s": comm,
        "prior_step_s": compute + memory + comm,
        "prior_memory_mb": peak_mb,
        "prior_memory_pct": peak_mb / host_mb * 100.0 if host_mb > 0 else np.full(len(f), np.nan),
    }


def prior_matrix(features, setting, host: HostSpeed, names: Sequence[Optional[str]]) -> np.ndarray:
    """``[n, len(names)]``: the prior called ``names[j]`` in column ``j`` (NaN where
    ``names[j]`` is None): a target's prior per graph, in the target's order."""
    values = priors(features, setting, host)
    n = len(next(iter(values.values())))
    unknown = [p for p in names if p is not None and p not in values]
    if unknown:
        raise DripleError(f"unknown prior(s) {', '.join(unknown)}; driple computes {', '.join(PRIORS)}")
    return np.stack([values[p] if p is not None else np.full(n, np.nan) for p in names], axis=1) \
        if names else np.zeros((n, 0))
