"""The ``transfer`` section: fine-tuning against training from scratch at fractions of a target
setting's training jobs; its report.
"""
from __future__ import annotations

from driple.evaluation.reproduce.context import Context, run_stamp, say
from driple.evaluation.reproduce.tables import fixed


def section_transfer(ctx: Context) -> None:
    from driple.evaluation.transfer import run_study, summarize
    from driple.inspector.estimators import GNNEstimator
    from driple.inspector.evaluate import source_split_for
    from driple.inspector.splits import random_split
    from driple.inspector.train import recorded_options
    from driple.inspector.transfer import default_scheme, finetune_options

    a = ctx.args
    source_name = ctx.source_setting()
    shipped = ctx.inspector(source_name)
    options = recorded_options(shipped, ctx.overrides())
    out = ctx.kept("transfer", "targets")
    for target in [s for s in ctx.settings() if s != source_name]:
        ds = ctx.dataset(target, shipped.build_options())
        source, held = shipped, None
        if not a.no_retrain_source:
            source_ds = ctx.dataset(source_name, shipped.build_options())
            ssplit = source_split_for(random_split(ds, seed=options.seed), ds, source_ds, options.seed)
            if ssplit is not None:
                source = GNNEstimator.from_checkpoint(shipped, options=options, progress=not a.quiet,
                                                      cache=ctx.cache).fit(
                    source_ds, ssplit.train, ssplit.val).inspector_
                held = {"n_source_jobs_held_out": len(ssplit.test), "what": ssplit.held_out}
        # the paper's scheme splits the graph layers: a features-only source has none
        schemes = ["paper", "mlp", "scratch"] if default_scheme(source) == "paper" else ["mlp", "scratch"]
        rows = run_study(source, ds, a.fractions, schemes,
                         finetune_options(shipped, ctx.overrides()), progress=not a.quiet)
        out[target] = {"rows": rows, "summary": summarize(rows, a.tolerance), "tolerance": a.tolerance,
                       "source_retrained_without": held, **run_stamp()}
        say("\n".join(out[target]["summary"]))
        ctx.save("transfer", {"source": source_name, "targets": out})


def report_transfer(tr) -> list[str]:
    lines = [f"## Transfer learning from {tr['source']}", ""]
    for target, r in tr["targets"].items():
        held = r.get("source_retrained_without")
        lines += [f"### {target}", "",
                  (f"Source retrained without {held['what']} ({held['n_source_jobs_held_out']} source "
                   "jobs held out)." if held else "Source as shipped: it may have seen the target's "
                   "test architectures in its own setting."), "",
                  "| fraction | scheme | train jobs | NRMSE | MAPE | seconds |", "|---|---|---|---|---|---|"]
        lines += [f"| {x['fraction']:.0%} | {x['scheme']} | {x['n_train']} | {fixed(x['nrmse'])} | "
                  f"{fixed(x['mape'], True)} | {x['seconds']:.1f} |" for x in r["rows"]]
        lines += [""] + [f"- {s}" for s in r["summary"]] + [""]
    return lines + transfer_overview(tr)


def transfer_overview(tr) -> list[str]:
    """One table for every target: test NRMSE (and training seconds) of each scheme at each
    fraction of the target's training jobs; the scheme's best NRMSE per row in bold."""
    schemes = list(dict.fromkeys(x["scheme"] for r in tr["targets"].values() for x in r["rows"]))
    if not schemes:
        return []
    lines = ["### Transfer overview: test NRMSE (training seconds) by fraction of the target's jobs", "",
             "| target | fraction | train jobs | " + " | ".join(schemes) + " |",
             "|---|---|---|" + "---|" * len(schemes)]
    for target, r in tr["targets"].items():
        by = {}
        for x in r["rows"]:
            by.setdefault((x["fraction"], x["n_train"]), {})[x["scheme"]] = x
        for (fraction, n), row in sorted(by.items()):
            best = min((x["nrmse"] for x in row.values() if x["nrmse"] is not None), default=None)
            cells = []
            for sc in schemes:
                x = row.get(sc)
                if x is None or x["nrmse"] is None:
                    cells.append("-")
                    continue
                text = f"{fixed(x['nrmse'])} ({x['seconds']:.1f} s)"
                cells.append(f"**{text}**" if x["nrmse"] == best else text)
            lines.append(f"| {target} | {fraction:.0%} | {n} | " + " | ".join(cells) + " |")
    return lines + [""]
