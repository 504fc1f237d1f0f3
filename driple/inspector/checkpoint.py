"""A trained inspector and its checkpoint: load, save, and raw graphs in, raw targets out.

:class:`TrainedInspector` bundles the :class:`~driple.inspector.model.Inspector`, its feature and
target scalers, the names of the targets it predicts and a record of how it was made (setting,
feature set, op vocabulary, split, scores). Its checkpoint is a dict of plain types and tensors,
saved with :func:`torch.save` and read back with ``weights_only=True``; the model's
configuration and the target names travel in it, so loading never has to guess layer sizes,
and a checkpoint whose targets are not the ones driple declares (:mod:`driple.metrics`) is
refused.

    inspector = load_inspector("trained_models/cpu-ddp-w2-lo")
    inspector.predict(graphs)        # [n, targets] for graphs made by driple.graph.build.build_input

A model or zoo name in, a profile out: :class:`driple.predict.predictor.Predictor`.
"""
from __future__ import annotations

import os
import os.path as osp
import pickle
from typing import Optional, Sequence

import numpy as np
import torch

from driple.errors import DripleError
from driple.inspector.model import Inspector, run_batch
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.metrics import target_names

CHECKPOINT_FORMAT = "driple-inspector"
CHECKPOINT_VERSION = 1
CHECKPOINT_NAME = "inspector.pt"  # file name inside a trained_models/<setting>/ directory
# Checkpoints saved before the builder record held the grouping seed (driple 0.1.0: every shipped
# one) were grouped with seed 42, the default of that time; read a missing seed as 42, not as
# whatever the default is now.
UNRECORDED_GROUPING_SEED = 42


def _driple_version() -> str:
    from driple import __version__

    return __version__


