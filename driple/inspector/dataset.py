"""Measured jobs of a dataset directory as grouped graphs with their targets (:mod:`driple.metrics`).

A dataset directory is what the collector writes (``datasets/<setting>/``): ``results.csv``
(one row per job) plus ``provenance.json`` and ``raw/``. Each ``status == "ok"`` row becomes
one :class:`torch_geometric.data.Data`: the grouped graph of the job's training step (built by
:func:`driple.graph.build.build_zoo_input` from the row's model, knobs, batch size, optimizer
and setting) with ``y`` ``[1, targets]`` the measured targets in raw units, in the declared
order (NaN where the collector could not measure one).

Building a graph traces a training step (about a second), so every graph is cached in a
graph cache shared by the datasets next to each other (``datasets/.graph-cache/``), keyed by
the job's configuration, the part of the setting that shapes the graph (strategy, workers,
servers: a DDP job's graph is the same on loopback and on a 1 Gbit/s link), the builder
options (groups, grouping policy, seed, feature set), the op vocabulary and
:data:`driple.graph.BUILDER_VERSION`. Missing graphs can be built by several processes at once
(``workers``). The collated dataset is cached under
``<dir>/processed/``, keyed by the rows it holds.

Rows measured while other processes loaded the host (``host_other_cpu_pct`` above
``max_contention``, 10 % by default) are left out: their labels are not the job's alone.
"""
from __future__ import annotations

import hashlib
import json
import os
import os.path as osp
import warnings
from typing import Callable, Optional

import numpy as np
import torch
from torch_geometric.data import Data, InMemoryDataset

from driple.hardware.host_check import QUIET_HOST_PCT
from driple.csvtable import read_csv
from driple.errors import DripleError
from driple.graph.grouping import DEFAULT_GROUPS, DEFAULT_POLICY, DEFAULT_SEED
from driple import metrics
from driple.metrics import target_names

CACHE_VERSION = 3  # bump when the cached graph layout changes (2: graph_features; 3: op-class features)
CONFIG_COLUMNS = ("model", "knobs", "batch_size", "optimizer", "setting")
GRAPH_KEYS = ("x", "edge_index", "edge_weight", "graph_attr", "graph_features")


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _parse_knobs(text) -> dict:
    if isinstance(text, dict):
        return text
    if text is None or (isinstance(text, float) and np.isnan(text)) or str(text).strip() == "":
        return {}
    try:
        knobs = json.loads(text)
    except ValueError:
        raise DripleError(f"cannot read knobs {text!r}: the 'knobs' column must hold JSON") from None
    if not isinstance(knobs, dict):
        raise DripleError(f"knobs {text!r} must be a JSON object")
    return knobs


def job_config(row: dict) -> dict:
    """The part of a results row that decides the graph: model, knobs, batch size, optimizer,
    setting (plain types, knobs parsed from JSON)."""
    return {
        "model": str(row["model"]),
        "knobs": _parse_knobs(row.get("knobs")),
        "batch_size": int(row["batch_size"]),
        "optimizer": str(row["optimizer"]),
        "setting": str(row["setting"]),
    }


def zoo_graph(config: dict, groups: int = DEFAULT_GROUPS, grouping: str = DEFAULT_POLICY,
              features: str = "driple", seed: int = DEFAULT_SEED) -> Data:
    """The default graph builder: :func:`driple.graph.build.build_zoo_input` for a job config."""
    from driple.graph.build import build_zoo_input

    return build_zoo_input(config["model"], batch_size=config["batch_size"],
                           optimizer=config["optimizer"], strategy=config["setting"],
                           groups=groups, grouping=grouping, features=features, seed=seed,
                           **config["knobs"])


def _zoo_builder_id() -> str:
    """Op-vocabulary digest plus the builder's version (:data:`driple.graph.BUILDER_VERSION`)."""
    from driple.graph import BUILDER_VERSION
    from driple.graph.features import default_vocabulary

    return f"zoo-vocab-{default_vocabulary().digest}-builder-v{BUILDER_VERSION}"


