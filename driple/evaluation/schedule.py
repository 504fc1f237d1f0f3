"""What the scheduler simulation rests on, checked against measurements.

- :func:`measured_pairs` reads every ok co-run of ``datasets/v2*/corun-*`` with the solo rows
  of its jobs (the setting's dataset beside it): per job its solo compute wave (burst level,
  duty cycle) and its measured slow-down (co-run mean iteration time / solo one).
- :func:`check_interference` scores :class:`driple.schedule.interference.InterferenceModel` on
  them: the shipped constants, the constants refitted on all pairs, and leave-one-pair-out
  (each pair predicted by constants fitted on the others: the honest figure).

``driple simulate --check-interference`` prints it.
"""
from __future__ import annotations

import glob
import json
import os

import numpy as np


def measured_pairs(root: str = "datasets") -> list[dict]:
    """``[{"corun", "setting", "jobs", "burst", "duty", "capacity", "slowdown"}]`` for every ok co-run
    under ``root/v2*/corun-*`` whose jobs all have a solo row."""
    from driple.collect.corun import load_coruns
    from driple.collect.results import load_results
    from driple.settings import parse_setting

    out = []
    for d in sorted(glob.glob(os.path.join(root, "v2*", "corun-*"))):
        table = load_coruns(d)
        table = table[table["status"] == "ok"]
        if table.empty:
            continue
        setting = str(table["setting"].iloc[0])
        solo_dir = os.path.join(os.path.dirname(d), setting)
        if not os.path.isdir(solo_dir):
            continue
        rows = load_results(d).set_index("job_id")
        solo = load_results(solo_dir).set_index("job_id")
        workers = parse_setting(setting).workers
        for _, c in table.iterrows():
            ids = json.loads(c["job_ids"])
            burst, duty, slow, names, cores = [], [], [], [], []
            for j in ids:
                r = rows.loc[j]
                base = r.get("base_job_id")
                if base not in solo.index:
                    break
                s = solo.loc[base]
                b, i = float(s["compute_burst_duration"]), float(s["compute_idle_duration"])
                burst.append(float(s["compute_burst_amount"]))
                duty.append(b / (b + i) if b + i > 0 else 1.0)
                slow.append(float(r["iter_time_mean_s"]) / float(s["iter_time_mean_s"]))
                names.append(f"{r['model']} bs{int(r['batch_size'])}")
                cores.append(float(r.get("cpu_cores") or 2))
            else:
                group = os.path.relpath(d, root)
                out.append({"corun": f"{group}/{c['corun_id']}", "group": group, "setting": setting, "jobs": names, "burst": burst, "duty": duty,
                            "capacity": 100.0 * min(cores) / workers, "slowdown": slow})
    return out


def _cases(pairs):
    return [(p["burst"], p["duty"], p["capacity"], p["slowdown"]) for p in pairs]


def check_interference(root: str = "datasets") -> dict:
    """Errors of the interference model on the measured pairs (module doc); relative errors
    are |predicted / measured - 1| per job."""
    from driple.errors import DripleError
    from driple.schedule.interference import (
        InterferenceModel,
        fit_interference,
        median_error,
    )

    pairs = measured_pairs(root)
    if not pairs:
        raise DripleError(f"no measured co-run with solo rows under {root}/v2*/corun-*: the check "
                          "reads a driple checkout's datasets/ (a wheel ships none); run it there")
    shipped = InterferenceModel()
    fitted = fit_interference(_cases(pairs))
    loo, per_pair = [], []
    for k, p in enumerate(pairs):
        m = fit_interference(_cases(pairs[:k] + pairs[k + 1:]))
        pred = m.slowdowns_of(p["burst"], p["duty"], p["capacity"])
        errs = np.abs(pred / np.asarray(p["slowdown"]) - 1.0)
        loo.extend(errs)
        per_pair.append({"corun": p["corun"], "group": p["group"], "jobs": p["jobs"], "measured": p["slowdown"],
                         "shipped": shipped.slowdowns_of(p["burst"], p["duty"], p["capacity"]).tolist(),
                         "leave_one_out": pred.tolist()})
    def median_of(rows, key):
        return float(np.median([abs(x / m - 1.0) for p in rows for x, m in zip(p[key], p["measured"])]))

    by_group = {}
    for g in sorted({p["group"] for p in per_pair}):
        mine = [p for p in per_pair if p["group"] == g]
        by_group[g] = {"pairs": len(mine), "median_error": median_of(mine, "shipped"),
                       "leave_one_out_median_error": median_of(mine, "leave_one_out")}
    return {"pairs": len(pairs), "jobs": sum(len(p["jobs"]) for p in pairs), "by_group": by_group,
            "shipped": {"alpha": shipped.alpha, "beta": shipped.beta,
                        "median_error": median_error(shipped, _cases(pairs))},
            "refitted": {"alpha": fitted.alpha, "beta": fitted.beta,
                         "median_error": median_error(fitted, _cases(pairs))},
            "leave_one_out": {"median_error": float(np.median(loo)), "p90_error": float(np.quantile(loo, 0.9)),
                              "max_error": float(np.max(loo))},
            "per_pair": per_pair}


def format_interference(result: dict) -> str:
    s, r, lo = result["shipped"], result["refitted"], result["leave_one_out"]
    lines = [f"interference model on {result['pairs']} measured co-run pairs ({result['jobs']} slow-downs)",
             f"  shipped constants  alpha {s['alpha']:.2f} beta {s['beta']:.2f}: median error {s['median_error']:.1%}",
             f"  refitted on all    alpha {r['alpha']:.2f} beta {r['beta']:.2f}: median error {r['median_error']:.1%}",
             (f"  leave one pair out: median error {lo['median_error']:.1%}, p90 {lo['p90_error']:.1%}, "
              f"max {lo['max_error']:.1%}")]
    lines += [f"  {g}: {v['pairs']} pairs, median error {v['median_error']:.1%} "
              f"({v['leave_one_out_median_error']:.1%} leave one pair out)" for g, v in result["by_group"].items()]
    lines.append("")
    for p in result["per_pair"]:
        lines.append(f"  {' + '.join(p['jobs']):<40} measured "
                     + ", ".join(f"{x:.2f}x" for x in p["measured"]) + "   model "
                     + ", ".join(f"{x:.2f}x" for x in p["shipped"]) + f"   ({p['corun']})")
    return "\n".join(lines)
