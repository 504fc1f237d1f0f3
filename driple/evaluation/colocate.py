"""Co-location predictions against jobs really co-run by the collector (``scripts/eval_colocate.py``
prints it; ``scripts/reproduce.py`` keeps it in its report).

For every ok co-run (``driple collect corun``) this predicts each job's profile with the
shipped inspector of the setting, combines them with :func:`driple.colocate` (one worker slot
per job, see ``driple colocate --help``) and compares with what was measured while the jobs ran
together: the combined mean load per resource (sum over jobs of the per-worker mean) and the
share of time two jobs were in burst at once (:func:`~driple.collect.corun.measured_combined`
on the aligned series). As a reference it does the same with each job's *solo measurement*
(its row in the setting's dataset) as the profile: the error left there is the co-location
model's own (interference, phase locking), not the inspector's.

Demand vs what is served: a profile predicts what a job asks for when alone; on a saturated
resource co-running jobs slow each other down, so the measured load is capped. The table gives
both the predicted demand and the demand throttled to capacity (every job slowed by the same
factor capacity / demand on its most overloaded resource), and the measured slow-down of each
job's iteration time against its solo run.

Capacity as the co-run shared it (``corun_capacity``): every rank of every job runs on this
host's cores, whatever the setting's network, and the jobs' workers pair up one per slot, so a
worker slot has cores / workers of them (a parameter server's own CPU time is not in the
workers' profiles: it is not modelled); in an emulated setting each job has a cluster and links
of its own, so TX and RX are not shared and not checked for overload.

Memory units: the co-run's measured mean is of the sampled RSS (% of host memory); with labels
v2 the memory amount is the peak allocated MB, so the measured mean is shown in MB of the host's
memory (``provenance.json``) and includes what the runtime holds beside the tensors; both
predictions add that part (the registry entry's ``resident``, measured on the inspector's
training jobs: :mod:`driple.collect.resident`).

Fit or not (the confusion table): a pair *fits* when measured no job of it slowed down by more
than ``--max-slowdown`` (default 1.15x: above the 8 % test-retest spread of the step time);
it is *predicted* to fit when :func:`driple.colocate` says "packs well".
"""
from __future__ import annotations

import json
import os

import numpy as np

def throttled(combined: dict, capacity: dict) -> tuple[dict, float]:
    """Combined means scaled by the slow-down a saturated resource forces on every job."""
    factor = 1.0
    for res, value in combined.items():
        cap = capacity.get(res)
        if cap and value > cap and res != "memory":
            factor = min(factor, cap / value)
    return {r: v * (factor if r != "memory" else 1.0) for r, v in combined.items()}, factor


MAX_SLOWDOWN = 1.15


def corun_capacity(setting_id: str, host_cores: int | None = None) -> dict:
    """Capacity of one worker slot as a co-run on this host shares it (see the module doc)."""
    from driple.predict.colocate import slot_capacity
    from driple.settings import parse_setting

    s = parse_setting(setting_id)
    cores = (host_cores or os.cpu_count() or 1) / max(s.workers, 1)
    capacity = slot_capacity(setting_id, cores=cores)
    if s.emulated:  # each job has links of its own
        capacity = {r: v for r, v in capacity.items() if r not in ("tx", "rx")}
    return capacity


def measured_memory_scale(coruns_dir: str) -> float:
    """Factor from the co-run's measured memory (% of host memory) to the memory amount's unit:
    1 for %, host MB / 100 for MB (labels v2; host memory from the co-run's provenance)."""
    from driple.metrics import resource

    if resource("memory").amount != "MB":
        return 1.0
    total = None
    try:
        with open(os.path.join(coruns_dir, "provenance.json")) as f:
            total = json.load(f)["host"]["memory_bytes"]
    except (OSError, ValueError, KeyError, TypeError):
        import psutil

        total = psutil.virtual_memory().total
    return float(total) / 1e6 / 100.0


