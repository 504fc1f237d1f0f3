#!/usr/bin/env python
"""Regenerate the report from datasets and the shipped inspectors (their configurations); the
same command as ``python -m driple.evaluation``.

    python scripts/reproduce.py                          # every section, then the report
    python scripts/reproduce.py --sections accuracy      # one section (writes its JSON)
    python scripts/reproduce.py --report                 # merge the sections' JSON into results.md
    python scripts/reproduce.py --jobs 4                 # the sections as 4 processes side by side
    python scripts/reproduce.py --report --cards --write-shipped   # the shipped report and cards

Without ``--write-shipped`` or ``--out`` it writes into ``driple-evaluation/`` here, never a
shipped file. ``--help`` lists every section and option; the logic is
:mod:`driple.evaluation.reproduce`.
"""
import sys

from driple.shipped import require_checkout

require_checkout(__file__)  # with --write-shipped it writes this checkout's trained_models/, never another's

from driple.evaluation.reproduce.command import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
