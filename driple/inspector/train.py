"""Training an inspector: MSE on scaled targets, Adam, early stopping on the validation loss.

:func:`train_inspector` is the one call: training and validation jobs in (and the
configuration, :class:`InspectorConfig`: the paper's GNN, the hybrid, or features only), a
:class:`TrainedInspector` (model, scalers, graph-level inputs with the host figures, record of
the run, scores) out. :func:`select_inspector` chooses among configurations on validation
jobs only; :class:`~driple.inspector.estimators.GNNEstimator` (``config=``) wraps training
for the evaluation harness. :func:`fit` is the bare loop, reused by fine-tuning.

    from driple.inspector.train import preset, train_inspector
    config, options = preset("hybrid", epochs=150)
    inspector = train_inspector(dataset[split.train], dataset[split.val], options, config)
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, replace
from typing import Mapping, Optional, Sequence

import numpy as np
import torch

from driple.errors import DripleError
from driple.graph.summary_features import BASE_FEATURES
from driple.inspector.checkpoint import TrainedInspector
from driple.inspector.graph_inputs import DEFAULT_PRIORS, stack_targets
from driple.inspector.model import (FeatureMLP, GraphBatch, Inspector, NetworkEnsemble, flush_denormals,
                                    release_workspaces, run_batch)
from driple.inspector.scaling import FeatureScaler, TargetScaler
from driple.inspector.scores import score_table
from driple.inspector.splits import Split
from driple.metrics import target, target_names


@dataclass
class TrainOptions:
    """Optimisation settings (the paper's: Adam, lr 3e-3, weight decay 1e-6).

    ``epochs`` is the upper bound; training stops after ``patience`` epochs without a better
    validation loss and keeps the best weights. ``target_scaling``: see :class:`TargetScaler`.
    ``ema``: decay of an exponential moving average of the weights, updated after every
    optimizer step; the average is what is validated and kept (0: off, the weights themselves).
    A few hundred jobs give a validation loss that jumps from epoch to epoch, and early stopping
    on one lucky epoch is a draw; the average moves slowly, so the epoch it keeps says more.
    """

    lr: float = 3e-3
    weight_decay: float = 1e-6
    epochs: int = 300
    patience: int = 30
    batch_size: int = 32
    target_scaling: str = "max"
    seed: int = 0
    ema: float = 0.0

    def __post_init__(self):
        if not 0.0 <= self.ema < 1.0:
            raise DripleError(f"ema must be in [0, 1) (a decay per optimizer step; 0 is off), not {self.ema}")

    def to_dict(self) -> dict:
        return asdict(self)


def masked_mse(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over the target entries that are not NaN."""
    mask = torch.isfinite(target)
    diff = torch.where(mask, pred - torch.nan_to_num(target), torch.zeros_like(pred))
    return diff.pow(2).sum() / mask.sum().clamp_min(1)


def _loss_on(model: torch.nn.Module, batches) -> float:
    """Masked MSE per finite target over ``batches`` (:class:`GraphBatch` or PyG batches)."""
    model.eval()
    total, count = 0.0, 0
    with torch.inference_mode():
        for batch in batches:
            pred = run_batch(model, batch)
            n = int(torch.isfinite(batch.y).sum())
            total += float(masked_mse(pred, batch.y)) * n
            count += n
    return total / max(count, 1)


def _batches(graphs: Sequence, batch_size: int, order=None) -> list:
    """Batches (:class:`GraphBatch`) of ``batch_size`` graphs, in ``order`` if given."""
    order = range(len(graphs)) if order is None else order
    return [GraphBatch.from_graphs([graphs[i] for i in order[j:j + batch_size]])
            for j in range(0, len(order), batch_size)]


def fit(model: torch.nn.Module, train: Sequence, val: Sequence,
        options: TrainOptions = TrainOptions(), progress: bool = True, desc: str = "training") -> dict:
    """Train ``model`` in place on prepared (scaled) graphs; returns the history.

    Only parameters with ``requires_grad`` are optimised (fine-tuning freezes the rest). The
    weights (or their average, ``options.ema``) of the epoch with the lowest validation loss are
    restored at the end. History: ``train_loss``, ``val_loss`` (per epoch), ``best_epoch``,
    ``best_val_loss``, ``seconds``.

    An :class:`Inspector` gets its batches as :class:`GraphBatch` (no PyG collation; the
    validation batches are stacked once); other modules (the cached tails of fine-tuning) get
    PyG mini-batches; either way the shuffling is seeded by ``options.seed``. Denormal floats
    are flushed to zero during the epochs (:func:`flush_denormals`).
    """
    from tqdm.auto import tqdm

    if not train:
        raise DripleError("no training jobs: the split left the training set empty")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise DripleError("nothing to train: every parameter of the model is frozen")
    torch.manual_seed(options.seed)
    generator = torch.Generator().manual_seed(options.seed)
    train, val = list(train), list(val or train)
    val_size = max(options.batch_size, 64)
    if isinstance(model, (Inspector, FeatureMLP)):
        def epoch_batches():
            return _batches(train, options.batch_size,
                            torch.randperm(len(train), generator=generator).tolist())
        val_batches = _batches(val, val_size)
    else:
        from torch_geometric.loader import DataLoader

        train_loader = DataLoader(train, batch_size=options.batch_size, shuffle=True,
                                  generator=generator)
        val_batches = DataLoader(val, batch_size=val_size)

        def epoch_batches():
            return train_loader
    optimizer = torch.optim.Adam(params, lr=options.lr, weight_decay=options.weight_decay)
    averaged = None
    if options.ema:
        from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

        averaged = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(options.ema), use_buffers=True)
    kept = model if averaged is None else averaged.module  # the weights validated and kept

    history = {"train_loss": [], "val_loss": [], "best_epoch": 0, "best_val_loss": float("inf")}
    best_state = copy.deepcopy(kept.state_dict())
    start = time.perf_counter()
    bar = tqdm(range(options.epochs), desc=desc, unit="epoch", disable=not progress, leave=False)
    for epoch in bar:
        model.train()
        total, count = 0.0, 0
        with flush_denormals():
            for batch in epoch_batches():
                optimizer.zero_grad()
                pred = run_batch(model, batch)
                loss = masked_mse(pred, batch.y)
                loss.backward()
                optimizer.step()
                if averaged is not None:
                    averaged.update_parameters(model)
                total += loss.item() * batch.num_graphs
                count += batch.num_graphs
            val_loss = _loss_on(kept, val_batches)
        history["train_loss"].append(total / max(count, 1))
        history["val_loss"].append(val_loss)
        if val_loss < history["best_val_loss"]:
            history["best_val_loss"], history["best_epoch"] = val_loss, epoch
            best_state = copy.deepcopy(kept.state_dict())
        bar.set_postfix(train=f"{total / max(count, 1):.4f}", val=f"{val_loss:.4f}",
                        best=history["best_epoch"], refresh=False)
        if epoch - history["best_epoch"] >= options.patience:
            break
    model.load_state_dict(best_state)
    model.eval()
    release_workspaces()
    history["epochs"] = len(history["train_loss"])
    history["seconds"] = time.perf_counter() - start
    return history


