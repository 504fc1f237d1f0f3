#!/usr/bin/env python
"""Give the shipped inspectors their calibration for model families they did not train on.

    python scripts/calibrate_unseen_families.py                  # every evaluated setting
    python scripts/calibrate_unseen_families.py --evaluation DIR --settings cpu-ddp-w2-lo --json

A user's model is of no family the inspector trained on, and the intervals calibrated on its
seen-family calibration jobs are too narrow there (they cover 82-88 % of held-out families'
jobs). This writes into each shipped checkpoint (``unseen_family``) the intervals the evaluation
calibrated on the residuals of its leave-one-family-out held-out jobs (``accuracy.json``,
``settings.<setting>.family.family_intervals``, from ``python scripts/reproduce.py --sections
accuracy``), the families the inspector trained on (its split's train and validation jobs, and
its transfer source's) and the coverage the evaluation measured for them cross-fitted (each
family with the intervals of the other families' folds). ``driple predict`` then uses them for
every job of another family. The registry entry's checksum is renewed; nothing else changes.

Roofline modes chosen on the held-out families (how a roofline joins each duration's
prediction) go in too where they win cross-fitted: a lower median MAPE over the held-out
families than the inspector as it is (``--roofline-modes auto``, the default; the rule the
"nested" figures measure without looking at the family scored). ``--roofline-modes always`` /
``never`` overrule it. The rooflines offered (``--roofline-sets``: the evaluation's own, all
terms without overlap, or every variant of :data:`driple.predict.unseen.ROOFLINE_VARIANTS`; the
set with the lower cross-fitted median wins) are fitted here again per fold on the fold's
training jobs (seconds; the evaluation's own roofline is checked to come out the same) and, for
the variants the modes use, on the inspector's training jobs into the checkpoint: a mode is
applied with the roofline it was chosen with. The figures go to ``unseen_families.json`` beside
``accuracy.json`` (held-out families cross-fitted and nested, the nested rule's step time and
memory durations per held-out job, which ``scripts/fit_memory.py`` scores the memory cycle with;
the out-of-zoo sets of the evaluation, never used to choose), which ``reproduce.py --report``
reads. The rooflines are fitted again as the checkpoint's own was, with or without the cost per
message.

Run it after the evaluation that produced the calibration, on the inspectors that evaluation
evaluated (the same checkpoints: the calibration is of their configuration and training jobs).
"""
import argparse
import json
import os
import sys

from driple.shipped import require_checkout

require_checkout(__file__)  # it writes this checkout's trained_models/, never another's

from driple.shipping.unseen_families import MODES_CHOICES, ship_unseen_families  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--evaluation", default=None,
                   help="directory of the evaluation's accuracy.json, where unseen_families.json is written "
                        "(default: <models dir>/evaluation)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"),
                   help="the shipped inspectors and their registry (default trained_models)")
    p.add_argument("--settings", nargs="*", default=None, help="only these settings (default: every one evaluated)")
    p.add_argument("--roofline-modes", nargs="?", const="always", default="auto", choices=MODES_CHOICES,
                   help="ship the roofline modes chosen on the held-out families: auto (default) where "
                        "they win cross-fitted (lower median MAPE than the inspector as it is), always "
                        "(the bare flag), never")
    p.add_argument("--roofline-sets", nargs="+", default=None, metavar="V,V",
                   help="the sets of rooflines the modes may join, each comma-separated; the set with the "
                        "lowest cross-fitted median wins (default: all; all,all-overlap,physical,physical-overlap)")
    from driple.predict.unseen import RULES

    p.add_argument("--modes-rule", default="median", choices=RULES,
                   help="how the modes are judged against the inspector as it is, cross-fitted: median "
                        "MAPE over every target (default, as shipped), or the mean / median over the "
                        "durations and step time (the targets a roofline changes)")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    a = p.parse_args(argv)
    from driple.errors import DripleError

    try:
        done = ship_unseen_families(a.models_dir, a.evaluation, a.settings, a.roofline_modes, a.roofline_sets,
                                    a.modes_rule, argv)
    except DripleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(done, indent=2))
    else:
        for d in done:
            modes = ", ".join(f"{t} {m}" for t, m in d["modes"].items() if m != "inspector")
            check, fig = d.get("roofline_modes"), d.get("figures") or {}
            why = "" if not check else (
                f" (cross-fitted median MAPE {check['median_mape_with']:.2f} % with them, "
                f"{check['median_mape_as_is']:.2f} % as is)")
            print(f"{d['setting']}: {len(d['families'])} training families"
                  + (f"; roofline joins {modes}{why}" if modes else
                     f"; no roofline modes{why}" if check else "")
                  + f"; on {d['folds']} held-out families: step time MAPE {d['step_time_mape']:.1f} %, "
                  f"median MAPE {d['median_mape']:.1f} %, interval coverage {d['coverage']:.1%} (cross-fitted)")
            if fig.get("nested"):
                n = fig["nested"]
                print(f"  nested (modes or not decided on the other families): step time {n['step_time_mape']:.1f} %, "
                      f"median {n['median_mape']:.1f} %; modes for {sum(c != 'as is' for c in n['chosen'])} of {len(n['chosen'])} families")
            for o in fig.get("out_of_zoo") or []:
                print(f"  out of zoo ({o['file']}, {o['jobs']} jobs, never used to choose): step time "
                      f"{o['step_time_mape']:.1f} % ({o['step_time_mape_as_is']:.1f} as is), median {o['median_mape']:.1f} % "
                      f"({o['median_mape_as_is']:.1f}), coverage {o['coverage']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
