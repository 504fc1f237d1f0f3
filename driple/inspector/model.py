"""The inspector network: GCN φf, a shared GCN φr repeated K times with GRU updates, Set2Set, MLP.

Follows Driple (SIGMETRICS 2022) and PyG's ``examples/qm9_nn_conv.py``. Inputs are scaled
grouped graphs (see :mod:`driple.inspector.scaling`); outputs are the scaled targets of
:func:`driple.metrics.target_names`.

Three configurations (compared in the ablation; a checkpoint records which it is):

- **paper GNN**: :class:`Inspector` with ``graph_channels=0``: the graph alone;
- **hybrid**: :class:`Inspector` with ``graph_channels > 0``: the Set2Set embedding joined,
  before the MLP, with the scaled graph-level features and physical priors
  (:mod:`driple.inspector.graph_inputs`); optionally predicting residuals over the priors;
- **features only**: :class:`FeatureMLP`: the graph-level inputs alone, no graph network.

The layers are PyG's (:class:`GCNConv`, :class:`torch.nn.GRUCell`, :class:`Set2Set`, :class:`MLP`),
so checkpoints hold their parameters, but the K repetitions, where nearly all the time goes, run
as one kernel with a hand-written backward (:class:`_RepeatedConvGRU`): the same mathematics
with in-place gate arithmetic in reused buffers and no per-op autograd bookkeeping. The
normalised adjacency is computed once per graph (:func:`gcn_edges`, stored by
:meth:`TrainedInspector.prepare`) and batched without PyG collation (:class:`GraphBatch`).
"""
from __future__ import annotations

import contextlib
import copy
import warnings
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import MLP, GCNConv
from torch_geometric.nn.aggr import Set2Set
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import coalesce


# ---------------------------------------------------------------------------- adjacency
def _declared_targets() -> int:
    """How many targets driple declares (the output width when none is given)."""
    from driple.metrics import target_names

    return len(target_names())


def gcn_edges(edge_index: Tensor, edge_weight: Optional[Tensor], num_nodes: int,
              dtype: torch.dtype = torch.float) -> tuple[Tensor, Tensor]:
    r"""GCN-normalised edges with self-loops, :math:`\hat{A}^{\top}` as a coalesced edge list.

    Returns ``(index, weight)``: ``index[0]`` is the target group (row of
    :math:`\hat{A}^{\top}`), ``index[1]`` the source, sorted by row then column, duplicate edges
    summed; exactly what :class:`GCNConv` multiplies with (``gcn_norm``, remaining self-loops of
    weight 1, :math:`D^{-1/2} A D^{-1/2}`).
    """
    edge_index, weight = gcn_norm(edge_index, edge_weight, num_nodes, add_self_loops=True,
                                  dtype=dtype)
    return coalesce(edge_index.flip(0), weight, num_nodes)


def is_symmetric(index: Tensor, weight: Tensor, num_nodes: int) -> bool:
    """Whether a coalesced edge list is its own transpose (weights equal to float rounding)."""
    index_t, weight_t = coalesce(index.flip(0), weight, num_nodes)
    return torch.equal(index, index_t) and torch.allclose(weight, weight_t, rtol=1e-6, atol=0)


def _csr(row: Tensor, col: Tensor, value: Tensor, num_nodes: int) -> Tensor:
    crow = torch._convert_indices_from_coo_to_csr(row, num_nodes)
    with warnings.catch_warnings():  # torch: "sparse CSR support is in beta state"
        warnings.simplefilter('ignore', UserWarning)
        return torch.sparse_csr_tensor(crow, col, value, (num_nodes, num_nodes))


class Propagation:
    r"""The normalised adjacency :math:`\hat{A}^{\top}` of a (block-diagonal batch of) graph(s)
    as a sparse CSR matrix, with its transpose for gradients.

    Build from the output of :func:`gcn_edges` (``index`` row-sorted, ``weight``) or with
    :meth:`from_edges` from raw edges. ``symmetric=True`` reuses the matrix as its transpose.
    """

    def __init__(self, index: Tensor, weight: Tensor, num_nodes: int, symmetric: bool = False):
        self.index, self.weight, self.num_nodes = index, weight, num_nodes
        self.matrix = _csr(index[0], index[1], weight, num_nodes)
        self._transpose = self.matrix if symmetric else None

    @classmethod
    def from_edges(cls, edge_index: Tensor, edge_weight: Optional[Tensor], num_nodes: int,
                   dtype: torch.dtype = torch.float) -> 'Propagation':
        return cls(*gcn_edges(edge_index, edge_weight, num_nodes, dtype), num_nodes)

    @property
    def transpose(self) -> Tensor:
        r""":math:`\hat{A}` as CSR (computed on first use: only gradients need it)."""
        if self._transpose is None:
            row, col = self.index
            perm = torch.argsort(col * self.num_nodes + row)
            self._transpose = _csr(col[perm], row[perm], self.weight[perm], self.num_nodes)
        return self._transpose

    def __matmul__(self, x: Tensor) -> Tensor:
        r""":math:`\hat{A}^{\top} x`, differentiable in ``x``."""
        if torch.is_grad_enabled() and x.requires_grad:
            return _Aggregate.apply(x, self)
        return self.matrix @ x

    def to(self, dtype: torch.dtype) -> 'Propagation':
        if self.weight.dtype == dtype:
            return self
        return Propagation(self.index, self.weight.to(dtype), self.num_nodes,
                           symmetric=self._transpose is self.matrix)


