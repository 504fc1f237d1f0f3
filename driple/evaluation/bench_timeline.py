"""What recording a timeline costs a training step: marks vs torch.profiler vs nothing, side by
side in two gloo DDP ranks (``scripts/bench_timeline_overhead.py`` parses its options and prints
:func:`bench` per job; its docstring says what each mode records).
"""
from __future__ import annotations

import copy
import os
import socket
import statistics
import time

# the zoo's median job (median estimated step of the source grid: AlexNet at half width on
# 128x128 images, batch 32, Adam) first, then a few others
DEFAULT_JOBS = ["alexnet,width=0.5,image_size=128,bs=32,opt=adam", "mlp,bs=64", "resnet,bs=32", "gpt,bs=8"]
MODES = ("plain", "marks", "profiler")


def _parse(job: str) -> tuple[str, dict, int, str]:
    """``MODEL[,knob=v...][,bs=N][,opt=NAME]`` (the job syntax of ``driple colocate``)."""
    from driple.collect.job import JobSpec

    spec = JobSpec.parse(job)
    return spec.model, spec.knobs, spec.batch_size or 32, spec.optimizer


def _rank(rank: int, world: int, port: int, job: str, rounds: int, window: int, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world))
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile

    from driple.collect.timeline.recorder import TimelineRecorder
    from driple.collect.workers.ddp import TimedAllReduce, timed_allreduce_hook
    from driple.zoo import build_workload, make_optimizer

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    name, knobs, bs, optimizer = _parse(job)
    torch.manual_seed(0)
    wl = build_workload(name, batch_size=bs, **knobs)
    model_a, model_b = wl.model, copy.deepcopy(wl.model)
    ddp_a = DDP(model_a)
    ddp_b = DDP(model_b)
    rec = TimelineRecorder(f"worker{rank}", warmup=0)
    comm = TimedAllReduce(dist.new_group(backend="gloo"), world, rec)
    ddp_b.register_comm_hook(comm, timed_allreduce_hook)
    opt_a = make_optimizer(optimizer, ddp_a.parameters())
    opt_b = make_optimizer(optimizer, ddp_b.parameters())
    inputs, targets = wl.make_batch(bs, generator=torch.Generator().manual_seed(rank))

    def step_plain():
        t = time.perf_counter_ns()
        opt_a.zero_grad(set_to_none=True)
        wl.loss_fn(ddp_a(inputs), targets).backward()
        opt_a.step()
        return time.perf_counter_ns() - t

    def step_marks():
        t = time.perf_counter_ns()
        rec.begin_iteration()
        opt_b.zero_grad(set_to_none=True)
        wl.loss_fn(ddp_b(inputs), targets).backward()
        if rec.last_grad_ns is not None:
            rec.compute_off(rec.last_grad_ns)
            rec.compute_on()
        opt_b.step()
        rec.end_iteration()
        return time.perf_counter_ns() - t

    for _ in range(3):
        step_plain()
        step_marks()
    times = {m: [] for m in MODES}
    for _ in range(rounds):
        times["plain"] += [step_plain() for _ in range(window)]
        rec.watch(model_b.parameters())
        times["marks"] += [step_marks() for _ in range(window)]
        rec.unwatch()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True):
            times["profiler"] += [step_plain() for _ in range(window)]
    comm.close()
    if rank == 0:
        queue.put({m: statistics.median(v) / 1e9 for m, v in times.items()})
    dist.barrier()
    dist.destroy_process_group()


def bench(job: str, rounds: int, window: int) -> dict:
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=_rank, args=(r, 2, port, job, rounds, window, queue)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join()
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        raise
    if any(p.exitcode for p in procs):
        raise SystemExit(f"{job}: a rank failed (exit codes {[p.exitcode for p in procs]})")
    medians = queue.get()
    return {"job": job, "step_s": medians,
            "ratio": {m: medians[m] / medians["plain"] for m in MODES}}