def feature_names_for(feature_set: Optional[str], num_features: int) -> list[str]:
    """Column names of ``x`` for a feature set (generic ``f0, f1, ...`` if unknown)."""
    try:
        from driple.graph.features import FEATURE_SETS

        names = FEATURE_SETS.get(feature_set or "")
    except ImportError:  # pragma: no cover - the graph builder is part of driple
        names = None
    if names is None or len(names) != num_features:
        return [f"f{i}" for i in range(num_features)]
    return list(names)


def _dataset_info(dataset) -> dict:
    return {
        "feature_set": dataset.feature_set,
        "vocab_digest": dataset.vocab_digest,
        "builder": dict(getattr(dataset, "options", {})),
        "setting": getattr(dataset, "setting", None),
        "dataset": str(getattr(dataset, "root", "")),
    }


# ---------------------------------------------------------------------- configurations
CONFIGURATIONS = ("gnn", "hybrid", "features")


@dataclass
class InspectorConfig:
    """Which inspector to train (recorded in its checkpoint as ``info["configuration"]``).

    Args:
        kind: ``"gnn"``: the paper's (graph alone; with ``graph_attr`` the legacy graph
            attributes of the shipped v1 inspectors in its head); ``"hybrid"``: the Set2Set
            embedding joined with the scaled graph-level ``features`` and ``priors`` before the
            MLP; ``"features"``: an MLP on the graph-level inputs alone (no graph network).
        hidden_channels, num_repeats, set2set_steps, dropout: Sizes of the network (see
            :class:`Inspector`; the features-only MLP uses ``hidden_channels`` and ``dropout``).
        features: Graph-level features fed to the head (names of
            :data:`driple.graph.summary_features.GRAPH_FEATURES`).
        priors: Physical priors fed to the head (names of :data:`driple.graph.summary_features.PRIORS`).
        residual: Predict every target that declares a prior (:mod:`driple.metrics`) as that
            prior times ``exp(output)`` (log space; needs ``target_scaling="ln"``).
        graph_attr: ``"gnn"`` only: feed the 6 legacy graph attributes to the head.
        networks: How many networks to train, each alone (seeds ``seed``, ``seed + 1``, ...; the
            same jobs and scalers), their scaled outputs averaged
            (:class:`~driple.inspector.model.NetworkEnsemble`); 1: one network.
    """

    kind: str = "hybrid"
    hidden_channels: int = 64
    num_repeats: int = 10
    set2set_steps: int = 3
    dropout: float = 0.0
    features: tuple = BASE_FEATURES
    priors: tuple = DEFAULT_PRIORS
    residual: bool = True
    graph_attr: bool = False
    networks: int = 1

    def __post_init__(self):
        if self.kind not in CONFIGURATIONS:
            raise DripleError(f"unknown inspector configuration {self.kind!r}; use one of "
                              f"{', '.join(CONFIGURATIONS)}")
        self.features, self.priors = tuple(self.features), tuple(self.priors)
        if self.kind == "features" and not (self.features or self.priors):
            raise DripleError("a features-only inspector needs graph-level features or priors")
        if self.graph_attr and self.kind != "gnn":
            raise DripleError("graph_attr (the legacy graph attributes) applies to kind 'gnn' only")
        if not isinstance(self.networks, int) or self.networks < 1:
            raise DripleError(f"networks must be a whole number >= 1, not {self.networks!r}")

    @property
    def graph_inputs(self) -> tuple:
        """The graph-level inputs the head reads (none for the paper's GNN)."""
        return () if self.kind == "gnn" else (*self.features, *self.priors)

    def to_dict(self) -> dict:
        return {**asdict(self), "features": list(self.features), "priors": list(self.priors)}

    @classmethod
    def from_dict(cls, record: dict) -> "InspectorConfig":
        return cls(**{k: v for k, v in record.items() if k in cls.__dataclass_fields__})