class _Aggregate(torch.autograd.Function):
    """``adj.matrix @ x`` with the gradient ``adj.transpose @ grad`` (no CSR autograd needed)."""

    @staticmethod
    def forward(ctx, x, adj):
        ctx.adj = adj
        return adj.matrix @ x

    @staticmethod
    def backward(ctx, grad):
        return ctx.adj.transpose @ grad.contiguous(), None


# ---------------------------------------------------------------------------- φr × K with GRU
class _Workspace:
    """Buffers of one differentiable call of the K repetitions over ``rows`` groups: per step
    the GEMM output ``P`` ``[rows, 4H]``, the conv output ``m``, the candidate ``n`` and the new
    state ``h`` (``[rows, H]`` each), plus the temporaries of the backward pass. Reused across
    batches (see :class:`_Lease`): tens of fresh megabytes per batch cost a page fault every
    4 KiB."""

    def __init__(self, steps: int, rows: int, channels: int, dtype: torch.dtype):
        H, new = channels, lambda *shape: torch.empty(*shape, dtype=dtype)
        self.key, self.rows = (steps, channels, dtype), rows
        self.P, self.m, self.n, self.h = (new(steps, rows, 4 * H), new(steps, rows, H),
                                          new(steps, rows, H), new(steps, rows, H))
        self.dP, self.dn, self.da, self.dm, self.dc, self.diff = (
            new(rows, 4 * H), *(new(rows, H) for _ in range(5)))
        self.dh = (new(rows, H), new(rows, H))

    def first(self, rows: int) -> '_Workspace':
        """The same buffers cut to their first ``rows`` groups (views)."""
        if rows == self.rows:
            return self
        view = copy.copy(self)
        view.rows = rows
        for name in ('P', 'm', 'n', 'h'):
            setattr(view, name, getattr(self, name)[:, :rows])
        for name in ('dP', 'dn', 'da', 'dm', 'dc', 'diff'):
            setattr(view, name, getattr(self, name)[:rows])
        view.dh = tuple(t[:rows] for t in self.dh)
        return view


_FREE: list = []  # workspaces nobody holds, at most _KEEP
_KEEP = 2  # a training loop holds one batch's graph while the next batch runs


class _Lease:
    """Holds a :class:`_Workspace` (``ws``, cut to ``rows``) for one autograd node; gives it
    back when the node dies (after backward and once the graph is dropped, so
    ``retain_graph`` stays correct). A free workspace with as many rows or more is reused."""

    def __init__(self, steps: int, rows: int, channels: int, dtype: torch.dtype):
        key, full = (steps, channels, dtype), None
        for i, ws in enumerate(list(_FREE)):
            if ws.key == key and ws.rows >= rows:
                try:
                    full = _FREE.pop(i)
                except IndexError:  # another thread took it
                    pass
                break
        self.full = full or _Workspace(steps, rows, channels, dtype)
        self.ws = self.full.first(rows)

    def __del__(self):
        try:
            _FREE.append(self.full)
            del _FREE[:-_KEEP]
        except Exception:  # interpreter shutdown
            pass


@contextlib.contextmanager
def flush_denormals():
    """Inside, float32 denormals (below 1.2e-38) count as zero on this thread (x86 FTZ/DAZ);
    the previous setting is restored after. Gradients fading through K repetitions reach
    denormals, whose arithmetic is ~100 times slower: a third of a training epoch went there."""
    before = bool((torch.tensor([1e-39]) * 1.0).item() == 0)  # already flushing?
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(before)


def release_workspaces() -> None:
    """Free the buffers kept for the next training batch (called at the end of training)."""
    _FREE.clear()


def _repeat(h: Tensor, adj: Propagation, w_r: Tensor, b_r: Tensor, w_ih: Tensor, b_ih: Tensor,
            w_hh: Tensor, b_hh: Tensor, steps: int, ws: Optional[_Workspace] = None) -> Tensor:
    r"""``steps`` times :math:`h \leftarrow \mathrm{GRUCell}(\mathrm{ReLU}(\hat{A}^{\top} h
    W_r^{\top} + b_r), h)` with in-place gate arithmetic into fixed buffers. ``GRUCell``:
    r, z = σ(·), n = tanh(W_in m + b_in + r ⊙ (W_hn h + b_hn)), h' = (1 - z) ⊙ n + z ⊙ h.
    With a workspace ``ws`` every step keeps its buffers there (for the backward pass)."""
    H = h.size(1)
    w_cat_t = torch.cat([w_r, w_hh]).t()  # h @ [W_r; W_hh]^T = [p | gh_rz | gh_n]: one GEMM
    w_irz_t, w_in_t = w_ih[:2 * H].t(), w_ih[2 * H:].t()
    b_rz, b_in, b_hn = b_ih[:2 * H] + b_hh[:2 * H], b_ih[2 * H:], b_hh[2 * H:]
    if ws is None:  # inference: the same few buffers every step
        P, m, n = h.new_empty(h.size(0), 4 * H), h.new_empty(h.shape), h.new_empty(h.shape)
        hs = (h.new_empty(h.shape), h.new_empty(h.shape))
    for k in range(steps):
        if ws is not None:
            P, m, n = ws.P[k], ws.m[k], ws.n[k]
        torch.mm(h, w_cat_t, out=P)
        torch.mm(adj.matrix, P[:, :H], out=m).add_(b_r).relu_()  # φr: aggregate, bias, ReLU
        rz = P[:, H:3 * H].addmm_(m, w_irz_t).add_(b_rz).sigmoid_()  # [r | z]
        gh_n = P[:, 3 * H:].add_(b_hn)  # P now holds [p | r | z | W_hn h + b_hn]
        torch.addmm(b_in, m, w_in_t, out=n).addcmul_(rz[:, :H], gh_n).tanh_()
        last = k == steps - 1
        out = (None if last else ws.h[k]) if ws is not None else hs[k % 2]
        h = torch.lerp(n, h, rz[:, H:], out=out)  # n + z ⊙ (h - n); never a workspace buffer
    return h


