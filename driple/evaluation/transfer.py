"""How much target data and time transfer learning saves: fine-tuning against training from
scratch on the same seeded split (``scripts/transfer_study.py`` prints it; ``scripts/reproduce.py``
keeps it in its report).

One run per fraction, scheme and seed: the test jobs stay (the target's seeded split), the seed
draws which training jobs a fraction keeps and starts the training. One seed's comparison of two
schemes on a few dozen test jobs moves by more than their difference, so the summary compares
means over seeds. With ``roofline``, each fine-tuned network gets a roofline fitted on the jobs it
was tuned on (its recorded split), joined as a shipped inspector joins it
(:func:`driple.inspector.ensemble.with_roofline`): the study then scores what a user of the
target setting would get, not the network alone.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np


def run_study(source, dataset, fractions, schemes, options, progress=True, seeds=None,
              roofline: bool = False) -> list[dict]:
    """Per seed, fraction of the target's training jobs and scheme: the fine-tuned inspector's
    mean NRMSE / MAPE and step-time MAPE on the target's test jobs, its training jobs, seconds
    and epochs (a line printed per run); with ``roofline`` those of the joined inspector, the
    network's own kept as ``network_*``."""
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.splits import Split, random_split
    from driple.inspector.transfer import finetune

    split = random_split(dataset, seed=options.seed)
    rows = []
    for seed in (seeds if seeds is not None else [options.seed]):
        for fraction in fractions:
            for scheme in schemes:
                tuned = finetune(source, dataset, fraction=fraction, scheme=scheme, split=split,
                                 options=replace(options, seed=seed), progress=progress)
                t, own = tuned.info["transfer"], _test_scores(tuned)
                row = {"seed": seed, "fraction": fraction, "scheme": scheme, "n_train": t["n_train"],
                       **own, "seconds": t["seconds"], "epochs": tuned.info["history"]["epochs"],
                       "trainable_parameters": t["trainable_parameters"]}
                if roofline:
                    joined = with_roofline(tuned, dataset, Split.from_dict(tuned.info["split"], dataset))
                    row = {**row, **{f"network_{k}": v for k, v in own.items()}, **_test_scores(joined),
                           "roofline": True}
                rows.append(row)
                step = float("nan") if row["step_mape"] is None else row["step_mape"]
                print(f"{seed:4d} {fraction:8.0%} {scheme:8s} {t['n_train']:6d} {row['nrmse']:8.3f} "
                      f"{row['mape']:8.1f} {step:8.1f} {t['seconds']:9.1f} {row['epochs']:7d}", flush=True)
    return rows


def _test_scores(inspector) -> dict:
    test = inspector.info["scores"]["test"]
    return {"nrmse": test["mean"]["nrmse"], "mape": test["mean"]["mape"],
            "step_mape": (test.get("step_time") or {}).get("mape")}


def mean_rows(rows: list[dict]) -> list[dict]:
    """One row per fraction and scheme: the mean over its seeds of NRMSE, MAPE, step-time MAPE
    and seconds, with the seeds' standard deviation of NRMSE (0 for one seed)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["fraction"], r["scheme"]), []).append(r)
    out = []
    for (fraction, scheme), rs in groups.items():
        def avg(key):
            vals = [r[key] for r in rs if r.get(key) is not None]
            return float(np.mean(vals)) if vals else None
        out.append({"fraction": fraction, "scheme": scheme, "n_train": rs[0]["n_train"], "seeds": len(rs),
                    "nrmse": avg("nrmse"), "nrmse_sd": float(np.std([r["nrmse"] for r in rs])),
                    "mape": avg("mape"), "step_mape": avg("step_mape"), "seconds": avg("seconds")})
    return out


def summarize(rows: list[dict], tolerance: float) -> list[str]:
    """Per scheme, the least fraction whose NRMSE (mean over seeds) is within ``tolerance`` of
    training from scratch on all the data, and how much less data and time that is."""
    means = mean_rows(rows)
    full = [r for r in means if r["scheme"] == "scratch" and r["fraction"] == max(x["fraction"] for x in means)]
    if not full:
        return ["(no scratch run on all the data: no reference for the summary)"]
    ref = full[0]
    over = f", mean of {ref['seeds']} seeds" if ref["seeds"] > 1 else ""
    lines = [f"reference: scratch on {ref['fraction']:.0%} of the data, NRMSE {ref['nrmse']:.3f}{over}, "
             f"{ref['seconds']:.1f} s"]
    for scheme in dict.fromkeys(r["scheme"] for r in means):
        good = sorted((r for r in means if r["scheme"] == scheme
                       and r["nrmse"] <= ref["nrmse"] * (1 + tolerance)), key=lambda r: r["fraction"])
        if not good:
            lines.append(f"{scheme:8s} never within {tolerance:.0%} of the reference NRMSE")
            continue
        r = good[0]
        lines.append(f"{scheme:8s} reaches it with {r['fraction']:.0%} of the data "
                     f"({ref['fraction'] / r['fraction']:.1f}x less) in {r['seconds']:.1f} s "
                     f"({ref['seconds'] / max(r['seconds'], 1e-9):.1f}x less time)")
    return lines
