"""Does ``compare-strategies`` pick what was measured? Which strategy is faster, and which holds
less memory per rank, judged on jobs measured under both.

The FSDP grids are jobs of the DDP grids, so the same job (model, knobs, batch, optimizer) has a
measured row in each setting's dataset. For each such job the shipped inspectors predict step
time and memory burst amount in both settings; a verdict *agrees* when the predicted order of
the two settings is the measured order. A difference within the label's own noise (``tie``,
relative, measured) is reported apart: there the measured order itself is a coin toss.
"""
from __future__ import annotations

import json
from pathlib import Path

from driple.errors import DripleError

METRICS = ("step_time", "memory_burst_amount")


def _key(config: dict) -> str:
    return json.dumps({k: config[k] for k in ("model", "knobs", "batch_size", "optimizer")}, sort_keys=True)


def common_jobs(dataset_a: str | Path, dataset_b: str | Path, max_contention: float | None = None) -> list[tuple]:
    """``[(config, row_a, row_b), ...]``: jobs measured ok (and quiet) in both datasets."""
    from driple.collect.results import CONTENDED_PCT, load_results
    from driple.inspector.dataset import job_config

    limit = CONTENDED_PCT if max_contention is None else max_contention

    def ok_rows(path):
        frame = load_results(path)
        rows = frame.to_dict("records")
        return {_key(job_config(r)): r for r in rows if r["status"] == "ok"
                and not float(r.get("host_other_cpu_pct") or 0) > limit}

    a, b = ok_rows(dataset_a), ok_rows(dataset_b)
    return [(job_config(a[k]), a[k], b[k]) for k in a if k in b]


def judge(measured: tuple, predicted: tuple, settings: tuple, tie: float = 0.05) -> dict:
    """One verdict: which of two settings is lower, measured and predicted, whether they agree,
    and whether the measured difference is within ``tie`` (relative to the lower value)."""
    (ma, mb), (pa, pb), (a, b) = measured, predicted, settings
    lower_measured = a if ma < mb else b
    lower_predicted = a if pa < pb else b
    return {"measured": [ma, mb], "predicted": [pa, pb], "measured_lower": lower_measured,
            "predicted_lower": lower_predicted, "agrees": lower_measured == lower_predicted,
            "tie": abs(ma - mb) / max(min(ma, mb), 1e-12) <= tie}


def strategy_agreement(setting_a: str, setting_b: str, dataset_a: str | Path, dataset_b: str | Path,
                       tie: float = 0.05, limit: int | None = None, progress: bool = False) -> dict:
    """Predicted against measured order of ``setting_a`` and ``setting_b`` per job and metric
    (module docstring); ``limit`` jobs at most (in dataset order)."""
    from driple.predict.predictor import Predictor

    jobs = common_jobs(dataset_a, dataset_b)[:limit]
    if not jobs:
        raise DripleError(f"no job measured ok in both {dataset_a} and {dataset_b}")
    predictors = {s: Predictor.load(s) for s in (setting_a, setting_b)}
    rows = []
    iterator = jobs
    if progress:
        from tqdm import tqdm

        iterator = tqdm(jobs, desc="jobs", unit="job")
    for config, row_a, row_b in iterator:
        predicted = {}
        for s, p in predictors.items():
            prof = p.predict_job(config["model"], batch_size=config["batch_size"],
                                 optimizer=config["optimizer"], knobs=config["knobs"])
            predicted[s] = {m: float(prof.metrics[m]) for m in METRICS}
        for m in METRICS:
            rows.append({"model": config["model"], "knobs": config["knobs"], "batch_size": config["batch_size"],
                         "optimizer": config["optimizer"], "metric": m,
                         **judge((float(row_a[m]), float(row_b[m])),
                                 (predicted[setting_a][m], predicted[setting_b][m]),
                                 (setting_a, setting_b), tie)})
    summary = {}
    for m in METRICS:
        mine = [r for r in rows if r["metric"] == m]
        clear = [r for r in mine if not r["tie"]]
        summary[m] = {"jobs": len(mine), "agree": sum(r["agrees"] for r in mine),
                      "clear": len(clear), "agree_clear": sum(r["agrees"] for r in clear),
                      "measured_lower": {s: sum(r["measured_lower"] == s for r in mine) for s in (setting_a, setting_b)}}
    return {"settings": [setting_a, setting_b], "datasets": [str(dataset_a), str(dataset_b)],
            "tie": tie, "summary": summary, "rows": rows}