class _RepeatedConvGRU(torch.autograd.Function):
    """:func:`_repeat` with its gradient written out (tested against autograd through the
    PyG modules, :func:`reference_forward`)."""

    @staticmethod
    def forward(ctx, h, w_r, b_r, w_ih, b_ih, w_hh, b_hh, adj, steps):
        lease = _Lease(steps, h.size(0), h.size(1), h.dtype)
        out = _repeat(h, adj, w_r, b_r, w_ih, b_ih, w_hh, b_hh, steps, lease.ws)
        ctx.save_for_backward(h, w_r, w_ih, w_hh)
        ctx.adj, ctx.lease, ctx.steps = adj, lease, steps
        return out

    @staticmethod
    def backward(ctx, grad):
        h0, w_r, w_ih, w_hh = ctx.saved_tensors
        adj, ws, steps = ctx.adj, ctx.lease.ws, ctx.steps
        need = ctx.needs_input_grad
        need_cat, need_ih = need[1] or need[5], need[3] or need[4]
        need_b = need[2] or need[4] or need[6]
        H = w_r.size(0)
        w_cat = torch.cat([w_r, w_hh])
        # weight gradients accumulate transposed: h^T dP runs faster than dP^T h here
        dw_cat_t = w_cat.new_zeros(H, 4 * H) if need_cat else None
        dw_ih_t = w_ih.new_zeros(H, 3 * H) if need_ih else None
        db_r, db_ih, db_hh = (w_r.new_zeros(H), w_ih.new_zeros(3 * H), w_hh.new_zeros(3 * H))
        aten = torch.ops.aten
        dP, dn, da, dm, dc, diff = ws.dP, ws.dn, ws.da, ws.dm, ws.dc, ws.diff
        ds = dP[:, H:3 * H]  # d of the r, z pre-activations (= d(W_ih m)[:2H] = d(W_hh h)[:2H])
        dh = grad.contiguous()
        for k in reversed(range(steps)):
            h = ws.h[k - 1] if k else h0
            m, P, n = ws.m[k], ws.P[k], ws.n[k]
            r, z, rz, gh_n = P[:, H:2 * H], P[:, 2 * H:3 * H], P[:, H:3 * H], P[:, 3 * H:]
            torch.addcmul(dh, dh, z, value=-1, out=dn)  # h' = n + z (h - n)
            aten.tanh_backward.grad_input(dn, n, grad_input=da)  # d(W_in m + b_in + r gh_n)
            torch.mul(da, gh_n, out=ds[:, :H])  # d r
            torch.mul(torch.sub(h, n, out=diff), dh, out=ds[:, H:])  # d z
            aten.sigmoid_backward.grad_input(ds, rz, grad_input=ds)
            torch.mul(da, r, out=dP[:, 3 * H:])
            dh = torch.mul(dh, z, out=None if k == 0 else ws.dh[k % 2])  # d h0: never a buffer
            torch.mm(ds, w_ih[:2 * H], out=dm).addmm_(da, w_ih[2 * H:])
            aten.threshold_backward.grad_input(dm, m, 0, grad_input=dc)  # ReLU (m: its output)
            torch.mm(adj.transpose, dc, out=dP[:, :H])
            if need_ih:
                dw_ih_t[:, :2 * H].addmm_(m.t(), ds)
                dw_ih_t[:, 2 * H:].addmm_(m.t(), da)
            if need_cat:
                dw_cat_t.addmm_(h.t(), dP)
            if need_b:
                s = dP[:, H:].sum(0)
                db_ih[:2 * H] += s[:2 * H]
                db_ih[2 * H:] += da.sum(0)
                db_hh += s
                db_r += dc.sum(0)
            dh.addmm_(dP, w_cat)
        return (dh if need[0] else None,
                dw_cat_t[:, :H].t() if need[1] else None, db_r if need[2] else None,
                dw_ih_t.t() if need[3] else None, db_ih if need[4] else None,
                dw_cat_t[:, H:].t() if need[5] else None, db_hh if need[6] else None, None, None)


