"""The reproduction of the README's results: evaluation sections that each write a JSON file,
and the report (``results.md``, model cards, README blocks) made from them.
``scripts/reproduce.py`` runs :func:`driple.evaluation.reproduce.command.main`."""
