"""Does ``compare-strategies`` pick what was measured? Which strategy is faster, and which holds
less memory per rank, judged on jobs measured under both.

The FSDP grids are jobs of the DDP grids, so the same job (model, knobs, batch, optimizer) has a
measured row in each setting's dataset. For each such job the shipped inspectors predict step
time and memory burst amount in both settings; a verdict *agrees* when the predicted order of
the two settings is the measured order. A difference within the label's own noise (``tie``,
relative, measured) is reported apart: there the measured order itself is a coin toss.

:func:`first_per_family` picks a few jobs by a rule fixed before any outcome is looked at (the
first job of each family in the grid's order), for a table of model-metric pairs that can be
read line by line (:func:`pairs_table`).
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


def first_per_family(jobs: list[tuple], grid: str | Path, families: int) -> list[tuple]:
    """The jobs of ``jobs`` (:func:`common_jobs`) that come first in their family in the order of
    the grid file ``grid``, for the first ``families`` families of that order; a grid job not
    measured ok (and quiet) in both datasets is passed over, so its family's next one counts."""
    from driple.collect.sweep import load_grid

    by_key = {_key(config): (config, a, b) for config, a, b in jobs}
    chosen, seen = [], set()
    for spec in load_grid(grid)["jobs"]:
        job = by_key.get(_key({"model": spec.model, "knobs": spec.knobs or {}, "batch_size": spec.batch_size,
                               "optimizer": spec.optimizer}))
        if job is None:
            continue
        family = str(job[2].get("family") or job[1].get("family"))
        if family in seen:
            continue
        seen.add(family)
        chosen.append(job)
        if len(chosen) == families:
            break
    if len(chosen) < families:
        raise DripleError(f"only {len(chosen)} families of {grid} have a job measured in both datasets "
                          f"({families} asked for)")
    return chosen


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
                       tie: float = 0.05, limit: int | None = None, progress: bool = False,
                       grid: str | Path | None = None, families: int | None = None) -> dict:
    """Predicted against measured order of ``setting_a`` and ``setting_b`` per job and metric
    (module docstring); ``limit`` jobs at most (in dataset order); with ``families``, only the
    first job of each of the first ``families`` families in the order of ``grid``
    (:func:`first_per_family`)."""
    from driple.predict.predictor import Predictor

    jobs = common_jobs(dataset_a, dataset_b)
    if families:
        if grid is None:
            raise DripleError("picking the first job of each family needs the grid that orders them")
        jobs = first_per_family(jobs, grid, families)
    jobs = jobs[:limit]
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
            rows.append({"job_id": row_b["job_id"], "family": str(row_b.get("family")),
                         "model": config["model"], "knobs": config["knobs"], "batch_size": config["batch_size"],
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


UNITS = {"step_time": ("s", 1.0), "memory_burst_amount": ("MB", 1.0)}


def pairs_table(result: dict) -> str:
    """The model-metric pairs of ``result`` (:func:`strategy_agreement`) as a markdown table:
    measured and predicted value in each setting, the lower one of each, agreement, tie."""
    a, b = result["settings"]
    lines = [f"| job | metric | measured {a} | measured {b} | predicted {a} | predicted {b} | measured lower | "
             "predicted lower | agrees | within tie |", "|---|---|---|---|---|---|---|---|---|---|"]
    short = {a: a, b: b}
    for r in result["rows"]:
        unit, _ = UNITS.get(r["metric"], ("", 1.0))
        (ma, mb), (pa, pb) = r["measured"], r["predicted"]
        lines.append(f"| {r['job_id']} ({r['optimizer']}) | {r['metric']} ({unit}) | {ma:.4g} | {mb:.4g} | {pa:.4g} | "
                     f"{pb:.4g} | {short[r['measured_lower']]} | {short[r['predicted_lower']]} | "
                     f"{'yes' if r['agrees'] else '**no**'} | {'yes' if r['tie'] else 'no'} |")
    agree = sum(r["agrees"] for r in result["rows"])
    lines.append("")
    lines.append(f"The predicted order agrees with the measured one on {agree} of {len(result['rows'])} pairs.")
    return "\n".join(lines) + "\n"
