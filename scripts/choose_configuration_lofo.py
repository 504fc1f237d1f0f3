#!/usr/bin/env python
"""Choose the source inspector's configuration for the case it is used in, a model of a family
it never trained on, on training and validation jobs only.

    python scripts/choose_configuration_lofo.py                       # features vs hybrid, + roofline
    python scripts/choose_configuration_lofo.py --candidates features,hybrid,gnn --json
    python scripts/choose_configuration_lofo.py --save   # kept for the source's model card

``ship_inspectors.py --select-models`` chooses on the source's validation jobs, whose families
are all among the training families. Here the shipped source's own train + validation jobs
(never its calibration or test jobs, never an evaluation fold's test jobs) are split again by
family: each family is predicted by every candidate trained on the other families (their
architectures cut into train and validation, early stopping and the roofline's modes on the
latter), with the per-op-class roofline joined as shipped. Printed per candidate: the median
over the 13 targets of the MAPE on the held-out families (the accuracy bar's measure), the
mean, and the step time's MAPE. The lowest median wins. A candidate training is what the
shipped one is (its preset's networks, moving average and scaling), so a run takes minutes:
about 10 on 2 cores for features and hybrid on the source's 194 jobs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from driple.shipped import require_checkout

require_checkout(__file__)  # it writes this checkout's trained_models/, never another's
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from driple.inspector.family_choice import inner_leave_family_out  # noqa: E402  (after the check)


def save(result: dict, path: str, setting: str, argv=None) -> None:
    """Write ``result`` with where it came from: the model card cites it."""
    from driple.collect.provenance import script_stamp

    record = {"section": "configuration_lofo", "setting": setting,
              **script_stamp("choose_configuration_lofo.py", argv), **result}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--setting", default="cpu-ddp-w2-lo", help="the shipped source inspector")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"))
    p.add_argument("--candidates", default="features,hybrid",
                   help="presets of driple.inspector.train.preset, each with the roofline (default features,hybrid)")
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--patience", type=int, default=30)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--save", nargs="?", const=os.path.join(ROOT, "trained_models", "evaluation", "configuration_lofo.json"),
                   metavar="PATH", help="also write the result with its provenance (date, host, "
                   "command) to PATH (default trained_models/evaluation/configuration_lofo.json, "
                   "which reproduce.py --cards puts into the source's model card)")
    args = p.parse_args(argv)
    from driple.errors import DripleError
    from driple.predict.registry import resolve

    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    try:
        os.chdir(ROOT)  # datasets are recorded relative to the repository
        path, _ = resolve(args.setting, root=args.models_dir)
        out = inner_leave_family_out(str(path), candidates, args.epochs, args.patience,
                                     processes=args.processes)
    except DripleError as err:
        print(f"choose_configuration_lofo: error: {err}", file=sys.stderr)
        return 2
    if args.save:
        save(out, args.save, args.setting, argv)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{args.setting}: {out['jobs']} train + validation jobs, {len(out['families'])} families, "
          "each predicted by the candidates trained on the others (MAPE over the 13 targets)")
    for c in candidates:
        r = out[c]
        print(f"  {c}+roofline: median {r['median']:.1f} %, mean {r['mean']:.1f} %, step time {r['step_time']:.1f} %")
    print(f"chosen (lowest median): {out['chosen']}+roofline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
