"""Input builder: a PyTorch training step → op graph (+ communication) → groups → ``Data``.

Modules in data-flow order: :mod:`trace` (fake-tensor trace of the whole step), :mod:`opgraph`
(networkx op graph; :mod:`flops` the FLOP formulas it records), :mod:`comm` (DDP buckets / PS shards), :mod:`features` (op-frequency
code and per-op quantities), :mod:`grouping` (fluid communities), :mod:`build` (``Data``);
beside them :mod:`summary_features` (graph-level features and physical priors) and
:mod:`driple.hardware.host_speed` (the host figures the priors divide by).
"""

# Bump when a change to the builder (or the zoo) changes the graphs it makes for the same job:
# cached graphs (driple.inspector.dataset) are keyed by it, not by the source text.
# What each version changed is in CHANGELOG.md ("Builder versions").
BUILDER_VERSION = 5
