"""The ``labels`` section: every dataset's jobs relabelled from their raw files with both
labellers; are the table's labels reproduced?
"""
from __future__ import annotations

import os

from driple.evaluation.reproduce.context import Context, say, shown_path


LABELLERS = ("timeline", "kmeans")


def section_labels(ctx: Context) -> None:
    from driple.collect.labels.relabel import check_dataset

    out = {}
    paths = [os.path.join(c, n) for c in ctx.index.collections() for n in sorted(os.listdir(c))]
    for path in paths:
        if not os.path.exists(os.path.join(path, "results.csv")):
            continue
        name = shown_path(path) if ctx.index.indexed else os.path.basename(path)
        if ctx.args.settings and os.path.basename(path) not in ctx.args.settings:
            continue
        out[name] = {}
        for labeller in LABELLERS:
            r = check_dataset(path, progress=not ctx.args.quiet, labeller=labeller)
            out[name][labeller] = {"jobs": r["jobs"], "identical": r["identical"],
                                   "mismatched": len(r["mismatched"]), "errors": len(r["errors"]),
                                   "first_error": next(iter(r["errors"].values()), None)}
            say(f"labels {name} ({labeller}): {r['identical']} of {r['jobs']} identical, "
                 f"{len(r['errors'])} could not be relabelled")
    ctx.save("labels", {"datasets": out})


def report_labels(labels) -> list[str]:
    lines = ["## Labels reproduced from the raw files", "",
             "| dataset | labeller | jobs | identical | not relabelled |", "|---|---|---|---|---|"]
    for name, by in labels["datasets"].items():
        for labeller, v in by.items():
            lines.append(f"| {name} | {labeller} | {v['jobs']} | {v['identical']} | {v['errors']} |")
    return lines + [""]