#: The hybrid's ``TrainOptions.ema``, chosen on jobs no training decision saw (the
#: source's calibration jobs, 3 seeds each of 0, 0.98, 0.99, 0.995; ``scripts/choose_ema.py``):
#: 0.995 had the lowest median per-target MAPE (11.0 % vs 12.4 % without) and NRMSE (0.192 vs
#: 0.203), mean MAPE equal (13.7 vs 13.6 %).
HYBRID_EMA = 0.995

#: How many networks the hybrid averages (``InspectorConfig.networks``), chosen on the same
#: calibration jobs (``scripts/choose_networks.py``: 6 seeds, every run of k
#: consecutive seeds): median per-target MAPE 10.9 % for one network (10.3-12.1 % by seed),
#: 10.5 % for two (9.8-11.0 %), 10.3 % for three (9.9-10.6 %); mean MAPE and NRMSE about equal.
#: Two, not three: three networks predict 412 graphs/s batched on one core, under the 500 that
#: ``scripts/bench_predict.py`` holds to (two: 597; one: 1140; same run).
HYBRID_NETWORKS = 2


def preset(name: str, **overrides) -> tuple:
    """``(InspectorConfig, TrainOptions)`` of a named configuration of the ablation:

    - ``"gnn"``: the paper's inspector, targets divided by their training maximum;
    - ``"gnn-ln"``: the same network, log targets (isolates what the scaling does);
    - ``"hybrid"``: graph + graph-level features and priors, residuals over the priors, log targets,
      the weights' moving average kept (:data:`HYBRID_EMA`), :data:`HYBRID_NETWORKS` networks averaged;
    - ``"hybrid-plain"``: the hybrid without residuals (log targets);
    - ``"features"``: graph-level features and priors alone, residuals, log targets.

    ``overrides`` set fields of either (``num_repeats=5``, ``epochs=80``).
    """
    table = {
        "gnn": (dict(kind="gnn", residual=False), dict(target_scaling="max")),
        "gnn-ln": (dict(kind="gnn", residual=False), dict(target_scaling="ln")),
        "hybrid": (dict(kind="hybrid", residual=True, networks=HYBRID_NETWORKS),
                   dict(target_scaling="ln", ema=HYBRID_EMA)),
        "hybrid-plain": (dict(kind="hybrid", residual=False), dict(target_scaling="ln")),
        "features": (dict(kind="features", residual=True), dict(target_scaling="ln")),
    }
    if name not in table:
        raise DripleError(f"unknown preset {name!r}; use one of {', '.join(table)}")
    config, options = (dict(d) for d in table[name])
    for key, value in overrides.items():
        if key in InspectorConfig.__dataclass_fields__:
            config[key] = value
        elif key in TrainOptions.__dataclass_fields__:
            options[key] = value
        else:
            raise DripleError(f"{key!r} is neither an InspectorConfig nor a TrainOptions field")
    return InspectorConfig(**config), TrainOptions(**options)


