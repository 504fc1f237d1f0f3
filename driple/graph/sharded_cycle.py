"""The sample points of a sharded (FSDP2) worker's step: where its collector reads memory, what
it reads there, and how many collectives came before each point.

An FSDP worker's training thread waits in every all-gather and reduce-scatter (gloo on a CPU
host), and its collector reads allocated bytes at module boundaries of the forward pass and on
both sides of each collective; the parameters it watches are replaced by sharded ones, so no
gradient hook fires in the backward pass. What FSDP2 holds, as measured with a two-rank
``fully_shard`` (glibc in-use bytes; see docs/memory.md):

- a unit's all-gather allocates an output buffer of the unit's full size before it runs; the
  copy-out then makes the unit's full parameters beside their shard. In the forward pass the
  buffer stays until the next unit's all-gather is done (a root that is the only unit: until
  its forward ends); in the backward pass it goes at once;
- a block unit is resharded after its forward (at the next unit's gather) and after its
  backward (its reduce-scatter); the root stays gathered from its forward to its
  reduce-scatter;
- the backward pass prefetches: the first two units' gathers run at its start, and each
  further unit's right after the reduce-scatter of the unit two before it;
- a reduce-scatter copies the unit's full gradients into an input buffer of the unit's size
  and frees them; the buffer lives while the collective runs, the shard stays.
"""
from __future__ import annotations

import numpy as np


def sharded_points(traced, units: list, workers: int, forward: np.ndarray, live: np.ndarray,
                   loss: int, plateaus: np.ndarray) -> list:
    """``[(position, level, calls before, bytes before), ...]`` in step order: the level at each
    point where the collector reads a sharded worker's memory (``forward``: the forward pass's
    floor, ``live``: the live bytes of the sharded step, :func:`driple.graph.memory.step_parts`;
    ``loss``: the loss's position; ``plateaus``: the forward's module-boundary points), and the
    collectives (their count and their units' bytes) the worker waited in before it. ``units``:
    the strategy's ``[(name, parameter indices)]`` sharded over ``workers``."""
    nodes = list(traced.graph_module.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    size = [int(sum(traced.param_bytes[i] for i in params)) for _, params in units]
    read_at: dict = {}  # each parameter's first reader in the forward pass
    for i, n in enumerate(nodes[: loss + 1]):
        for a in n.all_input_nodes:
            read_at.setdefault(a, i)
    first_use, scatter_at = {}, {}
    for k, (_name, params) in enumerate(units):
        uses = [read_at[traced.param_nodes[i]] for i in params if traced.param_nodes[i] in read_at]
        grads = [position[traced.grad_nodes[i]] for i in params if traced.grad_nodes[i] in position]
        if uses and grads:  # a unit never called gathers and scatters nothing
            first_use[k], scatter_at[k] = min(uses), max(grads)
    root = [k for k in first_use if not units[k][0]]
    blocks = sorted((k for k in first_use if units[k][0]), key=lambda k: first_use[k])
    # (position, order at that position, event, unit): reshards first, then scatters, then gathers
    events = [(0 if k in root else first_use[k], 2, "gather", k) for k in first_use]  # the root: as the model is called
    events += [(scatter_at[k], 1, "scatter", k) for k in first_use]
    events += [(first_use[nxt], 0, "reshard", k) for k, nxt in zip(blocks, blocks[1:])]
    if blocks:
        events.append((loss, 0, "reshard", blocks[-1]))
    else:
        events += [(loss, 0, "forward_end", k) for k in root]
    backward = sorted(blocks, key=lambda k: scatter_at[k])
    for j, k in enumerate(backward):  # prefetched: two at the start, then one per scatter
        events.append((loss if j <= 1 else scatter_at[backward[j - 2]], 3 + j / (len(backward) + 1), "gather_bwd", k))
    events.sort(key=lambda e: (e[0], e[1]))

    gathered, buffers, scatter_input = set(), [], 0
    calls, moved, out = 0, 0, []

    def held() -> int:
        return sum(size[k] for k in gathered) + sum(size[k] for k in buffers) + scatter_input

    def base(i: int) -> float:
        return float(forward[i] if i <= loss else live[i])

    plateaus = {int(p) for p in plateaus}
    at = {}
    for e in events:
        at.setdefault(e[0], []).append(e)
    for i in sorted(set(at) | plateaus):
        for _, _, kind, k in at.get(i, ()):
            if kind in ("gather", "gather_bwd"):
                buffers.append(k)
                out.append((i, base(i) + held(), calls, moved))  # read as it starts: held while it runs
                calls, moved = calls + 1, moved + size[k]
                out.append((i, base(i) + held(), calls, moved))
                gathered.add(k)  # copied out: first read at the next module boundary or collective
                buffers = [k] if kind == "gather" else []
            elif kind == "reshard":
                gathered.discard(k)
            elif kind == "forward_end":
                buffers = []
            else:  # the scatter: resharded, the gradients copied into its input and freed
                gathered.discard(k)
                scatter_input = size[k]
                after = float(live[i]) - size[k] + size[k] // max(int(workers), 1)  # its shard stays
                out.append((i, after + held(), calls, moved))
                calls, moved = calls + 1, moved + size[k]
                out.append((i, after + held(), calls, moved))
                scatter_input = 0
        if i <= loss and i in plateaus:
            out.append((i, float(forward[i]) + held(), calls, moved))
    return out
