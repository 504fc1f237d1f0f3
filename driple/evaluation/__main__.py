"""``python -m driple.evaluation``: regenerate the report (what ``scripts/reproduce.py`` runs,
with the same options; ``--help`` lists them). Writes no shipped file unless given
``--write-shipped``."""
import sys

from driple.evaluation.reproduce.command import main

if __name__ == "__main__":
    sys.exit(main(prog="-m driple.evaluation"))
