"""``python -m driple`` is the same as the ``driple`` console script."""
import sys

from driple.cli import main

sys.exit(main())
