"""The memory simulator on GPU rows, with nothing fitted to them: a worker's
``torch.cuda.memory_allocated`` predicted as the simulated step's tensors plus the cuBLAS
workspaces (:func:`driple.hardware.allocator.cuda_runtime_bytes`, from the row's probed GPU).

Two levels per job, each against its label:

- **peak** (``memory_burst_amount``): the whole step's simulated peak (every op, not only the
  collector's sample points) plus the workspaces;
- **low** (``memory_low_mb``, the level between steps): parameters, optimizer state, gradients
  and the batch plus the workspaces.
"""
from __future__ import annotations

import json

import numpy as np

from driple.errors import DripleError


def gpu_of(row: dict) -> dict:
    """The first GPU of a row's probed ``hardware`` spec; a clear error for a row without one."""
    try:
        gpus = json.loads(row["hardware"]).get("gpus") or []
    except (KeyError, TypeError, ValueError):
        gpus = []
    if not gpus:
        raise DripleError(f"row {row.get('job_id')!r} carries no probed GPU in its hardware spec")
    return gpus[0]


def predict_row(row: dict) -> dict:
    """Predicted peak and low (MB) of one GPU row (:func:`driple.predict.gpu_memory.gpu_levels`),
    and, for comparison, the peak at the CPU label's sample points."""
    from driple.predict.gpu_memory import gpu_levels, trace_job
    from driple.settings import parse_setting

    setting = parse_setting(row["setting"])
    knobs = row["knobs"] if isinstance(row["knobs"], dict) else json.loads(row["knobs"] or "{}")
    traced, _ = trace_job(row["model"], int(row["batch_size"]), str(row["optimizer"]), knobs)
    levels = gpu_levels(traced, setting.strategy, setting.workers, gpu_of(row).get("compute_capability", ""))
    return {"job_id": row["job_id"], "family": row["family"], "runtime_mb": levels["breakdown_mb"]["cublas_workspaces"],
            "peak_mb": levels["peak_mb"], "sampled_peak_mb": levels["sampled_peak_mb"], "low_mb": levels["between_steps_mb"],
            "measured_peak_mb": float(row["memory_burst_amount"]),
            "measured_low_mb": float(row["memory_low_mb"]), "breakdown_mb": levels["breakdown_mb"]}


def evaluate(frame, progress: bool = False) -> dict:
    """Per-row predictions and the MAPE of the peak (whole step and, for comparison, the CPU
    label's sample points) and of the low level over the ``ok`` rows of a GPU results table."""
    from tqdm import tqdm

    rows = [r for r in frame.to_dict("records") if r.get("status", "ok") == "ok"]
    if not rows:
        raise DripleError("no ok rows to evaluate")
    preds = [predict_row(r) for r in tqdm(rows, disable=not progress, unit="job", desc="simulating")]

    def errors(pred_key, measured_key):
        p = np.array([x[pred_key] for x in preds])
        m = np.array([x[measured_key] for x in preds])
        e = p / m - 1
        return {"mape": float(100 * np.mean(np.abs(e))), "median_ape": float(100 * np.median(np.abs(e))),
                "signed_median": float(100 * np.median(e)), "max_ape": float(100 * np.max(np.abs(e)))}

    return {"jobs": len(preds), "gpus": sorted({gpu_of(r)["name"] for r in rows}),
            "peak": errors("peak_mb", "measured_peak_mb"),
            "peak_at_sample_points": errors("sampled_peak_mb", "measured_peak_mb"),
            "low": errors("low_mb", "measured_low_mb"), "rows": preds}