def repeat_conv_gru(h: Tensor, adj: Propagation, conv: GCNConv, gru: torch.nn.GRUCell,
                    steps: int) -> Tensor:
    r"""``steps`` repetitions of :math:`h \leftarrow \mathrm{GRU}(\mathrm{ReLU}(\mathrm{conv}(h,
    \hat{A})), h)`: the same as calling the modules, fused (and differentiable)."""
    weights = (conv.lin.weight, conv.bias, gru.weight_ih, gru.bias_ih, gru.weight_hh, gru.bias_hh)
    adj = adj.to(h.dtype)
    if steps <= 0:
        return h
    if torch.is_grad_enabled() and (h.requires_grad or any(w.requires_grad for w in weights)):
        return _RepeatedConvGRU.apply(h, *weights, adj, steps)
    with torch.no_grad():
        return _repeat(h, adj, *weights, steps)  # no workspace: nothing kept


def _set2set_dense(set2set: Set2Set, x: Tensor, pad: Optional[Tensor] = None) -> Tensor:
    """:class:`Set2Set` on ``[B, N, C]`` (every graph has ``N`` groups, or fewer with ``pad``
    ``[B, N, 1]`` True at the padding): bmm and a plain softmax instead of scatter operations;
    same parameters, same result."""
    B = x.size(0)
    state = (x.new_zeros(set2set.lstm.num_layers, B, x.size(-1)),) * 2
    q_star = x.new_zeros(B, set2set.out_channels)
    for _ in range(set2set.processing_steps):
        q, state = set2set.lstm(q_star.unsqueeze(0), state)
        q = q.view(B, set2set.in_channels)
        e = torch.bmm(x, q.unsqueeze(-1))  # [B, N, 1]
        a = torch.softmax(e if pad is None else e.masked_fill(pad, float('-inf')), dim=1)
        r = torch.bmm(a.transpose(1, 2), x).squeeze(1)
        q_star = torch.cat([q, r], dim=-1)
    return q_star


def _set2set_padded(set2set: Set2Set, h: Tensor, batch: Tensor, batch_size: int) -> Optional[Tensor]:
    """:class:`Set2Set` over graphs with different numbers of groups: ``h`` ``[sum N_i, C]``
    padded to ``[B, max N_i, C]``, the padding masked out of the softmax, then
    :func:`_set2set_dense` (1.6x faster than the scatter path on 16 graphs of 37-100 groups on a
    CPU); same result. None when ``batch`` is not sorted or a graph has no group (the scatter
    path handles those)."""
    if batch.numel() == 0 or bool((batch[1:] < batch[:-1]).any()):
        return None
    counts = torch.bincount(batch, minlength=batch_size)
    if counts.numel() != batch_size or bool((counts == 0).any()):
        return None
    pos = torch.arange(batch.numel(), device=batch.device) - (torch.cumsum(counts, 0) - counts)[batch]
    x = h.new_zeros(batch_size, int(counts.max()), h.size(-1)).index_put((batch, pos), h)
    pad = torch.ones(batch_size, x.size(1), 1, dtype=torch.bool, device=h.device)
    pad[batch, pos] = False
    return _set2set_dense(set2set, x, pad)


def _uniform_group_size(batch: Tensor, batch_size: int) -> Optional[int]:
    """``N`` if ``batch`` is ``[0]*N + [1]*N + ...`` for ``batch_size`` graphs, else None."""
    n = batch.numel()
    if batch_size < 1 or n == 0 or n % batch_size:
        return None
    size = n // batch_size
    expected = torch.arange(batch_size, device=batch.device).repeat_interleave(size)
    return size if torch.equal(batch, expected) else None


# ---------------------------------------------------------------------------- batches
MAX_PASS_GRAPHS = 32  # prediction: graphs of ~100 groups per pass beyond which a CPU slows down
@dataclass
class GraphBatch:
    r"""Prepared graphs stacked for :meth:`Inspector.forward_batch`, without PyG collation.

    ``x`` :math:`[\sum N_i, F]`, ``adj`` the block-diagonal :class:`Propagation`, ``batch`` the
    graph of every group, optional ``graph_attr`` :math:`[B, G]` and targets ``y`` :math:`[B, 12]`.
    """

    x: Tensor
    adj: Propagation
    batch: Tensor
    num_graphs: int
    graph_attr: Optional[Tensor] = None
    y: Optional[Tensor] = None

    @classmethod
    def from_graphs(cls, graphs: Sequence) -> 'GraphBatch':
        """Stack graphs carrying ``x`` and either ``gcn_index``/``gcn_weight``/``gcn_symmetric``
        (from :func:`gcn_edges`, as :meth:`TrainedInspector.prepare` stores them) or raw
        ``edge_index``/``edge_weight`` (then normalised here, in one pass for the batch)."""
        graphs = list(graphs)
        attrs = [getattr(g, 'graph_attr', None) for g in graphs]
        ys = [getattr(g, 'y', None) for g in graphs]
        attr = torch.cat([a.view(1, -1) for a in attrs]) if graphs and all(
            a is not None for a in attrs) else None
        y = torch.cat([t.view(1, -1) for t in ys]) if graphs and all(
            t is not None for t in ys) else None
        x = torch.cat([g.x for g in graphs])
        sizes = [g.x.size(0) for g in graphs]
        if not all(getattr(g, 'gcn_index', None) is not None for g in graphs):
            weights = [g.edge_weight if getattr(g, 'edge_weight', None) is not None else
                       torch.ones(g.edge_index.size(1), dtype=x.dtype) for g in graphs]
            return cls.from_edges(x, sizes, [g.edge_index for g in graphs], torch.cat(weights),
                                  attr, y)
        index = torch.cat([g.gcn_index + off for g, off in zip(graphs, _offsets(sizes))], 1)
        adj = Propagation(index, torch.cat([g.gcn_weight for g in graphs]), x.size(0),
                          symmetric=all(bool(g.gcn_symmetric) for g in graphs))
        return cls(x, adj, _graph_of_groups(sizes), len(graphs), attr, y)

    @classmethod
    def from_edges(cls, x: Tensor, sizes: Sequence[int], edge_indices: Sequence[Tensor],
                   edge_weight: Tensor, graph_attr: Optional[Tensor] = None,
                   y: Optional[Tensor] = None) -> 'GraphBatch':
        r"""Graphs given as stacked (scaled) features ``x`` :math:`[\sum N_i, F]`, their group
        counts ``sizes``, each graph's own ``edge_index`` and the stacked edge weights; the
        adjacency of the whole batch is normalised at once (the graphs are disjoint)."""
        index = torch.cat([e + off for e, off in zip(edge_indices, _offsets(sizes))], 1)
        adj = Propagation.from_edges(index, edge_weight, x.size(0), x.dtype)
        return cls(x, adj, _graph_of_groups(sizes), len(sizes), graph_attr, y)