def confusion(rows: list[dict], name: str, max_slowdown: float = MAX_SLOWDOWN) -> dict:
    """Counts of predicted fit ("packs well" from the ``name`` profiles) against measured fit
    (every job's slow-down at most ``max_slowdown``), over the co-runs with both known."""
    out = {"fit_predicted_fit": 0, "fit_predicted_not": 0, "not_predicted_fit": 0, "not_predicted_not": 0}
    for r in rows:
        if name not in r or not r["slowdown"] or len(r["slowdown"]) != len(r["models"]):
            continue
        fits = max(r["slowdown"]) <= max_slowdown
        predicted = r[name]["verdict"] == "packs well"
        out[f"{'fit' if fits else 'not'}_predicted_{'fit' if predicted else 'not'}"] += 1
    return out


def format_confusion(table: dict, name: str) -> list[str]:
    return [f"{name:>10} profiles   predicted fits   predicted does not",
            f"{'measured fits':>22} {table['fit_predicted_fit']:>16} {table['fit_predicted_not']:>20}",
            f"{'measured slowed':>22} {table['not_predicted_fit']:>16} {table['not_predicted_not']:>20}"]


def evaluate_coruns(coruns: str, setting: str | None = None, solo: str | None = None,
                    max_slowdown: float = MAX_SLOWDOWN, inspector: str | None = None) -> dict:
    """Predicted against measured co-location for every ok co-run of ``coruns`` (module doc).

    ``inspector``: a shipped setting id or a checkpoint path (default: the co-runs' setting).
    Returns ``{"coruns_dir", "setting", "capacity", "summary", "max_slowdown", "confusion",
    "slowdown", "verdicts", "coruns"}``; raises :class:`~driple.errors.DripleError`.
    """
    import pandas as pd

    from driple.collect.corun import load_coruns, measured_combined, read_corun
    from driple.collect.results import load_results
    from driple.errors import DripleError
    from driple.inspector.dataset import job_config
    from driple.metrics import RESOURCES, target_names
    from driple.predict import colocate as co
    from driple.predict.predictor import Predictor
    from driple.predict.profile import ResourceProfile

    table = load_coruns(coruns)
    table = table[table["status"] == "ok"]
    if table.empty:
        raise DripleError(f"no ok co-run in {coruns}")
    setting = setting or str(table["setting"].iloc[0])
    predictor = Predictor.load(inspector or setting)
    jobs = load_results(coruns).set_index("job_id")
    solo_dir = solo or os.path.join(os.path.dirname(os.path.abspath(coruns)), setting)  # beside it
    solo_rows = load_results(solo_dir).set_index("job_id") if os.path.exists(solo_dir) else pd.DataFrame()
    series = read_corun(coruns)
    capacity = corun_capacity(setting)
    memory_scale = measured_memory_scale(coruns)

    rows = []
    for _, c in table.iterrows():
        ids = json.loads(c["job_ids"])
        predicted, oracle, slowdown = {}, {}, []
        for j in ids:
            r = jobs.loc[j]
            cfg = job_config(r.to_dict())
            predicted[j] = predictor.predict_job(cfg["model"], batch_size=cfg["batch_size"],
                                                 optimizer=cfg["optimizer"], knobs=cfg["knobs"])
            base = r.get("base_job_id")
            if base in solo_rows.index and solo_rows.loc[base, "status"] == "ok":
                s = solo_rows.loc[base]
                oracle[j] = ResourceProfile(setting=setting, model=str(s["model"]),
                                            metrics={m: float(s[m]) for m in target_names()},
                                            resident=predictor.resident)  # as the inspector's
                slowdown.append(float(r["iter_time_mean_s"]) / float(s["iter_time_mean_s"]))
        cs = series.get(c["corun_id"])
        measured_collision = {}
        if cs is not None and cs.overlap is not None:
            m = measured_combined(cs.series, capacity, t0=cs.overlap[0], t1=cs.overlap[1])
            measured_collision = {res: m.resources[res].collision_fraction for res in RESOURCES
                                  if res in m.resources}
        entry = {"corun_id": c["corun_id"], "models": [predicted[j].model for j in ids],
                 "measured_mean": {res: float(c[f"{res}_mean"]) * (memory_scale if res == "memory" else 1.0)
                                   for res in RESOURCES},
                 "measured_collision": measured_collision,
                 "slowdown": slowdown}
        for name, profiles in (("inspector", predicted), ("solo", oracle)):
            if len(profiles) != len(ids):
                continue
            rep = co.colocate(profiles, capacity)
            demand = {res: rep.resources[res].combined_mean for res in RESOURCES}
            served, factor = throttled(demand, capacity)
            entry[name] = {"demand": demand, "served": served, "throttle": factor,
                           "collision": {res: rep.resources[res].collision_probability for res in RESOURCES},
                           "verdict": rep.verdict}
        rows.append(entry)

    def rel(a, b):
        return abs(a - b) / abs(b) if b else float("nan")

    summary = {}
    for res in RESOURCES:
        summary[res] = {"measured_mean": float(np.mean([r["measured_mean"][res] for r in rows]))}
        for name in ("inspector", "solo"):
            pairs = [(r[name]["served"][res], r["measured_mean"][res]) for r in rows if name in r]
            summary[res][f"{name}_served_rel_err"] = (float(np.nanmean([rel(a, b) for a, b in pairs]))
                                                      if pairs else None)
            summary[res][f"{name}_served_mean"] = float(np.mean([a for a, _ in pairs])) if pairs else None
            pc = [r[name]["collision"][res] for r in rows if name in r]
            summary[res][f"{name}_collision"] = float(np.mean(pc)) if pc else None
        mc = [r["measured_collision"].get(res) for r in rows if r["measured_collision"].get(res) is not None]
        summary[res]["measured_collision"] = float(np.mean(mc)) if mc else None
    verdicts = [r["inspector"]["verdict"] for r in rows if "inspector" in r]
    return {"coruns_dir": str(coruns), "setting": setting, "capacity": capacity, "summary": summary,
            "max_slowdown": max_slowdown,
            "confusion": {name: confusion(rows, name, max_slowdown) for name in ("inspector", "solo")},
            "slowdown": [x for r in rows for x in r["slowdown"]],
            "verdicts": {v: verdicts.count(v) for v in sorted(set(verdicts))}, "coruns": rows}


