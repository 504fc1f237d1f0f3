"""Regenerate the README's results from datasets and the shipped inspectors (their configurations).

    python -m driple.evaluation                          # every section, then the report
    python -m driple.evaluation --sections accuracy      # one section; sections can run in
    python -m driple.evaluation --sections transfer      #  separate processes: each writes
    python -m driple.evaluation --report                 #  its JSON, --report merges them
    python -m driple.evaluation --datasets-dir /copy/of/data --work-dir /tmp/w --out /tmp/w/eval
    python -m driple.evaluation --jobs 4                 # the same, 4 processes side by side
    python -m driple.evaluation --report --cards --write-shipped   # the shipped report and cards

``python scripts/reproduce.py`` runs the same command with the same options.

Nothing shipped is written unless asked for by name: the JSON and ``results.md`` go to
``--out`` (default ``driple-evaluation/`` in the current directory); ``--write-shipped`` makes
the default ``<models dir>/evaluation`` (the shipped report, ``trained_models/evaluation/``)
and lets ``--cards`` write the shipped model cards; an ``--out`` inside the shipped files needs
it too. ``--readme FILE`` writes the file it names.

Sections (each writes ``<out>/<section>.json``):

- ``labels``: relabel every dataset's jobs from their raw files with both labellers
  (``driple collect relabel --labeller timeline|kmeans``): are the table's labels reproduced?
- ``retest``: per setting with a ``<setting>-retest`` dataset, both labellers: test-retest
  difference per label (the agreement rule of :mod:`driple.collect.retest`), worker agreement,
  and the noise floor (:mod:`driple.inspector.noise`); the retest jobs measured in other
  sessions (``<setting>-retest-<name>``) against the dataset (the host's drift between days);
  the same grid measured on another CPU model, label by label.
- ``accuracy``: per setting, every estimator (the shipped inspector's configuration, the
  baselines ``mean``, ``hgb``, ``knn``, the paper's ``gnn`` and any registered one) fitted on
  the same folds (:func:`driple.inspector.evaluate.evaluate` — what ``driple evaluate`` runs):
  a random split by architecture with the inspector's configuration trained on it (``driple
  evaluate --retrain``: it does not depend on the shipped weights, so it runs on datasets not
  shipped yet), and leave-one-family-out; per
  target NRMSE and MAPE beside the noise floor; interval coverage of each estimator on the
  test jobs, calibrated on the calibration jobs only. A transferred inspector's source is
  retrained per fold without what the fold holds out (``--no-retrain-source``: kept, and
  labelled "family seen in source"). On the family split also the calibration for models of
  an unseen family (:mod:`driple.predict.unseen`: roofline modes and intervals from the
  held-out jobs; ``scripts/calibrate_unseen_families.py`` ships it) and its cross-fitted check.
- ``outofzoo``: the shipped inspector of each ``--out-of-zoo`` set's setting on that set
  (default: :data:`DEFAULT_OUT_OF_ZOO`, architectures written by others, never trained on or
  chosen with: ``datasets/out-of-zoo`` in the source setting, the set the accuracy bars are about,
  and the same architectures in the parameter-server setting on its CPU model), beside the
  baselines fitted on that inspector's own training jobs (``driple evaluate --external``), with
  interval coverage; ``outofzoo.json`` for the source setting's set, ``outofzoo-<setting>.json``
  for another setting's.
- ``colocate``: every ``corun-<setting>`` dataset (``driple collect corun``) whose setting has
  an inspector: the pairs predicted with it and with the jobs' solo measurements, against what
  was measured while they ran together, and the confusion table of predicted fit ("packs well")
  against measured fit (no job slowed by more than 1.15x); ``scripts/eval_colocate.py``.
- ``transfer``: per target setting, fine-tuning (paper scheme, for a source with graph layers;
  MLP only) vs training from
  scratch at fractions of the target's training jobs; the source retrained without the
  target's test architectures (unless ``--no-retrain-source``).
- ``design``: grouping policy, repetitions K of the shared layer and target scaling on the
  source setting; chosen on validation NRMSE, test NRMSE reported beside it.

The report (``results.md`` beside the JSON files) holds the tables the README quotes.
A setting's dataset is the one ``<datasets-dir>/settings.json`` names (with the CPU model that
measured it; see :mod:`driple.setting_datasets`), else ``<datasets-dir>/<setting>``; its retest
and co-runs sit beside it. With ``--work-dir`` each ``results.csv`` is copied there first and
the graphs are built there, so the datasets directory is only read. Ctrl-C, SIGTERM or SIGHUP
stop a run (exit 130/143/129) with every child process stopped and the sections that finished
kept in ``<out>``.
"""
from __future__ import annotations

