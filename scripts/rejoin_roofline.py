#!/usr/bin/env python
"""Score the shipped inspectors' evaluation again with a changed roofline, their networks not
retrained: seconds instead of the evaluation's hours.

    python scripts/rejoin_roofline.py                              # as evaluated: a check
    python scripts/rejoin_roofline.py --terms physical             # a roofline variant
    python scripts/rejoin_roofline.py --settings cpu-ddp-w2-lo --no-overlap --json
    python scripts/rejoin_roofline.py --messages                   # with the cost per message

The evaluation (``python scripts/reproduce.py --sections accuracy``) keeps, per fold, the
inspector's network predictions before its roofline was joined (``network_predictions`` in
``accuracy.json``). Here each fold gets a roofline fitted again on its
training jobs with the options given, its modes chosen on the fold's validation jobs with the
network's validation predictions, joined to its test predictions
(:func:`driple.inspector.roofline_estimator.rejoin`), and the pooled errors are printed beside
the evaluation's own. With the shipped options the figures are the evaluation's (the first
check to make); a variant that wins here is then worth the full evaluation and a reship.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from driple.shipped import require_checkout

require_checkout(__file__)  # it writes this checkout's trained_models/, never another's
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rejoined_scores(setting: str, entry: dict, datasets_dir: str, models_dir: str, overlap: bool, terms: str,
                    messages=None) -> dict:
    """Pooled score table of the rejoined predictions of one split's ``entry`` of accuracy.json."""
    import numpy as np

    from driple.errors import DripleError
    from driple.evaluation.rejoin import shipped_rejoin
    from driple.inspector.scores import score_table

    folds = entry.get("network_predictions")
    if not folds:
        raise DripleError("the evaluation kept no network predictions for it (an inspector without "
                          "a roofline, or an evaluation that predates them): run python "
                          "scripts/reproduce.py --sections accuracy")
    dataset, per_fold = shipped_rejoin(setting, folds, datasets_dir, models_dir, overlap=overlap, terms=terms,
                                       messages=messages)
    predicted = np.concatenate(per_fold)
    index = {j: i for i, j in enumerate(dataset.job_ids)}
    measured = np.asarray(dataset.targets, dtype=np.float64)[[index[j] for f in folds for j in f["test_job_ids"]]]
    return score_table(measured, predicted, list(dataset.target_names))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--evaluation", default=os.path.join(ROOT, "trained_models", "evaluation"),
                   help="directory of the evaluation's accuracy.json (default trained_models/evaluation)")
    p.add_argument("--models-dir", default=os.path.join(ROOT, "trained_models"))
    p.add_argument("--datasets-dir", default=os.path.join(ROOT, "datasets"),
                   help="where the settings' datasets are (default: the shipped datasets/)")
    p.add_argument("--settings", nargs="*", default=None, help="only these settings (default: every one evaluated)")
    p.add_argument("--split", default="family", choices=["family", "random"])
    p.add_argument("--terms", default="all", choices=["all", "physical"],
                   help="the roofline's terms (driple.inspector.roofline; default all, as shipped)")
    p.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=True,
                   help="fit the overlap of communication and compute (default on, as shipped)")
    p.add_argument("--messages", action=argparse.BooleanOptionalAction, default=None,
                   help="fit the cost per message of the strategy (default: as the shipped roofline was)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    from driple.errors import DripleError
    from driple.inspector.scores import table_summary

    out = {}
    try:
        file = os.path.join(a.evaluation, "accuracy.json")
        try:
            with open(file) as f:
                settings = json.load(f).get("settings") or {}
        except (OSError, ValueError) as err:
            raise DripleError(f"cannot read {file}: {err}") from None
        for setting in a.settings or sorted(settings):
            entry = (settings.get(setting) or {}).get(a.split)
            if not entry:
                raise DripleError(f"{file} has no {a.split} split of {setting}")
            try:
                scores = rejoined_scores(setting, entry, a.datasets_dir, a.models_dir, a.overlap, a.terms, a.messages)
            except DripleError as err:
                raise DripleError(f"{setting}: {err}") from None
            mine, was = table_summary(scores), table_summary(entry["scores"]["inspector"])
            out[setting] = {"scores": scores, "step_time_mape": mine["step_time_mape"],
                            "median_mape": mine["mape_median"], "evaluated_step_time_mape": was["step_time_mape"],
                            "evaluated_median_mape": was["mape_median"]}
    except DripleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps({"terms": a.terms, "overlap": a.overlap, "messages": a.messages, "split": a.split,
                          "settings": out}, indent=2))
        return 0
    messages = "as shipped" if a.messages is None else ("on" if a.messages else "off")
    print(f"roofline terms {a.terms}, overlap {'on' if a.overlap else 'off'}, messages {messages}; {a.split} split; "
          "MAPE %, rejoined (as evaluated)")
    for setting, r in out.items():
        print(f"{setting}: step time {r['step_time_mape']:.2f} ({r['evaluated_step_time_mape']:.2f}), "
              f"median over the targets {r['median_mape']:.2f} ({r['evaluated_median_mape']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