# ---------------------------------------------------------------------- training
def common_attribute(graphs: Sequence, name: str) -> Optional[str]:
    """The one value of attribute ``name`` the jobs share (None if none has it): training
    jobs from different settings or builders are refused."""
    values = {str(v) for v in (getattr(g, name, None) for g in graphs) if v not in (None, "")}
    if len(values) > 1:
        raise DripleError(f"the training jobs disagree on {name}: {sorted(values)}")
    return next(iter(values), None)


def _builder_of(graphs: Sequence) -> dict:
    """Builder options of the graphs: the dataset's, else read from their grouping key."""
    options = getattr(graphs, "options", None)
    if options:
        return dict(options)
    key = common_attribute(graphs, "grouping_key")
    if key:
        import re

        m = re.fullmatch(r"(\w+)-M(\d+)-seed(\d+)", key)
        if m:
            return {"groups": int(m.group(2)), "grouping": m.group(1), "seed": int(m.group(3)),
                    "features": common_attribute(graphs, "feature_set") or "driple"}
    return {}


def recorded_host(graphs):
    """The host figures recorded with a dataset (``provenance.json`` entry ``host_speed``,
    measured on the host that measured its jobs), or None."""
    from driple.hardware.rows import recorded_provenance

    root = getattr(graphs, "root", None)
    return recorded_provenance(root)[0] if root else None