def _offsets(sizes: Sequence[int]) -> list[int]:
    out, total = [], 0
    for n in sizes:
        out.append(total)
        total += n
    return out


def _graph_of_groups(sizes: Sequence[int]) -> Tensor:
    return torch.arange(len(sizes)).repeat_interleave(torch.tensor(sizes, dtype=torch.long))


# ---------------------------------------------------------------------------- the network
class Inspector(torch.nn.Module):
    r"""Predicts a training job's 12 resource metrics from its grouped graph.

    .. math::
        \mathbf{h}^{(0)} &= \mathrm{ReLU}(\phi_f(\mathbf{X}, \mathbf{A}))

        \mathbf{h}^{(k+1)} &= \mathrm{GRU}(\mathrm{ReLU}(\phi_r(\mathbf{h}^{(k)}, \mathbf{A})),
        \mathbf{h}^{(k)}), \quad k = 0, \ldots, K-1

        \mathbf{y} &= \mathrm{MLP}(\mathrm{Set2Set}(\mathbf{h}^{(K)}))

    where :math:`\mathbf{A}` is the symmetrically normalised group adjacency with self-loops
    (computed once per forward pass, or once per graph with :class:`GraphBatch`, and shared by
    all :math:`K+1` convolutions).

    For transfer learning (see :mod:`driple.inspector.transfer`) :meth:`split_repeats` adds a
    copy :math:`\phi_r'` of :math:`\phi_r` used for repetitions :math:`k \geq` ``tuned_from``.

    Args:
        in_channels (int): Number of features per group (3 for the ``"driple"`` feature set).
        hidden_channels (int, optional): Size of the group embeddings. (default: :obj:`64`)
        out_channels (int, optional): Number of predicted metrics. (default: :obj:`None`: one
            per declared target, ``len(driple.metrics.target_names())``)
        num_repeats (int, optional): How often :math:`\phi_r` is applied, :math:`K`; the paper
            uses half the number of groups. (default: :obj:`50`)
        set2set_steps (int, optional): Processing steps of the Set2Set readout.
            (default: :obj:`3`)
        dropout (float, optional): Dropout probability between the MLP layers.
            (default: :obj:`0.0`)
        tuned_from (int, optional): If set, repetitions from this index on use the separate
            layer :math:`\phi_r'`. (default: :obj:`None`)
        graph_channels (int, optional): Number of graph-level inputs (scaled
            ``graph_attr``) concatenated to the Set2Set output before the MLP; :obj:`0` is the
            paper's model. (default: :obj:`0`)
    """
    def __init__(
        self,
        in_channels: int,
        hidden_channels: int = 64,
        out_channels: Optional[int] = None,
        num_repeats: int = 50,
        set2set_steps: int = 3,
        dropout: float = 0.0,
        tuned_from: Optional[int] = None,
        graph_channels: int = 0,
    ):
        super().__init__()
        out_channels = _declared_targets() if out_channels is None else out_channels
        if in_channels < 1 or hidden_channels < 1 or out_channels < 1:
            raise ValueError("in_channels, hidden_channels and out_channels must be positive")
        if num_repeats < 0:
            raise ValueError(f"num_repeats must be >= 0 (got {num_repeats})")
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.out_channels = out_channels
        self.num_repeats = num_repeats
        self.set2set_steps = set2set_steps
        self.dropout = dropout
        self.graph_channels = graph_channels

        self.conv_first = GCNConv(in_channels, hidden_channels, normalize=False)  # φf
        self.conv_repeat = GCNConv(hidden_channels, hidden_channels, normalize=False)  # φr
        self.conv_repeat_tuned: Optional[GCNConv] = None  # φr' (transfer learning only)
        self.tuned_from: Optional[int] = None
        self.gru = torch.nn.GRUCell(hidden_channels, hidden_channels)
        self.set2set = Set2Set(hidden_channels, processing_steps=set2set_steps)
        self.mlp = MLP([2 * hidden_channels + graph_channels, hidden_channels, hidden_channels,
                        out_channels], dropout=dropout, norm=None)
        self.reset_parameters()
        if tuned_from is not None:
            self.split_repeats(tuned_from)

    def reset_parameters(self):
        r"""Resets all learnable parameters of the module."""
        self.conv_first.reset_parameters()
        self.conv_repeat.reset_parameters()
        if self.conv_repeat_tuned is not None:
            self.conv_repeat_tuned.reset_parameters()
        self.gru.reset_parameters()
        self.set2set.reset_parameters()
        self.mlp.reset_parameters()

    def split_repeats(self, tuned_from: Optional[int] = None) -> 'Inspector':
        r"""Gives repetitions ``k >= tuned_from`` their own copy :math:`\phi_r'` of
        :math:`\phi_r`, initialised from it (default split: ``num_repeats // 2``)."""
        tuned_from = self.num_repeats // 2 if tuned_from is None else int(tuned_from)
        if not 0 <= tuned_from <= self.num_repeats:
            raise ValueError(f"tuned_from must be in [0, {self.num_repeats}] (got {tuned_from})")
        self.conv_repeat_tuned = copy.deepcopy(self.conv_repeat)
        self.tuned_from = tuned_from
        return self

    def config(self) -> dict:
        r"""The keyword arguments that rebuild this module (plain types, for checkpoints)."""
        return dict(in_channels=self.in_channels, hidden_channels=self.hidden_channels,
                    out_channels=self.out_channels, num_repeats=self.num_repeats,
                    set2set_steps=self.set2set_steps, dropout=self.dropout,
                    tuned_from=self.tuned_from, graph_channels=self.graph_channels)

    @staticmethod
    def propagation_matrix(edge_index: Tensor, edge_weight: Optional[Tensor],
                           num_nodes: int, dtype: torch.dtype = torch.float) -> Propagation:
        r"""The transposed normalised adjacency :math:`\hat{\mathbf{A}}^{\top}` with self-loops
        (the ``adj_t`` that :class:`GCNConv` multiplies with) as a :class:`Propagation`."""
        return Propagation.from_edges(edge_index, edge_weight, num_nodes, dtype)

    def forward(
        self,
        x: Tensor,
        edge_index: Tensor,
        edge_weight: Optional[Tensor] = None,
        batch: Optional[Tensor] = None,
        batch_size: Optional[int] = None,
        graph_attr: Optional[Tensor] = None,
    ) -> Tensor:
        r"""
        Args:
            x (torch.Tensor): Scaled group features :math:`[N, F]`.
            edge_index (torch.Tensor): Group edges :math:`[2, E]` (both directions).
            edge_weight (torch.Tensor, optional): Scaled edge weights :math:`[E]`.
            batch (torch.Tensor, optional): Graph index of every group :math:`[N]`.
            batch_size (int, optional): Number of graphs :math:`B`.
            graph_attr (torch.Tensor, optional): Scaled graph-level inputs
                :math:`[B, \text{graph\_channels}]` (only with ``graph_channels > 0``).

        Returns:
            Scaled predictions :math:`[B, \text{out\_channels}]`.
        """
        self._check_x(x)
        adj = self.propagation_matrix(edge_index, edge_weight, x.size(0), x.dtype)
        h = self.propagate(self.encode(x, adj), adj)
        return self.readout(h, batch, batch_size, graph_attr)

    def forward_batch(self, data: GraphBatch) -> Tensor:
        r""":meth:`forward` on a :class:`GraphBatch` (adjacency normalised beforehand)."""
        self._check_x(data.x)
        h = self.propagate(self.encode(data.x, data.adj), data.adj)
        return self.readout(h, data.batch, data.num_graphs, data.graph_attr)

    def _check_x(self, x: Tensor) -> None:
        if x.dim() != 2 or x.size(1) != self.in_channels:
            raise ValueError(f"expected x of shape [num_groups, {self.in_channels}], "
                             f"got {list(x.shape)}")

    def encode(self, x: Tensor, adj: Propagation) -> Tensor:
        r"""Group embeddings before the first repetition, :math:`\mathbf{h}^{(0)}`."""
        conv = self.conv_first
        return F.relu((adj.to(x.dtype) @ F.linear(x, conv.lin.weight)) + conv.bias)

    def propagate(self, h: Tensor, adj: Propagation, start: int = 0,
                  stop: Optional[int] = None) -> Tensor:
        r"""Applies repetitions ``start <= k < stop`` (default: to the end) to
        :math:`\mathbf{h}^{(\text{start})}`."""
        stop = self.num_repeats if stop is None else stop
        if self.conv_repeat_tuned is None:
            segments = [(start, stop, self.conv_repeat)]
        else:
            split = self.tuned_from
            segments = [(start, min(stop, split), self.conv_repeat),
                        (max(start, split), stop, self.conv_repeat_tuned)]
        for begin, end, conv in segments:
            if end > begin:
                h = repeat_conv_gru(h, adj, conv, self.gru, end - begin)
        return h

    def readout(self, h: Tensor, batch: Optional[Tensor] = None,
                batch_size: Optional[int] = None, graph_attr: Optional[Tensor] = None) -> Tensor:
        r"""Set2Set over the groups of each graph, then the MLP head."""
        return self.head(self.pool(h, batch, batch_size), graph_attr)

    def head(self, z: Tensor, graph_attr: Optional[Tensor] = None) -> Tensor:
        r"""The MLP on graph embeddings :math:`[B, 2 \cdot \text{hidden\_channels}]` (and the
        graph-level inputs when ``graph_channels > 0``)."""
        if self.graph_channels:
            if graph_attr is None or graph_attr.shape != (z.size(0), self.graph_channels):
                got = None if graph_attr is None else list(graph_attr.shape)
                raise ValueError(f"expected graph_attr of shape [{z.size(0)}, "
                                 f"{self.graph_channels}], got {got}")
            z = torch.cat([z, graph_attr.to(z.dtype)], dim=-1)
        return self.mlp(z)

    def pool(self, h: Tensor, batch: Optional[Tensor] = None,
             batch_size: Optional[int] = None) -> Tensor:
        r"""Set2Set graph embeddings :math:`[B, 2 \cdot \text{hidden\_channels}]` (dense when
        every graph of the batch has the same number of groups, padded and masked otherwise)."""
        if batch is None:
            batch = h.new_zeros(h.size(0), dtype=torch.long)
        if batch_size is None:
            batch_size = int(batch.max()) + 1 if batch.numel() > 0 else 1
        size = _uniform_group_size(batch, batch_size)
        if size is not None:
            return _set2set_dense(self.set2set, h.view(batch_size, size, h.size(-1)))
        padded = _set2set_padded(self.set2set, h, batch, batch_size)
        return padded if padded is not None else self.set2set(h, batch, dim_size=batch_size)

    def __repr__(self) -> str:
        tuned = '' if self.tuned_from is None else f', tuned_from={self.tuned_from}'
        graph = f', graph_channels={self.graph_channels}' if self.graph_channels else ''
        return (f'{self.__class__.__name__}({self.in_channels}, {self.out_channels}, '
                f'hidden_channels={self.hidden_channels}, num_repeats={self.num_repeats}'
                f'{tuned}{graph})')


