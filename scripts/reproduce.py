#!/usr/bin/env python
"""Regenerate the README's results from datasets and the shipped inspectors (their configurations).

    python scripts/reproduce.py                          # every section, then the report
    python scripts/reproduce.py --sections accuracy      # one section (writes its JSON)
    python scripts/reproduce.py --report                 # merge the sections' JSON into results.md
    python scripts/reproduce.py --jobs 4                 # the sections as 4 processes side by side

``--help`` lists every section and option; the logic is :mod:`driple.evaluation.reproduce`.
"""
import sys

from driple.evaluation.reproduce.command import main

if __name__ == "__main__":
    sys.exit(main())
