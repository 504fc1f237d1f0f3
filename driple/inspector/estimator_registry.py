"""Estimators by name: the baselines, the analytic step time and the per-op-class roofline, the inspector's configurations (the paper's graph network,
the hybrid with graph-level features and priors, features only), and any registered one.

:func:`make_estimator` makes a fresh :class:`~driple.inspector.estimators.Estimator` by name
(what ``driple evaluate --estimators`` and ``scripts/reproduce.py --estimators`` take); a new
kind is one :func:`register_estimator` of a factory
``factory(seed=, options=, progress=, cache=) -> Estimator``, e.g. a hybrid inspector::

    register_estimator("gnn-k5", lambda seed=0, options=None, progress=False, cache=None:
                       GNNEstimator(options=options, progress=progress, cache=cache, name="gnn-k5",
                                    num_repeats=5))
"""
from __future__ import annotations

from typing import Callable, Optional

from driple.errors import DripleError
from driple.inspector.baselines import HGBBaseline, HGBPriors, MeanBaseline, NearestArchitecture
from driple.inspector.estimators import Estimator, GNNEstimator

Factory = Callable[..., Estimator]
_REGISTRY: dict[str, Factory] = {}


def register_estimator(name: str, factory: Factory) -> Factory:
    """Make ``factory(seed=, options=, progress=, cache=) -> Estimator`` available as ``name``
    (to :func:`make_estimator`, ``driple evaluate --estimators`` and ``scripts/reproduce.py``)."""
    if name in _builtin_names():
        raise DripleError(f"estimator {name!r} is built in")
    _REGISTRY[name] = factory
    return factory


def unregister_estimator(name: str) -> None:
    """Forget a registered estimator (built-in ones stay)."""
    _REGISTRY.pop(name, None)


def _builtin() -> dict[str, Factory]:
    def gnn(seed=0, options=None, progress=False, cache=None):
        """The paper's pure graph network: no graph-level inputs (K = 10, see the design study)."""
        from dataclasses import replace

        from driple.inspector.train import TrainOptions

        options = replace(options or TrainOptions(epochs=150, patience=20), seed=seed)
        return GNNEstimator(options=options, progress=progress, cache=cache, num_repeats=10,
                            graph_attr=False)

    def analytic(seed=0, **_):
        """The roofline step time with one calibrated factor (imports torch: made lazily)."""
        from driple.inspector.analytic import AnalyticEstimator

        return AnalyticEstimator()

    def roofline(terms="all", overlap=False):
        """The per-op-class roofline of the durations and the step time (NNLS rates; what the
        variants mean: :class:`~driple.inspector.roofline_estimator.RooflineEstimator`)."""
        def factory(seed=0, **_):
            from driple.inspector.roofline_estimator import RooflineEstimator

            return RooflineEstimator(terms=terms, overlap=overlap)

        return factory

    def configured(preset_name):
        def factory(seed=0, options=None, progress=False, cache=None):
            """An inspector configuration of :func:`~driple.inspector.train.preset`, one network
            (the configurations are compared network against network; the ``inspector`` column
            retrains the checkpoint, as many networks as it averages); given ``options`` keep the
            preset's target scaling (the priors need log targets)."""
            from dataclasses import replace

            from driple.inspector.train import preset

            config, own = preset(preset_name, epochs=150, patience=20, networks=1)
            options = replace(options, target_scaling=own.target_scaling) if options else own
            return GNNEstimator(options=replace(options, seed=seed), progress=progress, cache=cache,
                                name=preset_name, config=config)

        return factory

    def hybrid_and_trees(seed=0, options=None, progress=False, cache=None):
        """The hybrid and ``hgb-priors``, averaged in log space (the hybrid's training is shared
        with the ``hybrid`` column through ``cache``)."""
        from driple.inspector.estimators import EnsembleEstimator

        return EnsembleEstimator([configured("hybrid")(seed=seed, options=options, progress=progress,
                                                       cache=cache), HGBPriors(random_state=seed)],
                                 name="hybrid+hgb-priors")

    def memory_sim(seed=0, **_):
        """The memory simulator over the traced step, offset and scale fitted (memory amount only)."""
        from driple.inspector.memory_estimator import MemoryEstimator

        return MemoryEstimator()

    return {
        "mean": lambda seed=0, **_: MeanBaseline(),
        "hgb": lambda seed=0, **_: HGBBaseline(random_state=seed),
        "hgb-priors": lambda seed=0, **_: HGBPriors(random_state=seed),
        "knn": lambda seed=0, **_: NearestArchitecture(),
        "analytic": analytic,
        "roofline": roofline(),
        "roofline-overlap": roofline(overlap=True),
        "roofline-physical": roofline(terms="physical"),
        "roofline-physical-overlap": roofline(terms="physical", overlap=True),
        "gnn": gnn,
        "hybrid": configured("hybrid"),
        "features": configured("features"),
        "hybrid+hgb-priors": hybrid_and_trees,
        "memory-sim": memory_sim,
    }


def _builtin_names() -> tuple[str, ...]:
    return tuple(_builtin())  # the factories are closures: nothing is imported to list them


def estimator_names() -> tuple[str, ...]:
    """Names :func:`make_estimator` knows: the built-in ones, then the registered ones."""
    return (*_builtin_names(), *_REGISTRY)


def make_estimator(name: str, seed: int = 0, options=None, progress: bool = False,
                   cache: Optional[dict] = None) -> Estimator:
    """A fresh estimator by name: ``mean``, ``hgb``, ``hgb-priors``, ``knn`` (baselines; ``hgb-priors``
    reads what the hybrid's head reads, see :class:`~driple.inspector.baselines.HGBPriors`), ``analytic`` (the
    roofline step time, calibrated by one factor; step_time only), ``roofline`` (the roofline
    split by op class, one fitted rate per class: every duration and the step time),
    ``roofline-overlap`` (the same with communication partly hidden under compute),
    ``roofline-physical`` (its rates on FLOPs of the compute-bound classes and traffic of the
    others: :mod:`driple.inspector.roofline`), ``roofline-physical-overlap`` (both), ``gnn`` (the paper's
    graph network trained from scratch with ``options``), ``hybrid`` / ``features`` (the
    inspector with graph-level features and priors, with or without the graph), ``memory-sim``
    (the memory simulator: the memory amount only, :mod:`driple.inspector.memory_estimator`), or
    a registered one."""
    factories = {**_builtin(), **_REGISTRY}
    if name not in factories:
        raise DripleError(f"unknown estimator {name!r}; choose among {', '.join(estimator_names())}")
    return factories[name](seed=seed, options=options, progress=progress, cache=cache)