def format_result(result: dict) -> str:
    """The comparison as printed by the script."""
    def cell(value, width, fmt):
        return f"{'-':>{width}}" if value is None else f"{value:>{width}{fmt}}"

    out = [f"{len(result['coruns'])} co-runs in {result['coruns_dir']}, setting {result['setting']}, "
           f"slot capacity {result['capacity']}", "",
           f"{'resource':<9}" + "".join(f"{h:>24}" for h in
                                      ("measured mean", "inspector served (err)", "solo served (err)",
                                       "measured collide", "inspector collide", "solo collide"))]
    for res, sm in result["summary"].items():
        cells = [cell(sm["measured_mean"], 24, ".1f")]
        for name in ("inspector", "solo"):
            err = sm[f"{name}_served_rel_err"]
            cells.append(cell(sm[f"{name}_served_mean"], 15, ".1f") + " ("
                         + ("  -  " if err is None else f"{err:>5.0%}") + ")")
        cells += [cell(sm[f"{k}_collision"], 24, ".2f") for k in ("measured", "inspector", "solo")]
        out.append(f"{res:<9}" + "".join(cells))
    slow = result["slowdown"]
    out += ["", (f"measured slow-down of iteration time vs solo: median {np.median(slow):.2f}x "
                 f"(range {min(slow):.2f}-{max(slow):.2f}) over {len(slow)} jobs" if slow else
                 "no solo runs found: no slow-down"),
            "inspector verdicts: " + ", ".join(f"{v}: {n}" for v, n in result["verdicts"].items()), "",
            f"fit = no job slowed down by more than {result['max_slowdown']:.2f}x; predicted fit = 'packs well'"]
    for name, table in result["confusion"].items():
        out += format_confusion(table, name)
    return "\n".join(out)
