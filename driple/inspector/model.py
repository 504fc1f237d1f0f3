"""The inspector network: GCN φf, a shared GCN φr repeated K times with GRU updates, Set2Set, MLP.

Follows Driple (SIGMETRICS 2022) and PyG's ``examples/qm9_nn_conv.py``. Inputs are scaled
grouped graphs (see :mod:`driple.inspector.scaling`); outputs are the 12 scaled metrics of
:data:`driple.metrics.METRICS`.
"""
from __future__ import annotations

import copy
import warnings
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import MLP, GCNConv
from torch_geometric.nn.aggr import Set2Set
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import to_torch_csr_tensor


class Inspector(torch.nn.Module):
    r"""Predicts a training job's 12 resource metrics from its grouped graph.

    .. math::
        \mathbf{h}^{(0)} &= \mathrm{ReLU}(\phi_f(\mathbf{X}, \mathbf{A}))

        \mathbf{h}^{(k+1)} &= \mathrm{GRU}(\mathrm{ReLU}(\phi_r(\mathbf{h}^{(k)}, \mathbf{A})),
        \mathbf{h}^{(k)}), \quad k = 0, \ldots, K-1

        \mathbf{y} &= \mathrm{MLP}(\mathrm{Set2Set}(\mathbf{h}^{(K)}))

    where :math:`\mathbf{A}` is the symmetrically normalised group adjacency with self-loops
    (computed once per forward pass and shared by all :math:`K+1` convolutions).

    For transfer learning (see :mod:`driple.inspector.transfer`) :meth:`split_repeats` adds a
    copy :math:`\phi_r'` of :math:`\phi_r` used for repetitions :math:`k \geq` ``tuned_from``.

    Args:
        in_channels (int): Number of features per group (3 for the ``"driple"`` feature set).
        hidden_channels (int, optional): Size of the group embeddings. (default: :obj:`64`)
        out_channels (int, optional): Number of predicted metrics. (default: :obj:`12`)
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
        out_channels: int = 12,
        num_repeats: int = 50,
        set2set_steps: int = 3,
        dropout: float = 0.0,
        tuned_from: Optional[int] = None,
        graph_channels: int = 0,
    ):
        super().__init__()
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
                           num_nodes: int, dtype: torch.dtype = torch.float) -> Tensor:
        r"""The transposed normalised adjacency :math:`\hat{\mathbf{A}}^{\top}` with self-loops
        as a sparse CSR tensor (the ``adj_t`` that :class:`GCNConv` multiplies with)."""
        edge_index, edge_weight = gcn_norm(edge_index, edge_weight, num_nodes,
                                           add_self_loops=True, dtype=dtype)
        with warnings.catch_warnings():  # torch: "sparse CSR support is in beta state"
            warnings.simplefilter('ignore', UserWarning)
            return to_torch_csr_tensor(edge_index.flip(0), edge_weight,
                                       size=(num_nodes, num_nodes))

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
        if x.dim() != 2 or x.size(1) != self.in_channels:
            raise ValueError(f"expected x of shape [num_groups, {self.in_channels}], "
                             f"got {list(x.shape)}")
        adj_t = self.propagation_matrix(edge_index, edge_weight, x.size(0), x.dtype)
        h = self.propagate(self.encode(x, adj_t), adj_t)
        return self.readout(h, batch, batch_size, graph_attr)

    def encode(self, x: Tensor, adj_t: Tensor) -> Tensor:
        r"""Group embeddings before the first repetition, :math:`\mathbf{h}^{(0)}`."""
        return F.relu(self.conv_first(x, adj_t))

    def propagate(self, h: Tensor, adj_t: Tensor, start: int = 0,
                  stop: Optional[int] = None) -> Tensor:
        r"""Applies repetitions ``start <= k < stop`` (default: to the end) to
        :math:`\mathbf{h}^{(\text{start})}`."""
        stop = self.num_repeats if stop is None else stop
        for k in range(start, stop):
            conv = self.conv_repeat
            if self.conv_repeat_tuned is not None and k >= self.tuned_from:
                conv = self.conv_repeat_tuned
            h = self.gru(F.relu(conv(h, adj_t)), h)
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
        r"""Set2Set graph embeddings :math:`[B, 2 \cdot \text{hidden\_channels}]`."""
        if batch is None:
            batch = h.new_zeros(h.size(0), dtype=torch.long)
        if batch_size is None:
            batch_size = int(batch.max()) + 1 if batch.numel() > 0 else 1
        return self.set2set(h, batch, dim_size=batch_size)

    def __repr__(self) -> str:
        tuned = '' if self.tuned_from is None else f', tuned_from={self.tuned_from}'
        graph = f', graph_channels={self.graph_channels}' if self.graph_channels else ''
        return (f'{self.__class__.__name__}({self.in_channels}, {self.out_channels}, '
                f'hidden_channels={self.hidden_channels}, num_repeats={self.num_repeats}'
                f'{tuned}{graph})')


def run_batch(model: torch.nn.Module, batch) -> Tensor:
    r"""``model`` applied to a PyG mini-batch (passes ``graph_attr`` when the batch has it)."""
    return model(batch.x, batch.edge_index, batch.edge_weight, batch.batch, batch.num_graphs,
                 graph_attr=getattr(batch, 'graph_attr', None))