import argparse
import os
import sys

from driple.evaluation.reproduce.cards import write_cards
from driple.evaluation.reproduce import context
from driple.evaluation.reproduce.context import Context, ROOT, say
from driple.evaluation.reproduce.outofzoo import DEFAULT_OUT_OF_ZOO
from driple.evaluation.reproduce.readme import refresh_readme
from driple.evaluation.reproduce.report import report
from driple.evaluation.reproduce.run import SECTIONS, run_sections, run_side_by_side


#: Where the JSON and ``results.md`` go without ``--out`` or ``--write-shipped`` (relative to
#: the current directory): never a shipped file.
DEFAULT_OUT = "driple-evaluation"


def main(argv=None, prog: str | None = None) -> int:
    """Run the command line ``argv`` (default this process's); ``prog`` is how the command is
    called (``-m driple.evaluation``; default ``scripts/reproduce.py``), as the JSON records it.
    Returns the exit status: 0, 2 on an error, 129/130/143 when interrupted."""
    context.ARGV = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    if prog:
        context.PROG = prog
    p = argparse.ArgumentParser(prog=f"python {context.PROG}", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated among {', '.join(SECTIONS)} (default all)")
    p.add_argument("--report", action="store_true", help="only merge the section JSON into results.md")
    p.add_argument("--cards", action="store_true",
                   help="also write each setting's accuracy tables (every estimator per target, both "
                   "splits) into its model card (the shipped ones need --write-shipped)")
    p.add_argument("--write-shipped", "--overwrite-shipped", dest="write_shipped", action="store_true",
                   help="write into the shipped files: the default --out becomes <models dir>/evaluation "
                   "(the shipped report), and --cards may write the shipped model cards")
    p.add_argument("--readme", metavar="FILE",
                   help="also refresh the results blocks of FILE (e.g. README.md): each "
                   "'<!-- reproduce section: HEADING -->' ... '<!-- /reproduce -->' gets that "
                   "section of results.md ('mape:' its MAPE part); the prose around them is left alone")
    p.add_argument("--datasets-dir", "--datasets", dest="datasets_dir", default=os.path.join(ROOT, "datasets"),
                   help="datasets directory: its settings.json names each setting's dataset (else "
                   "<setting>/ and <setting>-retest/ in it); default: the shipped datasets/")
    p.add_argument("--models-dir", default=None,
                   help="registry of the inspectors whose configurations are evaluated (default: the shipped one)")
    p.add_argument("--out", default=None,
                   help=f"where the JSON and results.md go (default {DEFAULT_OUT}/ in the current "
                   "directory; with --write-shipped, <models dir>/evaluation)")
    p.add_argument("--work-dir", default=None,
                   help="copy each dataset's results.csv here and build its graphs here (the datasets "
                   "directory is then only read)")
    p.add_argument("--graph-cache", default=None, help="graph cache directory (default: beside the datasets)")
    p.add_argument("--settings", nargs="*", default=None, help="limit the sections to these settings")
    p.add_argument("--out-of-zoo", action="append", default=None, metavar="DIR",
                   help="outofzoo: a held-out set of architectures written by others, scored with the "
                   "shipped inspector of the setting its jobs ran in (repeatable, one set per setting; "
                   "default: " + ", ".join(f"datasets/{d}" for d in DEFAULT_OUT_OF_ZOO) + ", those measured)")
    p.add_argument("--splits", nargs="+", default=["random", "family"], choices=["random", "family"])
    p.add_argument("--merge-estimators", action="store_true",
                   help="accuracy: keep the estimators of the earlier accuracy.json in --out that this run "
                   "does not re-run (the inspector and --estimators are re-run; same folds required): "
                   "after an inspector change, --estimators roofline --merge-estimators refreshes it and its "
                   "roofline without training the other networks again")
    p.add_argument("--families", nargs="*", default=None,
                   help="accuracy: hold out only these families in the family split (smoke runs)")
    p.add_argument("--estimators", default="mean,hgb,hgb-priors,knn,analytic,roofline,roofline-overlap,gnn,features,hybrid,hybrid+hgb-priors",
                   help="accuracy: estimators beside the inspector (default: the full ablation, "
                   "mean,hgb,hgb-priors,knn,analytic,roofline,roofline-overlap,gnn,features,hybrid,hybrid+hgb-priors; any "
                   "registered one can be named; analytic scores step time only, roofline the durations "
                   "and step time, on labels v2; a column that is the "
                   "inspector's own configuration reuses its training)")
    p.add_argument("--no-retrain-source", action="store_true",
                   help="accuracy/transfer: keep the shipped source instead of retraining it without "
                   "what a fold holds out (results labelled 'seen in source')")
    p.add_argument("--seed", type=int, default=None,
                   help="accuracy: the seed of every split and (re)training (default: the shipped "
                   "inspector's, 0). Another seed, with --out elsewhere, measures how far a retraining "
                   "alone moves the figures (a family split's held-out jobs stay the same)")
    p.add_argument("--coverage", type=float, default=0.9, help="nominal interval coverage (default 0.9)")
    p.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.25, 0.5, 1.0])
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--groupings", nargs="+", default=["uniform", "proportional"],
                   help="grouping policies of the design study (default uniform proportional; "
                   "'none' keeps every op as a node: ~6-30x the training cost)")
    p.add_argument("--repeats", type=int, nargs="+", default=[5, 10, 20])
    p.add_argument("--scalings", nargs="+", default=["max", "log", "ln"], choices=["max", "standard", "log", "ln"],
                   help="design: target scalings compared on validation (default max log ln; the "
                   "shipped one is the base row; residuals over priors need ln, other scalings "
                   "predict the targets themselves)")
    p.add_argument("--keep", action="store_true",
                   help="design: keep the rows of an earlier run that this run does not redo")
    p.add_argument("--epochs", type=int, default=None,
                   help="epoch bound of every (re)training (default: the shipped inspector's)")
    p.add_argument("--patience", type=int, default=None, help="early-stopping patience of (re)trainings")
    p.add_argument("--target-scaling", default=None, choices=["max", "standard", "log"],
                   help="target scaling of (re)trainings (default: the shipped inspector's)")
    p.add_argument("--build-workers", type=int, default=1, help="processes building missing graphs")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run the sections as N processes side by side (the accuracy of each setting "
                   "in its own, the other sections in one more; graphs built first, JSON merged): "
                   "the whole reproduction in one command on N cores")
    p.add_argument("--labels", default=None, choices=["v1", "v2"],
                   help="read the datasets as this label version (default: the declared one, "
                   "driple.metrics.DECLARED_LABELS; datasets/v2 needs v2)")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    args.estimators = [e.strip() for e in args.estimators.split(",") if e.strip()]

    import torch

    from driple.errors import DripleError

    torch.set_num_threads(args.threads)
    if args.labels:
        from driple.metrics import use_labels

        use_labels(args.labels)
    if args.out is None and not args.write_shipped:
        args.out = DEFAULT_OUT
    try:
        ctx = Context(args)
        refuse_shipped_writes(ctx, args)
    except DripleError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    from driple import interrupts
    from driple.collect.interrupts import signals_as_interrupt

    interrupts.reset()
    try:
        with signals_as_interrupt():  # SIGTERM/SIGHUP stop it as Ctrl-C does (children too)
            _run(ctx, args)
    except DripleError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"reproduce: interrupted; finished sections are in {ctx.out}", file=sys.stderr)
        return interrupts.exit_status()
    return 0


