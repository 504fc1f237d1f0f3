"""The memory simulator against measured peaks: one offset and scale fitted on the training
families, the held-out family predicted (leave one family out), per family and overall."""
from __future__ import annotations

import numpy as np

from driple.errors import DripleError


def simulated_peaks(frame, progress: bool = False) -> np.ndarray:
    """Simulated peak MB (at the collector's sample points) of each row of a results table
    (``nan`` where a job cannot be traced)."""
    from tqdm import tqdm

    from driple.inspector.memory_estimator import simulated_peak

    cache: dict = {}
    rows = frame.to_dict("records")
    return np.array([simulated_peak(r, cache) for r in tqdm(rows, disable=not progress, unit="job", desc="simulating")],
                    dtype=np.float64)


def leave_family_out(frame, simulated: np.ndarray, target: str = "memory_burst_amount") -> dict:
    """Per held-out family: the offset and scale fitted on the other families' rows, and the
    MAPE on the family's rows; with the median and mean over all held-out rows."""
    from driple.graph.memory import fit_offset

    measured = frame[target].to_numpy(dtype=np.float64)
    families = frame["family"].astype(str).to_numpy()
    pred = np.full(len(frame), np.nan)
    folds = {}
    for fam in sorted(set(families)):
        test = families == fam
        offset, scale = fit_offset(simulated[~test], measured[~test])
        pred[test] = offset + scale * simulated[test]
        err = np.abs(pred[test] / measured[test] - 1)
        folds[fam] = {"jobs": int(test.sum()), "mape": float(100 * np.nanmean(err)),
                      "offset_mb": offset, "scale": scale}
    err = np.abs(pred / measured - 1)
    return {"target": target, "jobs": int(np.isfinite(err).sum()), "mape": float(100 * np.nanmean(err)),
            "median_ape": float(100 * np.nanmedian(err)),
            "signed_median": float(100 * np.nanmedian(pred / measured - 1)), "families": folds,
            "predicted": pred.tolist()}


def fit_setting(setting: str, datasets_root: str, out_of_zoo: list | None = None, progress: bool = False) -> dict:
    """The memory record of a shipped setting: the simulator's offset and scale fitted on its
    inspector's training jobs, the leave-one-family-out error on its whole dataset, the 90th
    percentile of those errors (the interval a prediction gets), and the error on out-of-zoo
    datasets of the setting with the training fit."""
    import os

    from driple.graph.memory import fit_offset, library_heap_mb
    from driple.inspector.dataset import job_config, read_results
    from driple.predict.predictor import Predictor
    from driple.setting_datasets import SettingDatasets

    predictor = Predictor.load(setting)
    dataset = SettingDatasets.load(datasets_root).dataset_dir(setting)
    frame = read_results(f"{dataset}/results.csv", 10.0).reset_index(drop=True)
    simulated = simulated_peaks(frame, progress=progress)
    train_ids = set((predictor.inspector.info.get("split") or {}).get("train") or [])
    train = frame["job_id"].isin(train_ids).to_numpy() if train_ids else np.ones(len(frame), dtype=bool)
    measured = frame["memory_burst_amount"].to_numpy(dtype=np.float64)
    offset, scale = fit_offset(simulated[train], measured[train])
    lofo = leave_family_out(frame, simulated)
    rel = np.abs(np.asarray(lofo["predicted"]) / measured - 1)
    where = os.path.relpath(dataset)
    where = dataset if where.startswith("..") else where
    record = {"offset_mb": offset, "scale": scale, "fitted_on": f"{int(train.sum())} training jobs of {where}",
              "lofo_mape": lofo["mape"], "lofo_median": lofo["median_ape"],
              "interval_rel": float(np.nanquantile(rel, 0.9)), "families": {
                  k: round(v["mape"], 2) for k, v in lofo["families"].items()}}
    for path in out_of_zoo or []:
        other = read_results(f"{path}/results.csv", 10.0).reset_index(drop=True)
        sim = simulated_peaks(other, progress=progress)
        heaps = np.array([library_heap_mb(c["model"], c["batch_size"], c["knobs"])
                          for c in map(job_config, other.to_dict("records"))])
        truth = other["memory_burst_amount"].to_numpy(dtype=np.float64)
        err = (offset + heaps + scale * sim) / truth - 1
        plain = (offset + scale * sim) / truth - 1
        record.setdefault("out_of_zoo", {})[str(path)] = {
            "jobs": int(np.isfinite(err).sum()), "mape": float(100 * np.nanmean(np.abs(err))),
            "median_signed": float(100 * np.nanmedian(err)),
            "library_heap_mb_median": float(np.median(heaps)),
            "without_library_heap": {"mape": float(100 * np.nanmean(np.abs(plain))),
                                     "median_signed": float(100 * np.nanmedian(plain))}}
    return record
