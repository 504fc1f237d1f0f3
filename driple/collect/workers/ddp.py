"""DDP all-reduce worker: gloo on CPU, NCCL on GPU.

Run as ``python -m driple.collect.workers.ddp --job JOB.json`` with the torch env contract
(the launcher sets it; ``torchrun --nproc-per-node=N -m driple.collect.workers.ddp --job ...``
works the same). Every rank trains the same model on its own synthetic batch, with one
compute thread. A comm hook wraps the all-reduce of each gradient bucket and logs it.

The number of measured iterations must be the same on every rank (an all-reduce waits for all):
unless the job fixes it, the ranks agree on it after warm-up from the slowest rank's
iteration time, so the measured part lasts about ``seconds``.
"""
from __future__ import annotations

import math
import statistics
import time
from datetime import timedelta
from pathlib import Path

from driple.collect.workers.common import (
    IterationLog,
    announce,
    device_for,
    die_with_parent,
    env_contract,
    parse_args,
    single_thread,
    sync,
    write_info,
)


class BucketRecorder:
    """Comm hook state: logs each bucket's size and all-reduce start/end (monotonic ns)."""

    def __init__(self, path: Path, process_group=None):
        self.process_group = process_group
        self.iteration = 0
        self._events: list[tuple] = []
        self._f = open(path, "w", buffering=1)

    def flush(self) -> None:
        events, self._events = self._events, []
        for ev in events:
            self._f.write(" ".join(str(v) for v in ev) + "\n")

    def close(self) -> None:
        self.flush()
        self._f.close()


def logged_allreduce_hook(state: BucketRecorder, bucket):
    """The default all-reduce (sum / world size), timed per bucket."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    buf = bucket.buffer()
    iteration, index, nbytes = state.iteration, bucket.index(), buf.numel() * buf.element_size()
    start = time.monotonic_ns()
    fut = allreduce_hook(state.process_group, bucket)

    def _done(f):
        state._events.append((iteration, index, nbytes, start, time.monotonic_ns()))
        return f.value()

    return fut.then(_done)


def main(argv=None) -> int:
    die_with_parent()  # no rank outlives its collector
    job = parse_args(argv)
    rank, world, local_rank = env_contract()
    name = f"worker{rank}"
    workdir = Path(job["workdir"])
    announce(workdir, name)
    single_thread()

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from driple.zoo.optim import make_optimizer
    from driple.zoo.workload import load_workload

    spec = job["spec"]
    device = device_for(job, local_rank)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=timedelta(seconds=float(job["timeout"])))

    torch.manual_seed(spec["seed"])
    workload = load_workload(spec["model"], spec["batch_size"], spec["knobs"])
    model = workload.model.to(device)
    ddp = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)
    recorder = BucketRecorder(workdir / f"{name}.buckets")
    ddp.register_comm_hook(recorder, logged_allreduce_hook)
    optimizer = make_optimizer(spec["optimizer"], ddp.parameters(), lr=spec["lr"])
    gen = torch.Generator().manual_seed(spec["seed"] + rank)
    inputs, targets = workload.make_batch(spec["batch_size"], generator=gen, device=device)
    write_info(workdir, name, workload, model, inputs)

    log = IterationLog(workdir / f"{name}.iters")

    def step() -> int:
        log.start()
        optimizer.zero_grad(set_to_none=True)
        loss = workload.loss_fn(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        sync(device)
        recorder.iteration += 1
        took = log.end()
        recorder.flush()
        return took

    warm = [step() for _ in range(spec["warmup"])]
    iterations = spec["iterations"]
    if iterations is None:
        typical = statistics.median(warm[len(warm) // 2:])
        slowest = torch.tensor([float(typical)], device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        iterations = max(1, math.ceil(float(job["seconds"]) * 1e9 / slowest.item()))
    for _ in range(iterations):
        step()
    log.close()
    recorder.close()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
