"""How much target data and time transfer learning saves: fine-tuning against training from
scratch on the same seeded split (``scripts/transfer_study.py`` prints it; ``scripts/reproduce.py``
keeps it in its report).
"""
from __future__ import annotations


def run_study(source, dataset, fractions, schemes, options, progress=True) -> list[dict]:
    """Per fraction of the target's training jobs and per scheme: the fine-tuned inspector's
    mean NRMSE / MAPE on the target's test jobs, its training jobs, seconds and epochs (one
    seeded split for all; a line printed per run)."""
    from driple.inspector.splits import random_split
    from driple.inspector.transfer import finetune

    split = random_split(dataset, seed=options.seed)
    rows = []
    for fraction in fractions:
        for scheme in schemes:
            tuned = finetune(source, dataset, fraction=fraction, scheme=scheme, split=split,
                             options=options, progress=progress)
            t, mean = tuned.info["transfer"], tuned.info["scores"]["test"]["mean"]
            rows.append({"fraction": fraction, "scheme": scheme, "n_train": t["n_train"],
                         "nrmse": mean["nrmse"], "mape": mean["mape"], "seconds": t["seconds"],
                         "epochs": tuned.info["history"]["epochs"],
                         "trainable_parameters": t["trainable_parameters"]})
            print(f"{fraction:8.0%} {scheme:8s} {t['n_train']:6d} {mean['nrmse']:8.3f} "
                  f"{mean['mape']:8.1f} {t['seconds']:9.1f} {rows[-1]['epochs']:7d}", flush=True)
    return rows


def summarize(rows: list[dict], tolerance: float) -> list[str]:
    """Per scheme, the least fraction whose NRMSE is within ``tolerance`` of training from
    scratch on all the data, and how much less data and time that is."""
    full = [r for r in rows if r["scheme"] == "scratch" and r["fraction"] == max(x["fraction"] for x in rows)]
    if not full:
        return ["(no scratch run on all the data: no reference for the summary)"]
    ref = full[0]
    lines = [f"reference: scratch on {ref['fraction']:.0%} of the data, NRMSE {ref['nrmse']:.3f}, "
             f"{ref['seconds']:.1f} s"]
    for scheme in dict.fromkeys(r["scheme"] for r in rows):
        good = sorted((r for r in rows if r["scheme"] == scheme
                       and r["nrmse"] <= ref["nrmse"] * (1 + tolerance)), key=lambda r: r["fraction"])
        if not good:
            lines.append(f"{scheme:8s} never within {tolerance:.0%} of the reference NRMSE")
            continue
        r = good[0]
        lines.append(f"{scheme:8s} reaches it with {r['fraction']:.0%} of the data "
                     f"({ref['fraction'] / r['fraction']:.1f}x less) in {r['seconds']:.1f} s "
                     f"({ref['seconds'] / max(r['seconds'], 1e-9):.1f}x less time)")
    return lines
