"""The ``design`` section: grouping policy, repetitions K and target scaling on the source
setting, chosen on validation NRMSE; its report.
"""
from __future__ import annotations

import time

import numpy as np

from driple.evaluation.reproduce.context import Context, say
from driple.evaluation.reproduce.tables import fixed


def section_design(ctx: Context) -> None:
    from dataclasses import replace

    from driple.inspector.splits import random_split
    from driple.inspector.train import recorded_options, retrain_config, train_inspector

    a = ctx.args
    source_name = ctx.source_setting()
    shipped = ctx.inspector(source_name)
    options = recorded_options(shipped, ctx.overrides())
    config, _ = retrain_config(shipped)  # the shipped network (paper GNN, hybrid, ...), varied below
    config = replace(config, networks=1)  # the design choices are one network's (rows comparable across runs)
    builder = shipped.build_options()
    grouping, scaling = builder.get("grouping", "uniform"), options.target_scaling
    rows = (ctx.load("design") or {}).get("rows", []) if a.keep else []
    runs = [("grouping", g, config.num_repeats, scaling) for g in a.groupings]
    runs += [("K", grouping, k, scaling) for k in a.repeats if k != config.num_repeats]
    runs += [("scaling", grouping, config.num_repeats, s) for s in a.scalings if s != scaling]
    for study, grouping_, k, scaling_ in runs:
        ds = ctx.dataset(source_name, {**builder, "grouping": grouping_})
        split = random_split(ds, seed=options.seed)
        # residuals over the priors are taken in log space: another scaling predicts the targets
        residual = config.residual and scaling_ == "ln"
        run_config = replace(config, num_repeats=k, residual=residual)
        t0 = time.perf_counter()
        model = train_inspector(ds[list(split.train)], ds[list(split.val)], replace(options, target_scaling=scaling_),
                                run_config, test=ds[list(split.test)], host=shipped.host, progress=not a.quiet)
        val, test = model.info["scores"]["val"]["mean"], model.info["scores"]["test"]["mean"]
        nodes = float(np.mean([ds[i].num_nodes for i in range(len(ds))]))
        key = (study, grouping_, k, scaling_)
        rows = [r for r in rows if (r["study"], r["grouping"], r["K"], r.get("scaling")) != key]
        rows.append({"study": study, "configuration": config.kind, "residual": residual,
                     "grouping": grouping_, "K": k, "scaling": scaling_,
                     "val_nrmse": val["nrmse"], "nrmse": test["nrmse"], "mape": test["mape"],
                     "seconds": time.perf_counter() - t0, "mean_nodes": nodes,
                     "n_val": len(split.val), "n_test": len(split.test)})
        say(f"design {study}: {config.kind}{' (residual)' if residual else ''} grouping {grouping_} K {k} "
             f"scaling {scaling_}: validation NRMSE {val['nrmse']:.3f}, test NRMSE {test['nrmse']:.3f} "
             f"MAPE {test['mape']:.0f}% ({nodes:.0f} nodes per graph, {rows[-1]['seconds']:.0f} s)")
        ctx.save("design", {"source": source_name, "rows": rows})


def report_design(design) -> list[str]:
    rows = design["rows"]
    best = min((r for r in rows if r.get("val_nrmse") is not None), key=lambda r: r["val_nrmse"], default=None)
    lines = [f"## Design study on {design['source']} (random split by architecture)", "",
             "Chosen on validation NRMSE; the test NRMSE is reported, not used to choose.", "",
             "| study | network | grouping | K | target scaling | nodes per graph | validation NRMSE "
             "| test NRMSE | test MAPE | train s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = " **(chosen)**" if r is best else ""
        network = r.get("configuration", "gnn") + (" (residual)" if r.get("residual") else "")
        lines.append(f"| {r['study']}{mark} | {network} | {r['grouping']} | {r['K']} | {r.get('scaling', '-')} | "
                     f"{r['mean_nodes']:.0f} | "
                     f"{fixed(r.get('val_nrmse'))} | {fixed(r['nrmse'])} | {fixed(r['mape'], True)} | {r['seconds']:.0f} |")
    return lines + [""]