class FeatureMLP(torch.nn.Module):
    r"""The features-only inspector: an MLP on the graph-level inputs alone, no graph network.

    The third configuration of the ablation (paper GNN, hybrid, features only): what the
    graph-level features and priors predict without the grouped graph. Same interface as
    :class:`Inspector` (``forward``, ``forward_batch``, ``head``, ``config``), so training,
    checkpoints and prediction treat both alike; ``x`` and the edges are ignored.

    Args:
        graph_channels (int): Number of (scaled) graph-level inputs.
        hidden_channels (int, optional): Width of the hidden layers. (default: :obj:`64`)
        out_channels (int, optional): Number of predicted targets. (default: :obj:`None`: one
            per declared target)
        num_layers (int, optional): Linear layers of the MLP. (default: :obj:`3`)
        dropout (float, optional): Dropout between the layers. (default: :obj:`0.0`)
    """
    reads_graph = False  # prediction skips normalising the adjacency

    def __init__(self, graph_channels: int, hidden_channels: int = 64, out_channels: Optional[int] = None,
                 num_layers: int = 3, dropout: float = 0.0):
        super().__init__()
        out_channels = _declared_targets() if out_channels is None else out_channels
        if graph_channels < 1 or hidden_channels < 1 or out_channels < 1 or num_layers < 1:
            raise ValueError("graph_channels, hidden_channels, out_channels and num_layers must be positive")
        self.graph_channels = graph_channels
        self.hidden_channels = hidden_channels
        self.out_channels = out_channels
        self.num_layers = num_layers
        self.dropout = dropout
        self.mlp = MLP([graph_channels, *[hidden_channels] * (num_layers - 1), out_channels],
                       dropout=dropout, norm=None)
        self.reset_parameters()

    def reset_parameters(self):
        r"""Resets all learnable parameters of the module."""
        self.mlp.reset_parameters()

    def config(self) -> dict:
        r"""The keyword arguments that rebuild this module, with ``kind="features"``."""
        return dict(kind="features", graph_channels=self.graph_channels,
                    hidden_channels=self.hidden_channels, out_channels=self.out_channels,
                    num_layers=self.num_layers, dropout=self.dropout)

    def head(self, z: Optional[Tensor], graph_attr: Optional[Tensor] = None) -> Tensor:
        r"""The MLP on the graph-level inputs :math:`[B, \text{graph\_channels}]`."""
        if graph_attr is None or graph_attr.dim() != 2 or graph_attr.size(1) != self.graph_channels:
            got = None if graph_attr is None else list(graph_attr.shape)
            raise ValueError(f"expected graph_attr of shape [B, {self.graph_channels}], got {got}")
        return self.mlp(graph_attr)

    def forward(self, x: Optional[Tensor] = None, edge_index: Optional[Tensor] = None,
                edge_weight: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                batch_size: Optional[int] = None, graph_attr: Optional[Tensor] = None) -> Tensor:
        r"""Predictions :math:`[B, \text{out\_channels}]` from ``graph_attr`` alone."""
        return self.head(None, graph_attr)

    def forward_batch(self, data: 'GraphBatch') -> Tensor:
        return self.head(None, data.graph_attr)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.graph_channels}, {self.out_channels}, '
                f'hidden_channels={self.hidden_channels}, num_layers={self.num_layers})')