class TrainedInspector:
    """A trained :class:`Inspector` with its scalers.

    Args:
        model: The network (its outputs are scaled targets).
        feature_scaler: Fitted :class:`FeatureScaler` (its ``feature_names`` define the input).
        target_scaler: Fitted :class:`TargetScaler`.
        info: Plain-type record: ``feature_set``, ``vocab_digest``, ``builder`` options,
            ``setting``, ``split``, ``scores``, ``training``, ... (saved in the checkpoint).
        targets: Names of the model's outputs, in order (default: the declared targets,
            :func:`driple.metrics.target_names`).
    """

    def __init__(self, model: Inspector, feature_scaler: FeatureScaler,
                 target_scaler: TargetScaler, info: Optional[dict] = None,
                 targets: Optional[Sequence[str]] = None):
        self.model = model
        self.feature_scaler = feature_scaler
        self.target_scaler = target_scaler
        self.info = dict(info or {})
        self.targets = tuple(targets if targets is not None else target_names())
        if len(self.targets) != model.out_channels:
            raise DripleError(f"the model has {model.out_channels} outputs for {len(self.targets)} "
                              f"targets ({', '.join(self.targets)})")

    @property
    def feature_set(self) -> Optional[str]:
        return self.info.get("feature_set")

    @property
    def vocab_digest(self) -> Optional[str]:
        return self.info.get("vocab_digest")

    @property
    def setting(self) -> Optional[str]:
        return self.info.get("setting")

    # ------------------------------------------------------------------ checks
    def check_compatible(self, feature_set: Optional[str], vocab_digest: Optional[str],
                         what: str = "the graph") -> None:
        """Refuse graphs built with another feature set or op vocabulary (DripleError)."""
        if feature_set and self.feature_set and feature_set != self.feature_set:
            raise DripleError(
                f"{what} uses the {feature_set!r} feature set but this inspector was trained on "
                f"{self.feature_set!r}; build graphs with features={self.feature_set!r} or "
                "retrain the inspector")
        if vocab_digest and self.vocab_digest and vocab_digest != self.vocab_digest:
            raise DripleError(
                f"{what} was built with op vocabulary {vocab_digest} but this inspector was trained "
                f"with {self.vocab_digest}; the op-frequency codes differ, so retrain the inspector "
                "(or rebuild the graphs with its vocabulary)")

    def _check_graph(self, data) -> None:
        self.check_compatible(getattr(data, "feature_set", None), getattr(data, "vocab_digest", None))
        key = getattr(data, "grouping_key", None)
        if key:
            from driple.graph.grouping import grouping_key

            o = self.build_options()
            if key != grouping_key(o["groups"], o["grouping"], o["seed"]):
                raise DripleError(
                    f"the graph was grouped as {key} but this inspector was trained on graphs grouped "
                    f"as {grouping_key(o['groups'], o['grouping'], o['seed'])}; build graphs with "
                    f"groups={o['groups']}, grouping={o['grouping']!r}, seed={o['seed']} "
                    "(TrainedInspector.build_options())")

    # ------------------------------------------------------------------ prediction
    def prepare(self, graphs: Sequence) -> list:
        """Scaled copies of raw graphs holding only what the model reads (and ``y`` if present).

        Each also carries its GCN-normalised adjacency (``gcn_index``, ``gcn_weight``,
        ``gcn_symmetric``; see :func:`~driple.inspector.model.gcn_edges`), computed once here
        instead of in every forward pass."""
        from torch_geometric.data import Data

        from driple.inspector.model import gcn_edges, is_symmetric

        out = []
        for g in graphs:
            self._check_graph(g)
            s = self.feature_scaler.transform(g)
            n = s.x.size(0)
            index, weight = gcn_edges(s.edge_index, s.edge_weight, n, s.x.dtype)
            item = Data(x=s.x, edge_index=s.edge_index, edge_weight=s.edge_weight,
                        gcn_index=index, gcn_weight=weight,
                        gcn_symmetric=is_symmetric(index, weight, n), num_nodes=n)
            if self.model.graph_channels:
                if getattr(s, "graph_attr", None) is None:
                    raise DripleError("this inspector reads graph-level attributes (graph_attr); "
                                      "build the graph with driple.graph.build")
                item.graph_attr = s.graph_attr
            y = getattr(g, "y", None)
            if y is not None:
                item.y = torch.as_tensor(self.target_scaler.transform(y.view(1, -1).double().numpy()),
                                         dtype=torch.float32)
            out.append(item)
        return out

    @torch.inference_mode()
    def predict_scaled(self, prepared: Sequence, batch_size: int = 16) -> np.ndarray:
        """Model outputs ``[n, targets]`` (scaled units) for graphs from :meth:`prepare`, run
        ``batch_size`` graphs at a time (at most ``MAX_PASS_GRAPHS``, see :meth:`predict`),
        stacked directly, no PyG collation."""
        from driple.inspector.model import MAX_PASS_GRAPHS, GraphBatch, flush_denormals

        self.model.eval()
        prepared = list(prepared)
        step = max(1, min(int(batch_size), MAX_PASS_GRAPHS))
        with flush_denormals():
            outs = [run_batch(self.model, GraphBatch.from_graphs(prepared[i:i + step]))
                    for i in range(0, len(prepared), step)]
        if not outs:
            return np.zeros((0, self.model.out_channels))
        return torch.cat(outs).double().numpy()

    def predict(self, graphs, batch_size: int = 16) -> np.ndarray:
        """Predicted targets ``[n, targets]`` in raw units (order of :attr:`targets`) for one graph
        or a sequence of graphs as made by :func:`driple.graph.build.build_input`.

        Same result as ``predict_scaled(prepare(graphs))``, faster: each batch of
        ``batch_size`` graphs is scaled and normalised as one stacked tensor, no per-graph
        copies. The result does not depend on ``batch_size``, the number of graphs per
        forward pass; passes are capped at ``MAX_PASS_GRAPHS`` (32) graphs: beyond ~16 graphs of
        100 groups the working set leaves a core's cache and a pass gets slower per graph."""
        from torch_geometric.data.data import BaseData

        from driple.inspector.model import MAX_PASS_GRAPHS, GraphBatch, flush_denormals

        if isinstance(graphs, BaseData):
            graphs = [graphs]
        graphs = list(graphs)
        self.model.eval()
        fs, outs = self.feature_scaler, []
        step = max(1, min(int(batch_size), MAX_PASS_GRAPHS))
        for i in range(0, len(graphs), step):
            chunk = graphs[i:i + step]
            for g in chunk:
                self._check_graph(g)
            attr = None
            if self.model.graph_channels:
                if any(getattr(g, "graph_attr", None) is None for g in chunk):
                    raise DripleError("this inspector reads graph-level attributes (graph_attr); "
                                      "build the graph with driple.graph.build")
                attr = fs.transform_graph_attr(torch.cat([g.graph_attr.view(1, -1) for g in chunk]))
            weight = torch.cat([g.edge_weight if getattr(g, "edge_weight", None) is not None
                                else torch.ones(g.edge_index.size(1)) for g in chunk])
            with torch.inference_mode(), flush_denormals():
                batch = GraphBatch.from_edges(
                    fs.transform_x(torch.cat([fs.check_width(g.x) for g in chunk])),
                    [g.x.size(0) for g in chunk], [g.edge_index for g in chunk],
                    fs.transform_edge_weight(weight), attr)
                outs.append(run_batch(self.model, batch))
        if not outs:
            return np.zeros((0, self.model.out_channels))
        return self.target_scaler.inverse_transform(torch.cat(outs).double().numpy())

    def build_options(self) -> dict:
        """Graph-builder options this inspector was trained with (groups, grouping, features,
        seed); what the checkpoint does not record is the default of the version that made it."""
        b = self.info.get("builder") or {}
        return {"groups": int(b.get("groups", 100)), "grouping": b.get("grouping", "uniform"),
                "features": self.feature_set or b.get("features", "driple"),
                "seed": int(b.get("seed", UNRECORDED_GROUPING_SEED))}

    def predict_frame(self, graphs, batch_size: int = 64):
        """:meth:`predict` as a pandas DataFrame with one column per target."""
        import pandas as pd

        return pd.DataFrame(self.predict(graphs, batch_size), columns=list(self.targets))

    # ------------------------------------------------------------------ checkpoint
    def state(self) -> dict:
        """The checkpoint: plain types and tensors only."""
        return {
            "format": CHECKPOINT_FORMAT,
            "format_version": CHECKPOINT_VERSION,
            "driple_version": _driple_version(),
            "config": self.model.config(),
            "state_dict": {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()},
            "feature_scaler": self.feature_scaler.to_dict(),
            "target_scaler": self.target_scaler.to_dict(),
            "metrics": list(self.targets),  # the target names, in output order
            **self.info,
        }

    def save(self, path: str) -> str:
        """Write the checkpoint to ``path`` (a directory gets ``inspector.pt``); returns the file."""
        if osp.isdir(path) or not osp.splitext(path)[1]:
            os.makedirs(path, exist_ok=True)
            path = osp.join(path, CHECKPOINT_NAME)
        else:
            os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
        torch.save(self.state(), path + ".tmp")
        os.replace(path + ".tmp", path)
        return path

    @classmethod
    def from_state(cls, state: dict, source: str = "checkpoint") -> "TrainedInspector":
        """Rebuild from :meth:`state`; a clear :class:`DripleError` for foreign or stale files."""
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise DripleError(f"{source} is not a driple inspector checkpoint")
        version = state.get("driple_version")
        if version != _driple_version():
            raise DripleError(
                f"{source} was saved by driple {version}, this is driple {_driple_version()}; "
                "checkpoints are not carried across versions: retrain with `driple train`")
        if state.get("format_version") != CHECKPOINT_VERSION:
            raise DripleError(f"{source} has checkpoint format {state.get('format_version')}, "
                              f"expected {CHECKPOINT_VERSION}; retrain with `driple train`")
        check_targets(state.get("metrics"), source)
        try:
            model = Inspector(**state["config"])
            model.load_state_dict(state["state_dict"])
            feature_scaler = FeatureScaler.from_dict(state["feature_scaler"])
            target_scaler = TargetScaler.from_dict(state["target_scaler"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise DripleError(f"{source} is damaged ({type(exc).__name__}: {exc}); "
                              "retrain with `driple train`") from None
        if len(feature_scaler.feature_names) != model.in_channels:
            raise DripleError(f"{source} is inconsistent: {len(feature_scaler.feature_names)} "
                              f"feature names for a model of {model.in_channels} inputs")
        model.eval()
        skip = {"format", "format_version", "driple_version", "config", "state_dict",
                "feature_scaler", "target_scaler", "metrics"}
        if model.out_channels != len(state["metrics"]):
            raise DripleError(f"{source} is inconsistent: {model.out_channels} outputs for "
                              f"{len(state['metrics'])} target names")
        return cls(model, feature_scaler, target_scaler, {k: v for k, v in state.items() if k not in skip},
                   targets=state["metrics"])


def check_targets(names, source: str = "the checkpoint") -> None:
    """Refuse a checkpoint whose target names (in output order) are not the declared ones."""
    declared = list(target_names())
    names = list(names) if isinstance(names, (list, tuple)) else names
    if names == declared:
        return
    if not isinstance(names, list):
        raise DripleError(f"{source} records no target names; retrain with `driple train`")
    missing = [n for n in declared if n not in names]
    unknown = [n for n in names if n not in declared]
    what = "; ".join(part for part in (
        f"it lacks {', '.join(missing)}" if missing else "",
        f"it predicts {', '.join(unknown)}, which driple does not declare" if unknown else "",
        "" if missing or unknown else "its targets are in another order") if part)
    raise DripleError(f"{source} predicts {len(names)} targets, driple declares {len(declared)} "
                      f"(driple.metrics): {what}; retrain with `driple train`")


def _unreadable_reason(exc: Exception) -> str:
    """Why ``torch.load`` failed, in our words: torch's own message may advise
    ``weights_only=False``, which would run code from the file -- never the advice here."""
    if isinstance(exc, IsADirectoryError):
        return "it is a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, (EOFError, OSError)) or "zip archive" in str(exc):
        return f"the file is truncated or damaged ({type(exc).__name__})"
    if isinstance(exc, pickle.UnpicklingError):
        return "its contents are damaged or hold objects other than tensors and plain data"
    return f"its contents are damaged ({type(exc).__name__})"


def checkpoint_path(path: str) -> str:
    """``path`` itself, or ``path/inspector.pt`` for a trained-model directory."""
    return osp.join(path, CHECKPOINT_NAME) if osp.isdir(path) else path


def load_inspector(path: str, feature_set: Optional[str] = None,
                   vocab_digest: Optional[str] = None) -> TrainedInspector:
    """Load a checkpoint file or ``trained_models/<setting>/`` directory.

    ``feature_set`` / ``vocab_digest``, when given, must match the checkpoint's (else
    :class:`DripleError`), as they must for every graph passed to :meth:`TrainedInspector.predict`.
    """
    file = checkpoint_path(path)
    if not osp.exists(file):
        raise DripleError(f"no inspector checkpoint at {path} (train one with `driple train`)")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - whatever torch raises for a bad file, one line
        raise DripleError(f"{file} is not a readable driple inspector checkpoint: "
                          f"{_unreadable_reason(exc)}; copy it again or retrain with `driple train`") from None
    predictor = TrainedInspector.from_state(state, source=file)
    predictor.check_compatible(feature_set, vocab_digest, what="the requested input")
    return predictor

