"""Input builder: a PyTorch training step → op graph (+ communication) → groups → ``Data``.

Modules in data-flow order: :mod:`trace` (fake-tensor trace of the whole step), :mod:`opgraph`
(networkx op graph; :mod:`flops` the FLOP formulas it records), :mod:`comm` (DDP buckets / PS shards), :mod:`features` (op-frequency
code and per-op quantities), :mod:`grouping` (fluid communities), :mod:`build` (``Data``);
beside them :mod:`summary_features` (graph-level features and physical priors) and
:mod:`host_speed` (the host figures the priors divide by).
"""

# Bump when a change to the builder (or the zoo) changes the graphs it makes for the same job:
# cached graphs (driple.inspector.dataset) are keyed by it, not by the source text.
BUILDER_VERSION = 5  # 2: fluid communities independent of PYTHONHASHSEED; 3: grouped convolutions'
#                       backward FLOPs counted with their groups; 4: fused recurrent layers
#                       (LSTM on CPU and GPU) counted per weight and token (driple.graph.flops);
#                       5: ops returning a view of an input do no work in the graph-level features
