#!/usr/bin/env python
"""Co-location predictions against jobs really co-run by the collector.

    python scripts/eval_colocate.py --coruns datasets/corun-cpu-ddp-w2-lo

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
memory (``provenance.json``) and includes what the runtime holds beside the tensors.

Fit or not (the confusion table): a pair *fits* when measured no job of it slowed down by more
than ``--max-slowdown`` (default 1.15x: above the 8 % test-retest spread of the step time);
it is *predicted* to fit when :func:`driple.colocate` says "packs well".
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--coruns", required=True, help="co-run dataset directory (driple collect corun --out)")
    p.add_argument("--setting", default=None, help="shipped inspector (default: the co-runs' setting)")
    p.add_argument("--solo", default=None, help="dataset with the jobs' solo runs (default datasets/<setting>)")
    p.add_argument("--max-slowdown", type=float, default=MAX_SLOWDOWN,
                   help="a pair fits when no job of it slowed down by more than this factor against "
                   f"its solo run (default {MAX_SLOWDOWN})")
    p.add_argument("--labels", default=None, choices=["v1", "v2"],
                   help="read the co-runs and inspectors as this label version (default: the declared "
                   "one, driple.metrics.DECLARED_LABELS; datasets/v2 needs v2)")
    p.add_argument("--json", metavar="FILE", help="also write the per-co-run comparison here")
    args = p.parse_args(argv)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)

    import pandas as pd

    from driple.collect.corun import load_coruns, measured_combined, read_corun
    from driple.collect.results import load_results
    from driple.errors import DripleError
    from driple.inspector.dataset import job_config
    from driple.metrics import RESOURCES, target_names
    from driple.predict import colocate as co
    from driple.predict.predictor import Predictor
    from driple.predict.profile import ResourceProfile

    try:
        table = load_coruns(args.coruns)
        table = table[table["status"] == "ok"]
        if table.empty:
            raise DripleError(f"no ok co-run in {args.coruns}")
        setting = args.setting or str(table["setting"].iloc[0])
        predictor = Predictor.load(setting)
        jobs = load_results(args.coruns).set_index("job_id")
        solo_dir = args.solo or os.path.join(ROOT, "datasets", setting)
        solo = load_results(solo_dir).set_index("job_id") if os.path.exists(solo_dir) else pd.DataFrame()
        series = read_corun(args.coruns)
        capacity = corun_capacity(setting)
        memory_scale = measured_memory_scale(args.coruns)
    except DripleError as err:
        print(f"eval_colocate: error: {err}", file=sys.stderr)
        return 2

    rows = []
    try:  # a job the inspector cannot predict, a solo row without a label: say so, no traceback
        for _, c in table.iterrows():
            ids = json.loads(c["job_ids"])
            predicted, oracle, slowdown = {}, {}, []
            for j in ids:
                r = jobs.loc[j]
                cfg = job_config(r.to_dict())
                predicted[j] = predictor.predict_job(cfg["model"], batch_size=cfg["batch_size"],
                                                     optimizer=cfg["optimizer"], knobs=cfg["knobs"])
                base = r.get("base_job_id")
                if base in solo.index and solo.loc[base, "status"] == "ok":
                    s = solo.loc[base]
                    oracle[j] = ResourceProfile(setting=setting, model=str(s["model"]),
                                                metrics={m: float(s[m]) for m in target_names()})
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
    except DripleError as err:
        print(f"eval_colocate: error: {err}", file=sys.stderr)
        return 2


    def rel(a, b):
        return abs(a - b) / abs(b) if b else float("nan")

    print(f"{len(rows)} co-runs in {args.coruns}, setting {setting}, slot capacity {capacity}")
    print(f"\n{'resource':<9}" + "".join(f"{h:>24}" for h in
          ("measured mean", "inspector served (err)", "solo served (err)",
           "measured collide", "inspector collide", "solo collide")))
    summary = {}
    for res in RESOURCES:
        meas = [r["measured_mean"][res] for r in rows]
        cells = [f"{np.mean(meas):>24.1f}"]
        summary[res] = {"measured_mean": float(np.mean(meas))}
        for name in ("inspector", "solo"):
            pairs = [(r[name]["served"][res], r["measured_mean"][res]) for r in rows if name in r]
            err = float(np.nanmean([rel(a, b) for a, b in pairs])) if pairs else float("nan")
            summary[res][f"{name}_served_rel_err"] = err
            summary[res][f"{name}_served_mean"] = float(np.mean([a for a, _ in pairs])) if pairs else None
            cells.append(f"{np.mean([a for a, _ in pairs]) if pairs else float('nan'):>15.1f} ({err:>5.0%})")
        mc = [r["measured_collision"].get(res) for r in rows if r["measured_collision"].get(res) is not None]
        summary[res]["measured_collision"] = float(np.mean(mc)) if mc else None
        cells.append(f"{np.mean(mc) if mc else float('nan'):>24.2f}")
        for name in ("inspector", "solo"):
            pc = [r[name]["collision"][res] for r in rows if name in r]
            summary[res][f"{name}_collision"] = float(np.mean(pc)) if pc else None
            cells.append(f"{np.mean(pc) if pc else float('nan'):>24.2f}")
        print(f"{res:<9}" + "".join(cells))
    slow = [s for r in rows for s in r["slowdown"]]
    verdicts = [r["inspector"]["verdict"] for r in rows if "inspector" in r]
    print(f"\nmeasured slow-down of iteration time vs solo: median {np.median(slow):.2f}x "
          f"(range {min(slow):.2f}-{max(slow):.2f}) over {len(slow)} jobs" if slow else "")
    print("inspector verdicts: " + ", ".join(f"{v}: {verdicts.count(v)}" for v in sorted(set(verdicts))))
    tables = {name: confusion(rows, name, args.max_slowdown) for name in ("inspector", "solo")}
    print(f"\nfit = no job slowed down by more than {args.max_slowdown:.2f}x; predicted fit = 'packs well'")
    for name, table in tables.items():
        print("\n".join(format_confusion(table, name)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"setting": setting, "capacity": capacity, "summary": summary,
                       "max_slowdown": args.max_slowdown, "confusion": tables,
                       "slowdown": slow, "coruns": rows}, f, indent=2, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