def training_host(graphs: Sequence, host=None):
    """The host figures to record with an inspector trained on ``graphs``
    (:class:`~driple.hardware.host_speed.HostSpeed`): ``host`` when given; else the dataset's
    ``provenance.json`` entry ``host_speed``; else ``$DRIPLE_HOST_SPEED``; else measured now on
    this host, which must be the CPU model the jobs were measured on (rows' ``cpu_model``)."""
    from driple.hardware.host_speed import HostSpeed, cpu_model, environment_host_speed, measure_host_speed

    if host is not None:
        return host if isinstance(host, HostSpeed) else HostSpeed.from_dict(host)
    recorded = recorded_host(graphs)
    if recorded is not None:
        return recorded
    given = environment_host_speed()
    if given is not None:
        return given
    from driple.setting_datasets import cpu_models

    measured_on = cpu_models(getattr(graphs, "frame", None))
    here = cpu_model()
    if measured_on and any(m != here for m in measured_on):
        raise DripleError(
            f"the jobs were measured on {', '.join(measured_on)} but this host is {here or 'unknown'}: "
            "the priors need the figures of the measuring host; add its `python "
            "scripts/bench_host_speed.py --json` figures as host_speed to the dataset's "
            "provenance.json, or pass host=HostSpeed(...) ($DRIPLE_HOST_SPEED=flops,bytes)")
    return measure_host_speed()


def _as_list(graphs) -> list:
    return [] if graphs is None else [g for g in graphs]


