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
from driple.inspector.graph_inputs import GraphInputs, stack_graph_features
from driple.inspector.model import Inspector, build_model, run_batch
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.metrics import label_version, target, target_names, target_units

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
        model: The network (its outputs are scaled targets): an :class:`Inspector` (paper GNN or
            hybrid) or a :class:`~driple.inspector.model.FeatureMLP`.
        feature_scaler: Fitted :class:`FeatureScaler` (its ``feature_names`` define the input).
        target_scaler: Fitted :class:`TargetScaler`.
        info: Plain-type record: ``feature_set``, ``vocab_digest``, ``builder`` options,
            ``setting``, ``split``, ``scores``, ``training``, ``configuration``, ... (saved in
            the checkpoint).
        targets: Names of the model's outputs, in order (default: the declared targets,
            :func:`driple.metrics.target_names`).
        graph_inputs: Fitted :class:`GraphInputs` (the hybrid's and the features-only model's
            graph-level features and priors, with the setting and host figures); None: the
            model reads the legacy ``graph_attr`` columns (``graph_channels > 0``) or none.
        target_priors: With ``graph_inputs``, the prior of each target (a name of
            :data:`driple.graph.summary_features.PRIORS` or None) when the model predicts
            residuals over them (``target = prior x exp(output)``, the ``ln`` target scaling);
            None: plain targets.
    """

    def __init__(self, model: torch.nn.Module, feature_scaler: FeatureScaler,
                 target_scaler: TargetScaler, info: Optional[dict] = None,
                 targets: Optional[Sequence[str]] = None, graph_inputs: Optional[GraphInputs] = None,
                 target_priors: Optional[Sequence[Optional[str]]] = None):
        self.model = model
        self.feature_scaler = feature_scaler
        self.target_scaler = target_scaler
        self.info = dict(info or {})
        self.targets = tuple(targets if targets is not None else target_names())
        self.graph_inputs = graph_inputs
        self.target_priors = None if target_priors is None else tuple(target_priors)
        self._labels, self._units = label_version(), None  # from_state sets the recorded ones
        self.trees = None  # a TreeMember whose predictions are averaged in (attach_trees)
        self.roofline = None  # a RooflineMember joined into the durations (attach_roofline)
        if len(self.targets) != model.out_channels:
            raise DripleError(f"the model has {model.out_channels} outputs for {len(self.targets)} "
                              f"targets ({', '.join(self.targets)})")
        if graph_inputs is not None and model.graph_channels != len(graph_inputs):
            raise DripleError(f"the model reads {model.graph_channels} graph-level inputs, the "
                              f"graph inputs give {len(graph_inputs)}")
        if self.target_priors is not None:
            if graph_inputs is None:
                raise DripleError("residuals over priors need the graph inputs (setting, host figures)")
            if len(self.target_priors) != len(self.targets):
                raise DripleError(f"{len(self.target_priors)} target priors for {len(self.targets)} targets")
            if target_scaler.method != "ln":
                raise DripleError(f"residuals over priors need the 'ln' target scaling, not "
                                  f"{target_scaler.method!r}")

    def attach_trees(self, trees) -> "TrainedInspector":
        """Average a fitted :class:`~driple.inspector.trees.TreeMember` of the same targets and
        setting into every :meth:`predict` (geometric mean); None detaches."""
        if trees is not None:
            if tuple(trees.targets) != tuple(self.targets):
                raise DripleError(f"the tree member predicts {', '.join(trees.targets)}, the inspector "
                                  f"{', '.join(self.targets)}")
            if self.graph_inputs is not None and trees.inputs.setting != self.graph_inputs.setting:
                raise DripleError(f"the tree member was fitted for {trees.inputs.setting}, the inspector "
                                  f"predicts {self.graph_inputs.setting}")
        self.trees = trees
        return self

    def attach_roofline(self, roofline) -> "TrainedInspector":
        """Join a fitted :class:`~driple.inspector.roofline.RooflineMember` of the same targets
        into every :meth:`predict` (per duration target: its mode); None detaches."""
        if roofline is not None and tuple(roofline.targets) != tuple(self.targets):
            raise DripleError(f"the roofline predicts {', '.join(roofline.targets)}, the inspector "
                              f"{', '.join(self.targets)}")
        self.roofline = roofline
        return self

    @property
    def configuration_name(self) -> str:
        """:attr:`configuration`, with ``+trees`` / ``+roofline`` for the attached members."""
        return (self.configuration + ("+trees" if self.trees is not None else "")
                + ("+roofline" if self.roofline is not None else ""))

    @property
    def networks(self) -> int:
        """How many networks are averaged (:class:`~driple.inspector.model.NetworkEnsemble`)."""
        from driple.inspector.model import members_of

        return len(members_of(self.model))

    @property
    def residual(self) -> bool:
        """Whether the model predicts ``ln(target / prior)`` (see ``target_priors``)."""
        return self.target_priors is not None

    @property
    def host(self):
        """The host figures the inspector was trained with (:class:`~driple.hardware.host_speed.HostSpeed`),
        or None (an inspector without physical priors)."""
        return None if self.graph_inputs is None else self.graph_inputs.host

    @property
    def configuration(self) -> str:
        """``"gnn"`` (the paper's), ``"hybrid"`` or ``"features"`` (see :mod:`driple.inspector.model`)."""
        if not getattr(self.model, "reads_graph", True):
            return "features"
        return "hybrid" if self.graph_inputs is not None else "gnn"

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
        graphs = list(graphs)
        for g in graphs:
            self._check_graph(g)
        attrs = self.graph_level(graphs) if self.model.graph_channels else None
        priors = self.priors(graphs) if self.residual else None
        for i, g in enumerate(graphs):
            s = self.feature_scaler.transform(g)
            n = s.x.size(0)
            index, weight = gcn_edges(s.edge_index, s.edge_weight, n, s.x.dtype)
            item = Data(x=s.x, edge_index=s.edge_index, edge_weight=s.edge_weight,
                        gcn_index=index, gcn_weight=weight,
                        gcn_symmetric=is_symmetric(index, weight, n), num_nodes=n)
            if attrs is not None:
                item.graph_attr = attrs[i:i + 1]
            y = getattr(g, "y", None)
            if y is not None:
                item.y = torch.as_tensor(self.target_scaler.transform(
                    y.view(1, -1).double().numpy(), None if priors is None else priors[i:i + 1]),
                    dtype=torch.float32)
            out.append(item)
        return out

    def graph_level(self, graphs: Sequence) -> torch.Tensor:
        """The model's scaled graph-level inputs ``[n, graph_channels]``: the graph inputs'
        features and priors, or (checkpoints without them) the legacy ``graph_attr`` columns."""
        if self.graph_inputs is not None:
            return self.graph_inputs.transform(stack_graph_features(graphs))
        if any(getattr(g, "graph_attr", None) is None for g in graphs):
            raise DripleError("this inspector reads graph-level attributes (graph_attr); "
                              "build the graph with driple.graph.build")
        return self.feature_scaler.transform_graph_attr(torch.cat([g.graph_attr.view(1, -1) for g in graphs]))

    def priors(self, graphs: Sequence) -> np.ndarray:
        """Each target's physical prior ``[n, targets]`` in the targets' units for ``graphs``
        (NaN where a target has none), computed for this inspector's setting on the host figures
        it was trained with; the bases of a residual inspector."""
        if self.graph_inputs is None:
            raise DripleError("this inspector has no physical priors (no graph-level inputs)")
        names = self.target_priors if self.target_priors is not None else \
            [target(t).prior for t in self.targets]
        return self.graph_inputs.target_priors(stack_graph_features(graphs), names)

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

    def to_targets(self, scaled: np.ndarray, graphs: Optional[Sequence] = None) -> np.ndarray:
        """Raw targets from model outputs ``[n, targets]`` (of ``graphs``, needed by a residual
        inspector for its priors)."""
        if self.residual:
            if graphs is None:
                raise DripleError("a residual inspector needs the graphs to turn outputs into targets")
            return self.target_scaler.inverse_transform(scaled, self.priors(graphs))
        return self.target_scaler.inverse_transform(scaled)

    def predict(self, graphs, batch_size: int = 16) -> np.ndarray:
        """Predicted targets ``[n, targets]`` in raw units (order of :attr:`targets`) for one graph
        or a sequence of graphs as made by :func:`driple.graph.build.build_input`.

        With a tree member attached (:meth:`attach_trees`), the geometric mean of the network's
        and the trees' predictions. The network's part is ``predict_scaled(prepare(graphs))``,
        computed faster: each batch of ``batch_size`` graphs is scaled and normalised as one
        stacked tensor, no per-graph copies. The result does not depend on ``batch_size``, the number of graphs per
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
        reads_graph = getattr(self.model, "reads_graph", True)
        for i in range(0, len(graphs), step):
            chunk = graphs[i:i + step]
            for g in chunk:
                self._check_graph(g)
            attr = self.graph_level(chunk) if self.model.graph_channels else None
            with torch.inference_mode(), flush_denormals():
                if reads_graph:
                    weight = torch.cat([g.edge_weight if getattr(g, "edge_weight", None) is not None
                                        else torch.ones(g.edge_index.size(1)) for g in chunk])
                    batch = GraphBatch.from_edges(
                        fs.transform_x(torch.cat([fs.check_width(g.x) for g in chunk])),
                        [g.x.size(0) for g in chunk], [g.edge_index for g in chunk],
                        fs.transform_edge_weight(weight), attr)
                    outs.append(run_batch(self.model, batch))
                else:  # the features-only model reads nothing of the graph itself
                    outs.append(self.model.head(None, attr))
        if not outs:
            return np.zeros((0, self.model.out_channels))
        out = self.to_targets(torch.cat(outs).double().numpy(), graphs)
        if self.trees is not None:
            from driple.inspector.trees import geometric_mean

            out = geometric_mean(out, self.trees.predict(graphs))
        if self.roofline is not None:
            out = self.roofline.combine(out, graphs)
        return out

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
            "units": {t: self.units.get(t) for t in self.targets},
            "labels": self.labels,
            "graph_inputs": None if self.graph_inputs is None else self.graph_inputs.to_dict(),
            "target_priors": None if self.target_priors is None else list(self.target_priors),
            "trees": None if self.trees is None else self.trees.to_state(),
            "roofline": None if self.roofline is None else self.roofline.to_state(),
            **self.info,
        }

    @property
    def labels(self) -> str:
        """The label declaration the inspector was trained on (``"v1"``, ``"v2"``;
        :func:`driple.metrics.label_version` when it was made)."""
        return self._labels

    @property
    def units(self) -> dict:
        """``{target: unit}`` of its outputs when it was trained."""
        if self._units:
            return dict(self._units)
        declared = target_units()
        return {t: declared.get(t) for t in self.targets}

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
        check_targets(state.get("metrics"), source, state.get("labels") or "v1", state.get("units"))
        try:
            model = build_model(state["config"])
            model.load_state_dict(state["state_dict"])
            feature_scaler = FeatureScaler.from_dict(state["feature_scaler"])
            target_scaler = TargetScaler.from_dict(state["target_scaler"])
            graph_inputs = GraphInputs.from_dict(state["graph_inputs"]) if state.get("graph_inputs") else None
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise DripleError(f"{source} is damaged ({type(exc).__name__}: {exc}); "
                              "retrain with `driple train`") from None
        if getattr(model, "reads_graph", True) and len(feature_scaler.feature_names) != model.in_channels:
            raise DripleError(f"{source} is inconsistent: {len(feature_scaler.feature_names)} "
                              f"feature names for a model of {model.in_channels} inputs")
        model.eval()
        skip = {"format", "format_version", "driple_version", "config", "state_dict",
                "feature_scaler", "target_scaler", "metrics", "units", "labels", "graph_inputs",
                "target_priors", "trees", "roofline"}
        if model.out_channels != len(state["metrics"]):
            raise DripleError(f"{source} is inconsistent: {model.out_channels} outputs for "
                              f"{len(state['metrics'])} target names")
        out = cls(model, feature_scaler, target_scaler, {k: v for k, v in state.items() if k not in skip},
                  targets=state["metrics"], graph_inputs=graph_inputs,
                  target_priors=state.get("target_priors"))
        out._labels, out._units = state.get("labels") or "v1", state.get("units")
        if state.get("trees"):
            from driple.inspector.trees import TreeMember

            try:
                trees = TreeMember.from_state(state["trees"])
            except (KeyError, TypeError, ValueError) as exc:
                raise DripleError(f"{source}: its tree member is damaged ({type(exc).__name__}: {exc})") from None
            out.attach_trees(trees)
        if state.get("roofline"):
            from driple.inspector.roofline import RooflineMember

            try:
                roofline = RooflineMember.from_state(state["roofline"])
            except (KeyError, TypeError, ValueError, DripleError) as exc:
                raise DripleError(f"{source}: its roofline is damaged ({type(exc).__name__}: {exc})") from None
            out.attach_roofline(roofline)
        return out


#: The label declarations in words, for the error that refuses a checkpoint of the other one.
LABEL_WORDS = {"v1": "12 targets, memory burst amount in % of host memory, no step time",
               "v2": "13 targets, memory burst amount in MB (peak allocated), step_time in s"}


def check_targets(names, source: str = "the checkpoint", labels: str = "v1",
                  units: Optional[dict] = None) -> None:
    """Refuse a checkpoint whose label version (:func:`driple.metrics.label_version`), target
    names (in output order) or units are not the declared ones."""
    declared = list(target_names())
    names = list(names) if isinstance(names, (list, tuple)) else names
    if labels != label_version():
        raise DripleError(
            f"{source} was trained on labels {labels} ({LABEL_WORDS.get(labels, '?')}) but driple "
            f"declares labels {label_version()} ({LABEL_WORDS.get(label_version(), '?')}); retrain "
            f"it on a labels-{label_version()} dataset with `driple train`")
    if names == declared:
        wrong = {t: (u, unit) for t, unit in target_units().items()
                 if isinstance(units, dict) and (u := units.get(t)) not in (None, unit)}
        if wrong:
            raise DripleError(f"{source} predicts " + ", ".join(
                f"{t} in {u}" for t, (u, _) in wrong.items()) + " but driple declares " + ", ".join(
                f"{t} in {d}" for t, (_, d) in wrong.items()) + "; retrain with `driple train`")
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