class NetworkEnsemble(torch.nn.Module):
    r"""Networks of one configuration, trained alone with different seeds, whose scaled outputs
    are averaged: with log targets (the ``ln`` scaling) that is the geometric mean of their
    predictions. Why: trained on ~150 jobs, one network's error on unseen families moves by
    a few points with its seed alone (``scripts/seed_spread.py``); the average does not
    depend on one draw.

    Same interface as its members (``forward``, ``forward_batch``, ``head``, ``config`` and
    their sizes), so checkpoints and prediction treat it as one network; training and
    fine-tuning train each member on its own (:func:`members_of`).

    Args:
        members (Sequence[torch.nn.Module]): At least two networks of the same configuration
            (:class:`Inspector` or :class:`FeatureMLP`).
    """

    def __init__(self, members: Sequence[torch.nn.Module]):
        super().__init__()
        members = list(members)
        if len(members) < 2:
            raise ValueError("an ensemble needs at least two networks")
        shape = {k: v for k, v in members[0].config().items() if k != "tuned_from"}
        for m in members[1:]:
            if {k: v for k, v in m.config().items() if k != "tuned_from"} != shape:
                raise ValueError("the networks of an ensemble must have the same configuration")
        self.members = torch.nn.ModuleList(members)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in ("in_channels", "hidden_channels", "out_channels", "graph_channels",
                        "num_repeats", "set2set_steps", "dropout", "num_layers", "reads_graph"):
                return getattr(self._modules["members"][0], name)
            raise

    def reset_parameters(self):
        r"""Resets every member's parameters."""
        for m in self.members:
            m.reset_parameters()

    def config(self) -> dict:
        r"""``kind="ensemble"`` and each member's config."""
        return dict(kind="ensemble", members=[m.config() for m in self.members])

    def _mean(self, outputs) -> Tensor:
        return torch.stack(list(outputs)).mean(0)

    def forward(self, *args, **kwargs) -> Tensor:
        return self._mean(m(*args, **kwargs) for m in self.members)

    def forward_batch(self, data: 'GraphBatch') -> Tensor:
        return self._mean(m.forward_batch(data) for m in self.members)

    def head(self, z: Optional[Tensor], graph_attr: Optional[Tensor] = None) -> Tensor:
        return self._mean(m.head(z, graph_attr) for m in self.members)

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({len(self.members)} x {self.members[0]!r})'