def _build_one(args) -> tuple[str, Optional[str]]:
    """Worker of a parallel build: build one graph into the cache; ``(key, error or None)``."""
    dataset_state, key, config = args
    torch.set_num_threads(1)
    builder, options, path = dataset_state
    try:
        if not osp.exists(path):
            _store(builder(config, **options), path, options)
        return key, None
    except Exception as exc:  # reported by the parent, like a serial build
        return key, f"{config['model']}: {type(exc).__name__}: {exc}"


def _store(data, path: str, options: dict) -> dict:
    family = (getattr(data, "summary", None) or {}).get("family")
    stored = {k: getattr(data, k) for k in GRAPH_KEYS if getattr(data, k, None) is not None}
    stored.update(feature_set=str(getattr(data, "feature_set", options["features"])),
                  vocab_digest=str(getattr(data, "vocab_digest", "")),
                  grouping_key=str(getattr(data, "grouping_key", "")),
                  family=str(family) if family else "")
    os.makedirs(osp.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(stored, tmp)
    os.replace(tmp, path)  # several runs may share a cache
    return stored


DEFAULT_MAX_CONTENTION = QUIET_HOST_PCT  # % of host CPU used by other processes during a measurement


def graph_setting(setting_id: str) -> str:
    """The part of a setting id that shapes the graph (its strategy's ``graph_key``):
    ``cpu-ddp-w2-1g`` -> ``ddp-w2``."""
    from driple.settings import parse_setting
    from driple.strategies import get_strategy

    s = parse_setting(setting_id)
    return get_strategy(s.strategy).graph_setting(s)


def read_results(path: str, max_contention: Optional[float] = DEFAULT_MAX_CONTENTION
                 ) -> "pandas.DataFrame":  # noqa: F821
    """The jobs of a ``results.csv`` whose last row is ``status == "ok"`` (and, with
    ``max_contention``, whose ``host_other_cpu_pct`` is at most that), checked for the
    columns the inspector needs; ``job_id`` as str.

    A job run more than once (interrupted, retried) has several rows; as in
    :meth:`driple.collect.results.ResultTable.read`, its last row counts.
    """
    if not osp.exists(path):
        raise DripleError(f"{path} not found: a dataset directory holds the collector's "
                          "results.csv (run `driple collect sweep ...` first)")
    frame = read_csv(path, dtype={"job_id": str, "knobs": str})
    if frame.empty:
        raise DripleError(f"{path} holds no job rows, only a header: measure jobs into it with "
                          "`driple collect sweep ...` first")
    # a table that is not a collector's says which columns it lacks; one of the other label
    # version (it lacks only that version's targets) says so
    _require_columns(frame, path, ("job_id", "status", *CONFIG_COLUMNS, *metrics.METRICS))
    check_label_version(frame, path)
    _require_columns(frame, path, target_names())
    frame = frame.drop_duplicates("job_id", keep="last")
    frame = frame[frame["status"].astype(str) == "ok"]
    if max_contention is not None and "host_other_cpu_pct" in frame:
        busy = frame["host_other_cpu_pct"].astype(float)
        frame = frame[~(busy > max_contention)]  # NaN (not recorded) is kept
    return frame.reset_index(drop=True)


def _require_columns(frame, path: str, columns) -> None:
    missing = [c for c in columns if c not in frame]
    if missing:
        raise DripleError(f"{path} lacks the column(s) {', '.join(missing)}; is it a collector "
                          "results.csv?")


def dataset_label_version(frame) -> str:
    """``"v2"`` when the table's ``labels`` column names the timeline labeller
    (``timeline-v2``), else ``"v1"`` (the shipped k-means datasets have no such column)."""
    if "labels" not in frame:
        return "v1"
    values = {str(v) for v in frame["labels"].dropna().unique()}
    return "v2" if values and all(v.startswith("timeline-v2") for v in values) else "v1"


def check_label_version(frame, path: str) -> None:
    """Refuse a table whose labels are not those driple declares (:func:`driple.metrics.label_version`):
    a v1 table's memory amount is % of host memory and it has no step time; a v2 table's memory
    amount is MB."""
    from driple.metrics import label_version

    have, declared = dataset_label_version(frame), label_version()
    if have != declared:
        raise DripleError(
            f"{path} holds labels {have} but driple declares labels {declared} (driple.metrics."
            f"DECLARED_LABELS): {LABEL_WORDS[have]}; use a dataset measured with labels "
            f"{declared}, or `driple.metrics.use_labels({have!r})` to read it as it is")


LABEL_WORDS = {"v1": "memory amounts in % of host memory, no step time",
               "v2": "memory amounts in MB, with step_time"}


class InspectorDataset(InMemoryDataset):
    r"""The measured jobs of one dataset directory as graphs with targets.

    Every item has ``x``, ``edge_index``, ``edge_weight``, ``graph_attr`` ``[1, 6]`` (see
    :data:`driple.graph.build.GRAPH_ATTRS`), ``graph_features`` ``[1, F]`` (see
    :data:`driple.graph.summary_features.GRAPH_FEATURES`), ``y`` ``[1, targets]`` (raw units,
    order of :attr:`target_names`: the declared targets, :func:`driple.metrics.target_names`),
    and the strings ``job_id``, ``model``, ``family``, ``setting``, ``config_key``,
    ``feature_set``, ``vocab_digest`` and ``grouping_key``.

    ``dataset[idx]`` with a list of positions is a subset that keeps all of this (and
    :attr:`setting`, :attr:`options`): what :func:`driple.inspector.train.train_inspector`
    takes as its training and validation jobs.

    Args:
        root (str): The dataset directory (holding ``results.csv``).
        groups (int, optional): Number of groups of the grouped graph. (default: :obj:`100`)
        grouping (str, optional): Grouping policy. (default: :obj:`"uniform"`)
        features (str, optional): Feature set, ``"driple"`` or ``"rich"``.
            (default: :obj:`"driple"`)
        seed (int, optional): Seed of the grouping. (default: :obj:`42`)
        builder (callable, optional): ``builder(config, groups=, grouping=, features=, seed=)
            -> Data`` for a :func:`job_config`; the zoo builder by default.
        builder_id (str, optional): Identifies ``builder`` in cache keys; required with a custom
            builder. (default: the zoo builder and its op-vocabulary digest)
        force_reload (bool, optional): Rebuild every graph. (default: :obj:`False`)
        progress (bool, optional): Show a progress bar while building. (default: :obj:`True`)
        max_contention (float, optional): Leave out jobs measured while other processes used
            more than this % of the host CPU; :obj:`None` keeps all. (default: :obj:`10`)
        graph_cache (str, optional): Directory of the shared graph cache. (default:
            ``.graph-cache`` beside the dataset directory)
        workers (int, optional): Processes building missing graphs. (default: :obj:`1`)
    """
    def __init__(
        self,
        root: str,
        groups: int = DEFAULT_GROUPS,
        grouping: str = DEFAULT_POLICY,
        features: str = "driple",
        seed: int = DEFAULT_SEED,
        builder: Optional[Callable[..., Data]] = None,
        builder_id: Optional[str] = None,
        transform: Optional[Callable] = None,
        force_reload: bool = False,
        progress: bool = True,
        max_contention: Optional[float] = DEFAULT_MAX_CONTENTION,
        graph_cache: Optional[str] = None,
        workers: int = 1,
    ):
        if builder is not None and builder_id is None:
            raise ValueError("pass builder_id with a custom builder (it keys the graph cache)")
        self.options = {"groups": int(groups), "grouping": grouping, "features": features,
                        "seed": int(seed)}
        self.target_names = target_names()
        self.builder = builder or zoo_graph
        self.builder_id = builder_id or _zoo_builder_id()
        self.progress = progress
        self.workers = max(1, int(workers))
        self.graph_cache = graph_cache or osp.join(osp.dirname(osp.abspath(root)), ".graph-cache")
        self.frame = read_results(osp.join(root, "results.csv"), max_contention)
        if len(self.frame) == 0:
            raise DripleError(f"{osp.join(root, 'results.csv')} has no job with status 'ok'"
                              + (f" measured on a quiet host (host_other_cpu_pct <= {max_contention})"
                                 if max_contention is not None else ""))
        self.key = _digest({
            "version": CACHE_VERSION, "options": self.options, "builder": self.builder_id,
            "rows": self.frame[["job_id", *CONFIG_COLUMNS, *self.target_names]].astype(str).values.tolist(),
            # what shapes each row's graph beyond its own columns (a strategy's graph key)
            "graphs": sorted({graph_setting(s) for s in self.frame["setting"].astype(str)}),
        })
        super().__init__(root, transform, log=False, force_reload=force_reload)
        self.load(self.processed_paths[0])

    @property
    def raw_dir(self) -> str:
        return self.root  # results.csv sits at the top; raw/ is the collector's time series

    @property
    def raw_file_names(self) -> list[str]:
        return ["results.csv"]

    @property
    def processed_file_names(self) -> list[str]:
        return [f"inspector-{self.key}.pt"]

    def download(self):  # pragma: no cover - results.csv is checked in __init__
        raise DripleError(f"no results.csv in {self.root}")

    def graph_key(self, config: dict) -> str:
        shape = {**config, "setting": graph_setting(config["setting"])}
        return _digest({"version": CACHE_VERSION, "config": shape, "options": self.options,
                        "builder": self.builder_id})

    def _graph_path(self, key: str) -> str:
        return osp.join(self.graph_cache, f"{key}.pt")

    def _graph(self, config: dict) -> Data:
        path = self._graph_path(self.graph_key(config))
        if not self.force_reload and osp.exists(path):
            return Data(**torch.load(path, weights_only=True))
        return Data(**_store(self.builder(config, **self.options), path, self.options))

    def _build_parallel(self, configs: dict) -> dict:
        """Build the missing graphs of ``configs`` in ``workers`` processes; key -> error."""
        import multiprocessing as mp

        from tqdm.auto import tqdm

        todo = [(k, c) for k, c in configs.items()
                if self.force_reload or not osp.exists(self._graph_path(k))]
        if self.force_reload:
            for k, _ in todo:
                if osp.exists(self._graph_path(k)):
                    os.remove(self._graph_path(k))
        failed = {}
        if not todo:
            return failed
        jobs = [((self.builder, self.options, self._graph_path(k)), k, c) for k, c in todo]
        with mp.get_context("spawn").Pool(min(self.workers, len(todo))) as pool:
            bar = tqdm(pool.imap_unordered(_build_one, jobs), total=len(jobs),
                       desc=f"building graphs ({self.workers} processes)", unit="graph",
                       disable=not self.progress)
            for key, error in bar:
                if error:
                    failed[key] = error
            pool.close()  # workers exit on their own: terminating them (the with block's exit)
            pool.join()   # leaves their queues' semaphores reported leaked at shutdown
        return failed

    def process(self):
        from tqdm.auto import tqdm

        graphs: dict[str, Data] = {}
        failed: dict[str, str] = {}
        configs = {}
        for row in self.frame.to_dict("records"):
            config = job_config(row)
            configs.setdefault(self.graph_key(config), config)
        if self.workers > 1:
            failed = self._build_parallel(configs)
            self.force_reload = False  # just rebuilt
        bar = tqdm([(k, c) for k, c in configs.items() if k not in failed],
                   desc="building graphs", unit="graph", disable=not self.progress)
        for key, config in bar:
            bar.set_postfix_str(config["model"], refresh=False)
            try:
                graphs[key] = self._graph(config)
            except Exception as exc:  # one untraceable model must not sink the dataset
                failed[key] = f"{config['model']}: {type(exc).__name__}: {exc}"
        data_list = []
        for row in self.frame.to_dict("records"):
            key = self.graph_key(job_config(row))
            if key not in graphs:
                continue
            g = graphs[key]
            if getattr(g, "graph_features", None) is None:
                raise DripleError(f"the graph builder made no graph_features for {row['model']}; "
                                  "build graphs with driple.graph.build (or add them to a custom builder)")
            y = torch.tensor([[float(row[m]) for m in self.target_names]], dtype=torch.float32)
            family = row.get("family")
            family = str(family) if isinstance(family, str) and family else (g.family or row["model"])
            data_list.append(Data(
                x=g.x.float(), edge_index=g.edge_index.long(), edge_weight=g.edge_weight.float(),
                graph_attr=g.graph_attr.double().view(1, -1),
                graph_features=g.graph_features.double().view(1, -1), y=y, num_nodes=g.x.size(0),
                job_id=str(row["job_id"]), model=str(row["model"]), family=family,
                setting=str(row["setting"]),
                config_key=key, feature_set=g.feature_set, vocab_digest=g.vocab_digest,
                grouping_key=g.grouping_key))
        if failed:
            sample = next(iter(failed.values()))
            warnings.warn(f"{len(failed)} of {len(configs)} graph(s) could not be built and their "
                          f"jobs are left out; first error: {sample}", stacklevel=2)
        if not data_list:
            raise DripleError(f"no graph of {self.root} could be built")
        self.save(data_list, self.processed_paths[0])

    # ------------------------------------------------------------------ per-item metadata
    def _column(self, name: str) -> list:
        values = getattr(self._data, name)
        if not isinstance(values, (list, tuple)):  # a dataset of one item
            values = [values]
        return [values[i] for i in self.indices()]

    @property
    def job_ids(self) -> list[str]:
        return self._column("job_id")

    @property
    def families(self) -> list[str]:
        return self._column("family")

    @property
    def models(self) -> list[str]:
        return self._column("model")

    @property
    def config_keys(self) -> list[str]:
        return self._column("config_key")

    @property
    def targets(self) -> np.ndarray:
        """Measured targets ``[n, targets]`` in raw units (NaN = not measured)."""
        return self._data.y.view(-1, len(self.target_names))[list(self.indices())].double().numpy()

    @property
    def graph_attrs(self) -> np.ndarray:
        """Graph-level attributes ``[n, 6]`` (for the tabular baseline)."""
        return self._data.graph_attr.view(self._data.y.size(0), -1)[list(self.indices())].numpy()

    @property
    def graph_features(self) -> np.ndarray:
        """Graph-level features ``[n, F]`` (:data:`driple.graph.summary_features.GRAPH_FEATURES`,
        raw units)."""
        return self._data.graph_features.view(self._data.y.size(0), -1)[list(self.indices())].numpy()

    def _unique(self, name: str) -> str:
        values = sorted(set(self._column(name)))
        if len(values) != 1:
            raise DripleError(f"graphs of {self.root} disagree on {name}: {values}; rebuild with "
                              "force_reload=True")
        return values[0]

    @property
    def feature_set(self) -> str:
        return self._unique("feature_set")

    @property
    def vocab_digest(self) -> str:
        return self._unique("vocab_digest")

    @property
    def setting(self) -> str:
        settings = sorted(set(self.frame["setting"].astype(str)))
        return settings[0] if len(settings) == 1 else ",".join(settings)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}({osp.basename(osp.normpath(self.root))}, "
                f"{len(self)} jobs, groups={self.options['groups']}, "
                f"features={self.options['features']!r})")


def dataset_built_as(inspector, root: str, progress: bool = False) -> InspectorDataset:
    """The dataset at ``root`` with its graphs built as ``inspector``'s were (its
    :meth:`~driple.inspector.checkpoint.TrainedInspector.build_options`: groups, grouping,
    features, seed), so that its predictions on them are the ones it was scored with."""
    return InspectorDataset(root, **inspector.build_options(), progress=progress)
