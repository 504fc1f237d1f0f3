"""FSDP worker: PyTorch's ``fully_shard`` (FSDP2), gloo on CPU, NCCL on GPU.

Run as ``python -m driple.collect.workers.fsdp --job JOB.json`` with the torch env contract
(the launcher or ``torchrun``). Every rank trains the same model on its own synthetic batch,
with one compute thread, and records its timeline (:mod:`driple.collect.timeline.recorder`).

The model is wrapped unit by unit as :func:`driple.strategies.fsdp.unit_names` says (deepest
first, then the root), so the job shards exactly as the graph builder and the memory
simulator assume. On a CPU host FSDP2's all-gathers and reduce-scatters run on the training
thread and return when done (no streams); a custom all-gather and reduce-scatter
(``set_custom_all_gather``/``set_custom_reduce_scatter``, FSDP2's own extension point) time
each call, mark the training thread idle meanwhile and sample memory on both sides. On GPUs
the collectives run on their own streams; a profiler window records kernels and NCCL instead.
"""
from __future__ import annotations

import time

from driple.collect.workers.common import (
    IterationLog,
    end_collective_rank,
    measure_collectively,
    run_and_exit,
    start_collective_rank,
    sync,
    write_info,
)


def timed_collectives(recorder):
    """``(all_gather, reduce_scatter)``: FSDP2's default collectives, each call timed into
    ``recorder`` as a communication interval (bytes: what this rank sends and receives in a
    ring, (W-1)/W of the unit) during which the training thread does not compute."""
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter

    from driple.collect.timeline.record import COMM_KINDS

    def timed(kind, call, full_bytes, shard_bytes):
        start = time.monotonic_ns()
        recorder.compute_off(start)
        recorder.sample_memory(start)
        work = call()
        end = time.monotonic_ns()
        moved = full_bytes - shard_bytes
        recorder.add_comm(COMM_KINDS[kind], start, end, moved, moved)
        recorder.sample_memory(end)
        recorder.compute_on(end)
        return work

    def nbytes(t):
        return t.numel() * t.element_size()

    class TimedAllGather(DefaultAllGather):
        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            return timed("allgather", lambda: super(TimedAllGather, self).__call__(
                output_tensor, input_tensor, group, async_op), nbytes(output_tensor), nbytes(input_tensor))

    class TimedReduceScatter(DefaultReduceScatter):
        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            return timed("reducescatter", lambda: super(TimedReduceScatter, self).__call__(
                output_tensor, input_tensor, group, op, async_op), nbytes(input_tensor), nbytes(output_tensor))

    return TimedAllGather(), TimedReduceScatter()


def shard_model(model, device_mesh=None) -> list[str]:
    """``fully_shard`` every unit of ``model`` (deepest first), then the root; returns the
    units' names (``""``: the root)."""
    from torch.distributed.fsdp import fully_shard

    from driple.strategies.fsdp import unit_names

    names = unit_names([n for n, p in model.named_parameters() if p.requires_grad])
    for unit in sorted((n for n in names if n), key=lambda n: -n.count(".")):
        fully_shard(model.get_submodule(unit), mesh=device_mesh)
    fully_shard(model, mesh=device_mesh)
    return names


def run(job: dict) -> int:
    from torch.distributed.fsdp import FSDPModule

    from driple.zoo.optim import make_optimizer
    from driple.zoo.workload import step_loss

    me = start_collective_rank(job)
    name, workdir, spec, device = me.name, me.workdir, me.spec, me.device
    workload, model, recorder, use_profiler = me.workload, me.model, me.recorder, me.use_profiler
    if not use_profiler:
        recorder.watch(model.parameters())  # before sharding: the hooks see every module call
    units = shard_model(model)
    if not use_profiler:
        all_gather, reduce_scatter = timed_collectives(recorder)
        for module in model.modules():
            if isinstance(module, FSDPModule):
                module.set_custom_all_gather(all_gather)
                module.set_custom_reduce_scatter(reduce_scatter)

    optimizer = make_optimizer(spec["optimizer"], model.parameters(), lr=spec["lr"])
    inputs, targets = me.make_batch()
    write_info(workdir, name, workload, model, inputs, fsdp_units=units)

    log = IterationLog(workdir / f"{name}.iters")

    def step() -> int:
        start = recorder.begin_iteration()
        log.start(start)
        optimizer.zero_grad(set_to_none=True)
        loss = step_loss(model, inputs, targets, workload.loss_fn)
        loss.backward()  # all-gathers before each unit's backward, reduce-scatters after it
        optimizer.step()  # on this rank's shards
        sync(device)
        return log.end(recorder.end_iteration())

    measure_collectively(job, name, step, device, recorder if use_profiler else None)
    log.close()
    recorder.save(workdir)
    model = optimizer = None
    end_collective_rank()
    return 0


def main(argv=None) -> None:
    run_and_exit(run, argv)


if __name__ == "__main__":
    main()