def members_of(model: torch.nn.Module) -> list:
    r"""The networks trained one by one: an ensemble's members, or ``[model]``."""
    return list(model.members) if isinstance(model, NetworkEnsemble) else [model]


def _build_ensemble(members: Sequence[dict]) -> NetworkEnsemble:
    return NetworkEnsemble([build_model(c) for c in members])


MODEL_KINDS = {"inspector": Inspector, "features": FeatureMLP, "ensemble": _build_ensemble}


def build_model(config: dict) -> torch.nn.Module:
    r"""The network a checkpoint's ``config`` describes: :class:`Inspector` (``kind`` absent or
    ``"inspector"``: the paper's GNN, or the hybrid with ``graph_channels > 0``),
    :class:`FeatureMLP` (``kind="features"``) or :class:`NetworkEnsemble` (``kind="ensemble"``,
    ``members``: their configs)."""
    config = dict(config)
    kind = config.pop("kind", "inspector")
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; known: {', '.join(MODEL_KINDS)}")
    return MODEL_KINDS[kind](**config)


def reference_forward(model: Inspector, x: Tensor, edge_index: Tensor,
                      edge_weight: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                      batch_size: Optional[int] = None,
                      graph_attr: Optional[Tensor] = None) -> Tensor:
    r""":meth:`Inspector.forward` computed layer by layer with the PyG and torch modules
    themselves (:class:`GCNConv` on the normalised sparse adjacency, :class:`torch.nn.GRUCell`,
    scatter-based :class:`Set2Set`): the specification the fused path is tested against, and the
    baseline of ``scripts/bench_inspector.py``. Slow: not for use."""
    from torch_geometric.utils import to_torch_csr_tensor

    index, weight = gcn_edges(edge_index, edge_weight, x.size(0), x.dtype)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        adj_t = to_torch_csr_tensor(index, weight, size=(x.size(0), x.size(0)))
    h = F.relu(model.conv_first(x, adj_t))
    for k in range(model.num_repeats):
        conv = model.conv_repeat
        if model.conv_repeat_tuned is not None and k >= model.tuned_from:
            conv = model.conv_repeat_tuned
        h = model.gru(F.relu(conv(h, adj_t)), h)
    if batch is None:
        batch = h.new_zeros(h.size(0), dtype=torch.long)
    if batch_size is None:
        batch_size = int(batch.max()) + 1 if batch.numel() > 0 else 1
    return model.head(model.set2set(h, batch, dim_size=batch_size), graph_attr)


def run_batch(model: torch.nn.Module, batch) -> Tensor:
    r"""``model`` applied to a :class:`GraphBatch` or a PyG mini-batch (passes ``graph_attr``
    when the batch has it)."""
    if isinstance(batch, GraphBatch):
        return model.forward_batch(batch)
    return model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, batch.num_graphs,
                 graph_attr=getattr(batch, 'graph_attr', None))