def refuse_shipped_writes(ctx: Context, args) -> None:
    """Raise a :class:`DripleError` when this run would write shipped files (its output
    directory, or with ``--cards`` the model cards) without ``--write-shipped``."""
    from driple.errors import DripleError
    from driple.shipped import shipped_root

    if args.write_shipped:
        return
    if shipped_root(ctx.out) is not None:
        raise DripleError(f"--out {ctx.out} lies in the shipped files ({shipped_root(ctx.out)[0]}); "
                          "write to another directory or pass --write-shipped to write there")
    if args.cards and shipped_root(ctx.models) is not None:
        raise DripleError(f"--cards writes the model cards of the shipped inspectors in {ctx.models}; "
                          "pass --write-shipped to write them")


def _run(ctx: Context, args) -> None:
    """The run :func:`main` was asked for: sections (unless ``--report``), then results.md, the
    cards and the README."""
    from driple.errors import DripleError

    if not args.report:
        from driple.inspector.estimator_registry import make_estimator

        for name in args.estimators:
            make_estimator(name)  # unknown names fail before any work
        sections = [s.strip() for s in args.sections.split(",") if s.strip()]
        for section in sections:
            if section not in SECTIONS:
                raise DripleError(f"unknown section {section!r}; choose among {', '.join(SECTIONS)}")
        if args.jobs > 1:
            run_side_by_side(ctx, sections)
        else:
            run_sections(ctx, sections)
    text = report(ctx)
    os.makedirs(ctx.out, exist_ok=True)
    with open(os.path.join(ctx.out, "results.md"), "w") as f:
        f.write(text + "\n")
    print(text)
    if args.cards:
        for path in write_cards(ctx):
            say(f"model card updated: {path}")
    if args.readme:
        say(f"{args.readme}: {refresh_readme(args.readme, text)} results blocks refreshed")
