#!/usr/bin/env python
"""Train the shipped inspectors from the shipped datasets and register them in trained_models/.

The source setting's inspector is trained from scratch; every target setting's is transferred
from it with the paper's scheme (first half of the shared layer's repetitions frozen, the rest
and the MLP fine-tuned). Each gets split-conformal intervals calibrated on its validation jobs,
their coverage measured on its test jobs, a model card and a checksum in the registry.

    python scripts/ship_inspectors.py                   # as shipped: hybrid + roofline, all three settings, ~3 min
    python scripts/ship_inspectors.py --targets ""      # the source only
    python scripts/ship_inspectors.py --reuse-source    # keep the shipped source, re-ship targets
    python scripts/ship_inspectors.py --model gnn --no-roofline   # the paper's graph network alone
    python scripts/ship_inspectors.py --select-models gnn,hybrid,features   # chosen on validation
    python scripts/ship_inspectors.py --select-models features,hybrid --select-by lofo   # for unseen families

``--model`` / ``--select-models`` name presets of :func:`driple.inspector.train.preset` (``gnn``:
the paper's; ``hybrid``: residuals over physical priors; ``hybrid-plain``; ``features``); the
choice is made on the source's validation jobs only and recorded in the checkpoint; with
``--select-by lofo`` on an inner leave-family-out of its train + validation jobs instead
(:mod:`driple.inspector.family_choice`: which preset, with the roofline, predicts a family it
never trained on best; the shipped hybrid was chosen so, in two scripts).
Intervals are calibrated on the split's calibration jobs when it has them (else validation).

With ``--reuse-source`` the shipped source inspector is kept as it is (its card and scores
stand); if its checkpoint predates the recorded label range, the range of its own training
jobs is added to it (no retraining) and its checksum re-registered.
"""
import argparse
import os
import sys

from driple.shipped import require_checkout

require_checkout(__file__)  # it writes this checkout's trained_models/, never another's

from driple.shipping.settings import ship_settings  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", default="cpu-ddp-w2-lo")
    p.add_argument("--targets", default="cpu-ddp-w2-1g,cpu-ps-p1w2-1g",
                   help="comma-separated target settings (default: both 1g settings)")
    p.add_argument("--datasets", default=os.path.join(ROOT, "datasets"),
                   help="datasets directory: its settings.json names each setting's dataset and CPU "
                   "model (else <setting>/ in it); default: the shipped datasets/")
    p.add_argument("--out", default=os.path.join(ROOT, "trained_models"))
    p.add_argument("--groups", type=int, default=100)
    p.add_argument("--grouping", default="uniform")
    p.add_argument("--repeats", type=int, default=10, help="K (default 10; see the design study)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--graph-attr", action="store_true",
                   help="feed graph-level attributes to the MLP head (not in the paper)")
    p.add_argument("--select-graph-attr", action="store_true",
                   help="train the source with and without graph-level attributes (in parallel) and "
                   "keep the one with the lower validation NRMSE")
    p.add_argument("--reuse-source", action="store_true",
                   help="transfer from the shipped source inspector instead of training it again")
    p.add_argument("--epochs", type=int, default=300)
    p.add_argument("--patience", type=int, default=30)
    p.add_argument("--ema", type=float, default=None, metavar="DECAY",
                   help="moving average of the weights kept (default: the preset's; 0.995 for "
                   "hybrid, 0 for the others)")
    p.add_argument("--networks", type=int, default=None, metavar="N",
                   help="networks trained alone and averaged (default: the preset's)")
    p.add_argument("--target-scaling", default=None,
                   help="default: the preset's (max for gnn, ln for the others)")
    p.add_argument("--model", default="hybrid",
                   help="preset of the source inspector: gnn (the paper's), gnn-ln, hybrid, hybrid-plain, "
                   "features (default hybrid: what is shipped, chosen by choose_configuration_lofo.py)")
    p.add_argument("--select-models", default=None, metavar="A,B,...",
                   help="train these presets on the source and keep the lowest validation mean MAPE")
    p.add_argument("--select-by", default="validation", choices=["validation", "lofo"],
                   help="how --select-models chooses: validation (lowest validation mean MAPE, the default) "
                   "or lofo (lowest median MAPE in an inner leave-family-out on the source's train + "
                   "validation jobs, each preset as it defines itself, with the roofline: the choice for a "
                   "model of a family it never trained on; also written to <out>/evaluation/configuration_lofo.json)")
    p.add_argument("--processes", type=int, default=2,
                   help="processes for the candidates side by side and the inner leave-family-out (default 2)")
    p.add_argument("--trees", action="store_true",
                   help="also consider every candidate averaged with gradient-boosted trees on its "
                   "graph-level inputs (hgb-priors, stored in the checkpoint); kept if better on "
                   "validation; a transferred target then refits its own trees")
    p.add_argument("--roofline", action=argparse.BooleanOptionalAction, default=True,
                   help="also consider every candidate with the per-op-class roofline joined into its "
                   "durations (driple.inspector.roofline; per duration: inspector, roofline or their "
                   "mean, chosen on validation); a transferred target then refits its own (default on, "
                   "as shipped; --no-roofline for the networks alone)")
    p.add_argument("--coverage", type=float, default=0.9, help="nominal interval coverage (default 0.9)")
    p.add_argument("--build-workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    return ship_settings(args, argv)


if __name__ == "__main__":
    sys.exit(main())