def train_inspector(
    train,
    val=None,
    options: Optional[TrainOptions] = None,
    config: Optional[InspectorConfig] = None,
    *,
    test=None,
    setting: Optional[str] = None,
    host=None,
    progress: bool = True,
    hidden_channels: Optional[int] = None,
    num_repeats: Optional[int] = None,
    set2set_steps: Optional[int] = None,
    dropout: Optional[float] = None,
    graph_attr: Optional[bool] = None,
) -> TrainedInspector:
    """Train an inspector on ``train`` jobs, early stopping on ``val``; the one training call.

    Args:
        train, val: The training and validation jobs: subsets of an
            :class:`~driple.inspector.dataset.InspectorDataset` (``dataset[split.train]``; they
            carry the dataset's setting, builder options and root) or sequences of its graphs
            (each with ``y``, ``graph_features``, ``setting``). ``val`` None: ``train``.
        options: Optimisation (:class:`TrainOptions`; default: the class defaults).
        config: Which inspector (:class:`InspectorConfig`, or :func:`preset`); default: the
            hybrid with residuals over the priors.
        test: Jobs to score the result on (``info["scores"]["test"]``); never used to choose.
        setting: The setting id (default: the jobs'). host: its host figures (default: see
            :func:`training_host`); recorded in the checkpoint, used by every prediction.
        progress: Show a progress bar.
        hidden_channels, num_repeats, set2set_steps, dropout, graph_attr: Override the fields
            of ``config`` (the keywords of the older form below).

    The older form ``train_inspector(dataset, split, hidden_channels=64, num_repeats=50, ...,
    graph_attr=False, options=...)`` still works: the paper's GNN (``graph_attr``: with the
    legacy graph attributes) on ``split.train``/``split.val``, scored on ``split.test``.

    Returns the :class:`TrainedInspector`; its ``info`` records the feature set, op
    vocabulary, builder options, setting, dataset, split (job ids), ``configuration``,
    ``training`` options, ``history`` and ``scores`` (``{"val": table, "test": table}``).
    """
    split = dataset = None
    if isinstance(val, Split):
        dataset, split = train, val
        train, val = dataset[list(split.train)], dataset[list(split.val)] if split.val else None
        test = dataset[list(split.test)] if split.test else None
        config = config or InspectorConfig(kind="gnn", residual=False, num_repeats=50)
    options = options or TrainOptions()
    config = config or InspectorConfig()
    legacy = {k: v for k, v in (("hidden_channels", hidden_channels), ("num_repeats", num_repeats),
                                ("set2set_steps", set2set_steps), ("dropout", dropout),
                                ("graph_attr", graph_attr)) if v is not None}
    if legacy:
        config = replace(config, **legacy)
    train_list, val_list, test_list = _as_list(train), _as_list(val), _as_list(test)
    if not train_list:
        raise DripleError("no training jobs: the split left the training set empty")
    if config.residual and options.target_scaling != "ln":
        raise DripleError("residuals over the priors are taken in log space: use "
                          f"target_scaling='ln' (not {options.target_scaling!r}) or residual=False")
    names = tuple(getattr(train, "target_names", None) or target_names())
    if train_list[0].y.numel() != len(names):
        raise DripleError(f"the jobs carry {train_list[0].y.numel()} targets, driple declares "
                          f"{len(names)} ({', '.join(names)})")
    setting = setting or common_attribute(train_list, "setting") or getattr(train, "setting", None)
    info = {"feature_set": common_attribute(train_list, "feature_set"),
            "vocab_digest": common_attribute(train_list, "vocab_digest"),
            "builder": _builder_of(train), "setting": setting,
            "dataset": str(getattr(train, "root", "") or ""), "configuration": config.to_dict()}

    features = feature_names_for(info["feature_set"], train_list[0].x.size(1))
    feature_scaler = FeatureScaler(features).fit(train_list)
    graph_inputs = target_priors = None
    if config.kind != "gnn" or config.residual:
        if not setting or "," in str(setting):
            raise DripleError("graph-level priors need the one setting the jobs ran in (setting=...)")
        from driple.inspector.graph_inputs import GraphInputs, stack_graph_features

        chosen = (config.features, config.priors) if config.kind != "gnn" else ((), ())
        graph_inputs = GraphInputs(*chosen, setting, training_host(train, host)).fit(
            stack_graph_features(train_list))
    y = stack_targets(train_list)
    prior = None
    if config.residual:
        target_priors = [target(t).prior for t in names]
        from driple.inspector.graph_inputs import stack_graph_features

        prior = graph_inputs.target_priors(stack_graph_features(train_list), target_priors)
    target_scaler = TargetScaler(options.target_scaling).fit(y, prior)

    def network(seed):
        torch.manual_seed(seed)
        if config.kind == "features":
            return FeatureMLP(len(graph_inputs), hidden_channels=config.hidden_channels,
                              out_channels=len(names), dropout=config.dropout)
        channels = len(graph_inputs) if config.kind == "hybrid" else (
            train_list[0].graph_attr.numel() if config.graph_attr else 0)
        return Inspector(len(features), hidden_channels=config.hidden_channels,
                         num_repeats=config.num_repeats, out_channels=len(names),
                         set2set_steps=config.set2set_steps, dropout=config.dropout,
                         graph_channels=channels)

    networks = [network(options.seed)]
    predictor = TrainedInspector(networks[0], feature_scaler, target_scaler, info, targets=names,
                                 graph_inputs=graph_inputs if config.kind != "gnn" or config.residual else None,
                                 target_priors=target_priors)
    train_data, val_data = predictor.prepare(train_list), predictor.prepare(val_list or train_list)
    histories = [fit(networks[0], train_data, val_data, options, progress)]
    for i in range(1, config.networks):  # each alone: its own seed, the same jobs and scalers
        seed = options.seed + i
        networks.append(network(seed))
        histories.append(fit(networks[-1], train_data, val_data, replace(options, seed=seed), progress,
                             desc=f"training network {i + 1} of {config.networks}"))
    if len(networks) > 1:
        predictor.model = NetworkEnsemble(networks)
    history = joined_history(histories)
    scores = {part: score_jobs(predictor, jobs) for part, jobs in (("val", val_list), ("test", test_list))
              if jobs}
    predictor.info.update(
        split=split.to_dict(dataset) if split is not None else _split_record(train_list, val_list, test_list),
        training={**options.to_dict(), "scheme": "scratch"},
        history=history,
        scores=scores,
    )
    return predictor


def joined_history(histories: Sequence[dict]) -> dict:
    """One network's :func:`fit` history as it is; several networks' (an ensemble trained or
    fine-tuned member by member): the first's, with the seconds of all and each under
    ``networks``."""
    if len(histories) == 1:
        return histories[0]
    return {**histories[0], "seconds": sum(h["seconds"] for h in histories), "networks": list(histories)}


