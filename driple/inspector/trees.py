"""Gradient-boosted trees that travel inside an inspector checkpoint (the ``hybrid+hgb-priors``
ensemble shipped as one file); fitted by :mod:`driple.inspector.ensemble`.

:class:`~driple.inspector.baselines.HGBPriors` fitted on an inspector's own training jobs reads
what the hybrid's head reads (graph-level features and priors) and predicts the targets as log
residuals over the priors. Its errors are not the graph network's, and on the v2 validation jobs
their geometric mean beats either. :class:`TreeMember` is that fitted model in a form a
checkpoint can hold: plain numbers and lists, and the scikit-learn regressors as ``skops`` bytes,
read back only if they hold nothing but the scikit-learn types in :data:`TRUSTED` (no pickle of
arbitrary objects: ``torch.load(weights_only=True)`` reads the bytes, skops their content).
"""
from __future__ import annotations

import zipfile
from typing import Optional, Sequence

import numpy as np

from driple.errors import DripleError

#: The types a stored tree member may contain besides skops' defaults (numbers, arrays, lists).
TRUSTED = (
    "sklearn.ensemble._hist_gradient_boosting.gradient_boosting.HistGradientBoostingRegressor",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "sklearn.ensemble._hist_gradient_boosting.binning._BinMapper",
    "sklearn._loss.loss.HalfSquaredError",
    "sklearn._loss.link.IdentityLink",
    "sklearn._loss.link.Interval",
)


class TreeMember:
    """A fitted ``hgb-priors`` model over graphs (see the module doc).

    Args:
        inputs: The fitted :class:`~driple.inspector.graph_inputs.GraphInputs` (features,
            priors, setting, host figures, scaling).
        targets: Target names, in the inspector's order.
        target_priors: Each target's prior name (None: none).
        prior_eps, eps: Floors of the priors and the targets (see ``HGBPriors``).
        models: Per target a fitted ``HistGradientBoostingRegressor`` (its predictors cut to the
            iterations chosen on validation) or a constant.
    """

    def __init__(self, inputs, targets: Sequence[str], target_priors: Sequence[Optional[str]],
                 prior_eps: Sequence[float], eps: Sequence[float], models: Sequence):
        self.inputs, self.targets = inputs, tuple(targets)
        self.target_priors = list(target_priors)
        self.prior_eps, self.eps = [float(x) for x in prior_eps], [float(x) for x in eps]
        self.models = list(models)

    def predict(self, graphs: Sequence) -> np.ndarray:
        """``[n, targets]`` in raw units."""
        from driple.inspector.graph_inputs import stack_graph_features

        features = stack_graph_features(graphs)
        X = self.inputs.transform(features).numpy().astype(np.float64)
        base = log_offsets(self.inputs.target_priors(features, self.target_priors), self.prior_eps)
        cols = []
        for j, (model, eps) in enumerate(zip(self.models, self.eps)):
            if isinstance(model, float):
                cols.append(np.full(len(X), model))
            else:
                cols.append(np.clip(np.exp(model.predict(X) + base[:, j]) - eps, 0, None))
        return np.stack(cols, axis=1) if cols else np.zeros((len(X), 0))

    # ------------------------------------------------------------------ storage
    def to_state(self) -> dict:
        import skops.io as sio

        fitted = [m for m in self.models if not isinstance(m, float)]
        return {"inputs": self.inputs.to_dict(), "targets": list(self.targets),
                "target_priors": self.target_priors, "prior_eps": self.prior_eps, "eps": self.eps,
                "constants": [m if isinstance(m, float) else None for m in self.models],
                "regressors": sio.dumps(fitted, compression=zipfile.ZIP_DEFLATED)}

    @classmethod
    def from_state(cls, state: dict) -> "TreeMember":
        import skops.io as sio

        from driple.inspector.graph_inputs import GraphInputs

        try:
            data = bytes(state["regressors"])
            unknown = sorted(set(sio.get_untrusted_types(data=data)) - set(TRUSTED))
        except Exception as exc:  # noqa: BLE001 -- a damaged member is named, never a traceback
            raise DripleError(f"the checkpoint's tree member is damaged ({type(exc).__name__}: {exc})") from None
        if unknown:
            raise DripleError(f"the checkpoint's tree member holds types driple does not load: "
                              f"{', '.join(unknown)}")
        from sklearn.ensemble import HistGradientBoostingRegressor

        fitted = sio.loads(data, trusted=list(TRUSTED))  # skops trusts scikit-learn's own types too:
        wanted = sum(c is None for c in state["constants"])  # so check what came out
        if not isinstance(fitted, list) or len(fitted) != wanted or not all(
                isinstance(m, HistGradientBoostingRegressor) for m in fitted):
            kinds = sorted({type(m).__name__ for m in fitted}) if isinstance(fitted, list) else [type(fitted).__name__]
            raise DripleError(f"the checkpoint's tree member should hold {wanted} "
                              f"HistGradientBoostingRegressor, not {', '.join(kinds)}")
        fitted = iter(fitted)
        models = [c if c is not None else next(fitted) for c in state["constants"]]
        return cls(GraphInputs.from_dict(state["inputs"]), state["targets"], state["target_priors"],
                   state["prior_eps"], state["eps"], models)


def geometric_mean(*predictions: np.ndarray) -> np.ndarray:
    """Element-wise geometric mean of non-negative predictions of one shape (values below 1e-12
    read as 1e-12); a NaN is left out of its element's mean, NaN where every one is NaN."""
    logs = np.stack([np.log(np.clip(p, 1e-12, None)) for p in predictions])
    known = np.isfinite(logs)
    count = known.sum(0)
    mean = np.where(known, logs, 0.0).sum(0) / np.maximum(count, 1)
    return np.where(count > 0, np.exp(mean), np.nan)


def log_offsets(prior: np.ndarray, floors) -> np.ndarray:
    """``ln(prior + floor)`` per job and target, 0 where a target has no prior (NaN): the base
    a log residual over the priors is taken from."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num(np.log(np.clip(prior, 0, None) + np.asarray(floors)), nan=0.0)

