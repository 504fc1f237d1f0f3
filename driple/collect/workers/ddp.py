"""DDP all-reduce worker: gloo on CPU, NCCL on GPU.

Run as ``python -m driple.collect.workers.ddp --job JOB.json`` with the torch env contract
(the launcher sets it; ``torchrun --nproc-per-node=N -m driple.collect.workers.ddp --job ...``
works the same). Every rank trains the same model on its own synthetic batch, with one
compute thread, and records its timeline (:mod:`driple.collect.timeline.recorder`).

On CPU hosts a comm hook hands each gradient bucket to :class:`TimedAllReduce`, a thread of
the worker's own that all-reduces it (gloo, a process group of its own) and times it; on GPUs
DDP's own NCCL all-reduce runs and a profiler window records kernels and NCCL instead.

Why a thread and not ``future.then(callback)``: a Python callback chained on gloo's future is
held by a gloo thread; the future completes (and the main thread can reach interpreter
shutdown) before that thread lets go of it, and the gloo thread then needs the GIL during
finalisation: "terminate called without an active exception", SIGABRT. Here no Python object
is held by a thread we do not own: the comm thread is stopped and joined, the DDP module
dropped and the process group destroyed before the worker ends, and it ends with
``os._exit`` after flushing, so interpreter finalisation never races a library thread.

The number of measured iterations must be the same on every rank (an all-reduce waits for all):
:func:`~driple.collect.workers.common.measure_collectively` has the ranks agree on it.
"""
from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

from driple.collect.workers.common import (
    IterationLog,
    end_collective_rank,
    measure_collectively,
    run_and_exit,
    start_collective_rank,
    sync,
    write_info,
)


class TimedAllReduce:
    """DDP comm-hook state: all-reduces buckets in order on its own thread, timing each.

    Each bucket's ``(iteration, index, bytes, start_ns, end_ns)`` goes to :attr:`events` and
    to the recorder as an all-reduce interval. The hook returns a plain
    ``torch.futures.Future`` that the thread completes with the averaged bucket.
    """

    def __init__(self, process_group, world_size: int, recorder=None):
        self.process_group = process_group
        self.world_size = world_size
        self.recorder = recorder
        self.iteration = 0  # used when there is no recorder
        self.events: list[tuple] = []
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="driple-allreduce", daemon=True)
        self._thread.start()

    def submit(self, bucket):
        import torch

        fut = torch.futures.Future()
        iteration = self.recorder.iteration if self.recorder is not None else self.iteration
        self._queue.put((iteration, bucket.index(), bucket.buffer(), fut))
        return fut

    def _run(self) -> None:
        import torch.distributed as dist

        from driple.collect.timeline.record import COMM_KINDS

        while True:
            item = self._queue.get()
            if item is None:
                return
            iteration, index, buf, fut = item
            try:
                start = time.monotonic_ns()
                dist.all_reduce(buf, group=self.process_group)
                end = time.monotonic_ns()
                buf.div_(self.world_size)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread via the future
                self.error = exc
                fut.set_exception(exc)
                continue
            nbytes = buf.numel() * buf.element_size()
            self.events.append((iteration, index, nbytes, start, end))
            if self.recorder is not None:
                self.recorder.add_comm(COMM_KINDS["allreduce"], start, end, nbytes, nbytes,
                                       iteration=iteration)
            fut.set_result(buf)

    def close(self, timeout: float = 10.0) -> None:
        """Stop and join the thread (it finishes the buckets already handed to it)."""
        self._queue.put(None)
        self._thread.join(timeout)


def timed_allreduce_hook(state: TimedAllReduce, bucket):
    """The comm hook: hand the bucket to ``state``'s thread (sum / world size, as DDP's default)."""
    return state.submit(bucket)


class BucketLog:
    """``<name>.buckets``: one line per bucket ``iteration bucket bytes start_ns end_ns``."""

    def __init__(self, path: Path):
        self._f = open(path, "w", buffering=1)
        self._written = 0

    def flush(self, events: list) -> None:
        new, self._written = events[self._written:], len(events)
        for ev in new:
            self._f.write(" ".join(str(v) for v in ev) + "\n")

    def close(self, events: list) -> None:
        self.flush(events)
        self._f.close()


def run(job: dict) -> int:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from driple.collect.timeline.record import COMM_KINDS
    from driple.zoo.optim import make_optimizer
    from driple.zoo.workload import step_loss

    me = start_collective_rank(job)
    rank, world, name, workdir, spec, device = me.rank, me.world, me.name, me.workdir, me.spec, me.device
    workload, model, recorder, use_profiler = me.workload, me.model, me.recorder, me.use_profiler
    ddp = DDP(model, device_ids=[me.local_rank] if device.type == "cuda" else None)
    comm = None
    if device.type != "cuda":
        comm = TimedAllReduce(dist.new_group(backend="gloo"), world, recorder)
        ddp.register_comm_hook(comm, timed_allreduce_hook)
    if not use_profiler:
        recorder.watch(model.parameters())
    if ddp.will_sync_module_buffers():  # DDP broadcasts buffers (e.g. BatchNorm) before forward
        buffer_bytes = sum(b.numel() * b.element_size() for b in model.buffers())
        sync_start = []

        def _sync_begins(_mod, _args):
            sync_start.append(time.monotonic_ns())
            recorder.compute_off(sync_start[-1])

        def _sync_ends(_mod, _args):
            if sync_start:
                now = time.monotonic_ns()
                recorder.add_comm(COMM_KINDS["broadcast"], sync_start.pop(), now,
                                  buffer_bytes if rank == 0 else 0, 0 if rank == 0 else buffer_bytes)
                recorder.compute_on(now)

        ddp.register_forward_pre_hook(_sync_begins)
        model.register_forward_pre_hook(_sync_ends)

    optimizer = make_optimizer(spec["optimizer"], ddp.parameters(), lr=spec["lr"])
    inputs, targets = me.make_batch()
    write_info(workdir, name, workload, model, inputs)

    log = IterationLog(workdir / f"{name}.iters")
    buckets = BucketLog(workdir / f"{name}.buckets")
    events = comm.events if comm is not None else []

    def step() -> int:
        start = recorder.begin_iteration()
        log.start(start)
        optimizer.zero_grad(set_to_none=True)
        loss = step_loss(ddp, inputs, targets, workload.loss_fn)  # model(**inputs) for a dict
        loss.backward()  # returns once every bucket is all-reduced: the wait ends here
        if recorder.last_grad_ns is not None:  # compute ended with the last gradient
            recorder.compute_off(recorder.last_grad_ns)
            recorder.compute_on()
        optimizer.step()
        sync(device)
        took = log.end(recorder.end_iteration())
        buckets.flush(events)
        return took

    measure_collectively(job, name, step, device, recorder if use_profiler else None)
    log.close()
    recorder.save(workdir)
    if comm is not None:
        comm.close()
    buckets.close(events)
    ddp = optimizer = None  # drop DDP (its reducer holds the comm hook) before the group goes
    end_collective_rank()
    return 0


def main(argv=None) -> None:
    run_and_exit(run, argv)


if __name__ == "__main__":
    main()