def _split_record(train, val, test) -> dict:
    def ids(jobs):
        return [str(getattr(g, "job_id", "")) for g in jobs]

    return {"kind": "given", "train": ids(train), "val": ids(val), "test": ids(test)}


def score_jobs(predictor, graphs: Sequence) -> dict:
    """:func:`score_table` of ``predictor`` (anything with ``predict(graphs)``) on ``graphs``."""
    graphs = list(graphs)
    measured = stack_targets(graphs)
    return score_table(measured, predictor.predict(graphs), names=list(getattr(predictor, "targets", None)
                                                                      or target_names()))


def select_inspector(train, val, candidates: Mapping[str, tuple], *, test=None, host=None,
                     setting: Optional[str] = None, by: str = "mape", progress: bool = False
                     ) -> TrainedInspector:
    """Train every candidate ``{name: (InspectorConfig, TrainOptions)}`` (e.g. from
    :func:`preset`) on ``train`` and keep the one with the lowest mean validation ``by``
    (``"mape"`` or ``"nrmse"`` over the targets). Choices are made on ``val`` only; ``test``
    (optional) is scored for the record, never compared. The winner's ``info["selection"]``
    holds every candidate's validation score."""
    if by not in ("mape", "nrmse"):
        raise DripleError(f"select by 'mape' or 'nrmse', not {by!r}")
    if not candidates:
        raise DripleError("no candidate configuration to select from")
    if not _as_list(val):
        raise DripleError("choosing among configurations needs validation jobs")
    trained, record = {}, {}
    for name, (config, options) in candidates.items():
        model = train_inspector(train, val, options, config, test=test, host=host, setting=setting,
                                progress=progress)
        trained[name] = model
        record[name] = model.info["scores"]["val"]["mean"][by]
    best = min(record, key=lambda k: float("inf") if record[k] is None else record[k])
    winner = trained[best]
    winner.info["selection"] = {"by": f"validation mean {by}", "chosen": best, "candidates": record}
    return winner


def recorded_options(trained, overrides: Optional[dict] = None):
    """The :class:`~driple.inspector.train.TrainOptions` recorded in a checkpoint, ``overrides``
    (e.g. ``{"epochs": 5}``) applied."""
    known = {k: v for k, v in (trained.info.get("training") or {}).items()
             if k in TrainOptions.__dataclass_fields__}
    unknown = sorted(set(overrides or {}) - set(TrainOptions.__dataclass_fields__))
    if unknown:
        raise DripleError(f"unknown training option(s) {', '.join(unknown)}")
    return TrainOptions(**{**known, **(overrides or {})})


def retrain_config(predictor: TrainedInspector) -> tuple:
    """``(InspectorConfig, TrainOptions)`` that train a fresh inspector like ``predictor`` (a
    leave-family-out fold of a checkpoint): its recorded configuration and options; a checkpoint
    from before configurations were recorded is the paper's GNN of its recorded sizes."""
    record = predictor.info.get("configuration")
    if record:
        config = InspectorConfig.from_dict(record)
    else:
        m = predictor.model.config()
        config = InspectorConfig(kind="gnn", residual=False, hidden_channels=m["hidden_channels"],
                                 num_repeats=m["num_repeats"], set2set_steps=m["set2set_steps"],
                                 dropout=m["dropout"], graph_attr=bool(m.get("graph_channels")))
    known = {k: v for k, v in predictor.info.get("training", {}).items()
             if k in TrainOptions.__dataclass_fields__}
    return config, TrainOptions(**known)


def score_split(predictor: TrainedInspector, dataset, split: Split) -> dict:
    """Score tables of ``predictor`` on the validation and test jobs of ``split``."""
    return {part: score_jobs(predictor, [dataset[i] for i in getattr(split, part)])
            for part in ("val", "test") if getattr(split, part)}
