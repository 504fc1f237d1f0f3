"""Build-time code that makes the shipped inspectors (what ``scripts/ship_inspectors.py``,
``calibrate_unseen_families.py`` and ``refit_roofline.py`` run; never needed to predict):

| module | what |
|---|---|
| :mod:`ship` | one trained inspector made a shipped one: calibrated intervals, model card, scores, a registry entry with its checksum |
| :mod:`settings` | every setting's inspector trained from the shipped datasets (the source from scratch, each target transferred from it) and shipped |
| :mod:`unseen_families` | the calibration for model families an inspector did not train on, from the evaluation's held-out families, written into the shipped checkpoints |

It stands above :mod:`driple.predict` (whose registry it writes) beside :mod:`driple.schedule`;
nothing under ``predict`` imports it.
"""
