"""Input builder: a PyTorch training step → op graph (+ communication) → groups → ``Data``.

Modules in data-flow order: :mod:`trace` (fake-tensor trace of the whole step), :mod:`opgraph`
(networkx op graph), :mod:`comm` (DDP buckets / PS shards), :mod:`features` (op-frequency
code and per-op quantities), :mod:`grouping` (fluid communities), :mod:`build` (``Data``).
"""
