#!/usr/bin/env python
"""Choose the roofline's form on training and validation jobs only: the plain per-op-class sum
against the sum with communication partly hidden under compute (``overlap``), and that with a
cost per message of the strategy (``messages``: a collective call's wait, whatever its bytes).

    python scripts/choose_roofline_overlap.py              # every shipped inspector's jobs
    python scripts/choose_roofline_overlap.py --settings cpu-ddp-w2-1g --json

For each shipped inspector, its own split's train + validation jobs (never its calibration or
test jobs, never a family fold's test jobs) are split again by family: each family is predicted
by the roofline fitted on the others (an inner leave-one-family-out, the unseen-family case
without looking at the evaluation's test folds). Printed: the MAPE of the step time and the
median over the duration targets, per form, and each form's fitted overlap on all those jobs.
Fitting is milliseconds: the whole run takes seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: form: (overlap, messages)
FORMS = {"roofline": (False, False), "roofline-overlap": (True, False), "roofline-overlap-messages": (True, True)}


def inner_leave_family_out(setting: str, models_dir: str) -> dict:
    """``{form: {"step_time": MAPE %, "durations_median": %, "overlap": {target: alpha}}}`` plus
    the job and family counts, on the train + validation jobs of ``setting``'s shipped inspector."""
    import numpy as np

    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.evaluate import own_jobs
    from driple.inspector.roofline_estimator import RooflineEstimator
    from driple.predict.registry import resolve

    path, _ = resolve(setting, root=models_dir)
    inspector = load_inspector(str(path))
    ds, split = own_jobs(inspector)
    inner = np.array(sorted(split.train + split.val))
    family = np.array([ds[int(i)].family for i in inner])
    names = list(ds.target_names)
    y = np.asarray(ds.targets, dtype=np.float64)[inner]
    durations = [j for j, t in enumerate(names) if t.endswith("_duration") or t == "step_time"]
    out = {"jobs": int(len(inner)), "families": sorted(set(family))}
    for form, (overlap, messages) in FORMS.items():
        pred = np.full(y.shape, np.nan)
        for f in sorted(set(family)):
            fit_on, held = inner[family != f], inner[family == f]
            est = RooflineEstimator(host=inspector.host, overlap=overlap, messages=messages).fit(ds, fit_on)
            pred[family == f] = est.predict(ds, held)
        mape = {names[j]: float(np.nanmean(np.abs(pred[:, j] - y[:, j]) / y[:, j]) * 100)
                for j in durations if (y[:, j] > 0).all()}
        whole = RooflineEstimator(host=inspector.host, overlap=overlap, messages=messages).fit(ds, inner)
        out[form] = {"step_time": mape.get("step_time"), "durations_median": float(np.median(list(mape.values()))),
                     "mape": mape, "overlap": whole.member_.overlap}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"),
                   help="the shipped inspectors and their registry (default trained_models)")
    p.add_argument("--settings", nargs="*", default=None, help="only these settings (default: every shipped one)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = p.parse_args(argv)
    from driple.errors import DripleError
    from driple.predict.registry import list_settings, no_inspector_message

    os.chdir(ROOT)  # datasets are recorded relative to the repository
    try:
        models = Path(os.path.abspath(a.models_dir))
        settings = a.settings or sorted(e["setting"] for e in list_settings(models))
        if not settings:
            raise DripleError(no_inspector_message(models))
        done = {s: inner_leave_family_out(s, models) for s in settings}
    except DripleError as err:
        print(f"choose_roofline_overlap: error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(done, indent=2))
        return 0
    for s, r in done.items():
        print(f"{s}: {r['jobs']} train + validation jobs, {len(r['families'])} families, each predicted "
              "by the roofline fitted on the others")
        for form in FORMS:
            f = r[form]
            alphas = ", ".join(f"{t} {v:g}" for t, v in f["overlap"].items()) or "none"
            print(f"  {form:25s} step time MAPE {f['step_time']:5.1f} %, durations median {f['durations_median']:5.1f} %"
                  + (f"; overlap on all of them: {alphas}" if FORMS[form][0] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
