"""Parameter-server worker over ``torch.distributed.rpc`` (TensorPipe over TCP).

Ranks ``0..P-1`` are servers (``server0``, ...), ranks ``P..P+W-1`` are workers (``worker0``, ...);
``P`` comes from the job's setting. Run as ``python -m driple.collect.workers.ps --job JOB.json``
with the torch env contract. TensorPipe is forced onto TCP (``uv`` transport, ``basic``
channel) so that the traffic goes through sockets (and links) that can be measured; on one
host it would otherwise use shared memory.

Parameters are split into P shards, balanced by size. Each iteration a worker computes its
gradients, pushes each shard's gradients to its server and gets the shard's parameters back
(push-pull, one RPC per server). A synchronous server averages the pushes of all active
workers, steps its optimizer once and answers them all; an asynchronous server steps on
every push and answers at once. A worker that finishes tells the servers, so synchronous
servers stop waiting for it (workers may run different numbers of iterations).

Timeline (:mod:`driple.collect.timeline.recorder`): a worker computes from the start of an
iteration until its gradients are ready, waits while its push-pulls are in flight, and computes
again while it copies the answers in; each push-pull is logged with its bytes. A server logs,
per push, when it had the push in hand and when it answered (so the labeller can split a
push-pull into the worker's send and its receive), and times each optimizer step as compute.
Servers count *rounds* (one per release) where workers count iterations.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from torch.distributed import rpc

from driple.collect.workers.common import (
    IterationLog,
    announce,
    device_for,
    env_contract,
    hold_store_until_peers_leave,
    iterations_for,
    run_and_exit,
    single_thread,
    sync,
    warm_up,
    write_info,
)
from driple.strategies.ps import ps_shards  # the input builder's placement, so graph and job agree

_SERVER = None  # this process's shard when it is a server


class ShardServer:
    """One server's parameters and optimizer; answers push-pull RPCs."""

    def __init__(self, params, optimizer, workers: int, synchronous: bool, recorder=None):
        import torch

        self.recorder = recorder
        self.waiting: list[tuple[int, int, int]] = []  # (worker, seq, entry ns) of this round
        self.last_release = time.monotonic_ns()
        self.params = params
        self.optimizer = optimizer
        self.active = workers
        self.synchronous = synchronous
        self.lock = threading.Lock()
        self.pending = 0
        self.sums = [torch.zeros_like(p) for p in params]
        self.future = torch.futures.Future()
        self.steps = 0

    def _snapshot(self):
        return [p.detach().clone() for p in self.params]

    def _apply(self, grads) -> None:
        start = time.monotonic_ns()
        for p, g in zip(self.params, grads):
            p.grad = g
        self.optimizer.step()
        self.steps += 1
        end = time.monotonic_ns()
        if self.recorder is not None:  # one round per step: [previous release, this one)
            self.recorder.set_iteration_bounds(self.last_release, end)
            self.recorder.add_compute(start, end)
            for worker, seq, entry in self.waiting:
                self.recorder.add_serve(worker, seq, entry, end)
        self.waiting = []
        self.last_release = end

    def push_pull(self, grads, worker: int = -1, seq: int = -1):
        import torch

        entry = time.monotonic_ns()
        with self.lock:
            self.waiting.append((worker, seq, entry))
            if not self.synchronous:
                self._apply(grads)
                fut = torch.futures.Future()
                fut.set_result(self._snapshot())
                return fut
            for s, g in zip(self.sums, grads):
                s.add_(g)
            self.pending += 1
            fut = self.future
            if self.pending >= self.active:
                self._release()
            return fut

    def leave(self) -> None:
        with self.lock:
            self.active -= 1
            if self.synchronous and self.pending and self.pending >= self.active:
                self._release()

    def _release(self) -> None:
        import torch

        self._apply([s / self.pending for s in self.sums])
        for s in self.sums:
            s.zero_()
        self.pending = 0
        fut, self.future = self.future, torch.futures.Future()
        fut.set_result(self._snapshot())


@rpc.functions.async_execution
def _push_pull(grads, worker: int = -1, seq: int = -1):
    """RPC target on a server: push this worker's gradients (its push number ``seq``), get the
    shard's parameters (a future)."""
    return _SERVER.push_pull(grads, worker, seq)


def _leave():
    """RPC target on a server: this worker is done."""
    _SERVER.leave()


def run(job: dict) -> int:
    global _SERVER
    rank, world, local_rank = env_contract()
    servers = int(job["setting"]["servers"])
    is_server = rank < servers
    name = f"server{rank}" if is_server else f"worker{rank - servers}"
    workdir = Path(job["workdir"])
    announce(workdir, name)
    single_thread()

    import torch

    from driple.collect.timeline.record import COMM_KINDS
    from driple.collect.timeline.recorder import TimelineRecorder
    from driple.zoo.optim import make_optimizer
    from driple.zoo.workload import load_workload, step_loss

    spec = job["spec"]
    # servers run first on a host: a worker's GPU is its local rank among the workers
    device = torch.device("cpu") if is_server else device_for(job, max(0, local_rank - servers))
    torch.manual_seed(spec["seed"])  # same initial weights on every rank
    workload = load_workload(spec["model"], spec["batch_size"], spec["knobs"])
    params = [p for p in workload.model.parameters() if p.requires_grad]
    owner = ps_shards([p.numel() * p.element_size() for p in params], servers)  # as the graph
    recorder = TimelineRecorder(name, spec["warmup"], role="server" if is_server else "worker",
                                device="gpu" if device.type == "cuda" else "cpu", rank=rank)

    if is_server:
        mine = [p.detach().clone().requires_grad_(True) for p, o in zip(params, owner) if o == rank]
        _SERVER = ShardServer(
            mine, make_optimizer(spec["optimizer"], mine, lr=spec["lr"]),
            workers=world - servers, synchronous=bool(job["setting"]["synchronous"]),
            recorder=recorder,
        )
    options = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=8,
        rpc_timeout=float(job["timeout"]),
        _transports=["uv"],
        _channels=["basic"],
    )
    rpc.init_rpc(name, rank=rank, world_size=world, rpc_backend_options=options)
    if is_server:
        rpc.shutdown()  # serves until every worker has shut down
        hold_store_until_peers_leave(workdir, rank, world)
        recorder.save(workdir)
        return 0

    model = workload.model.to(device)
    recorder.watch(model.parameters())
    gen = torch.Generator().manual_seed(spec["seed"] + rank)
    inputs, targets = workload.make_batch(spec["batch_size"], generator=gen, device=device)
    write_info(workdir, name, workload, model, inputs)
    shards = [[i for i, o in enumerate(owner) if o == s] for s in range(servers)]
    shard_bytes = [sum(params[i].numel() * params[i].element_size() for i in idx) for idx in shards]
    windex = rank - servers
    log = IterationLog(workdir / f"{name}.iters")

    def step() -> int:
        start = recorder.begin_iteration()
        log.start(start)
        for p in params:
            p.grad = None
        loss = step_loss(model, inputs, targets, workload.loss_fn)  # model(**inputs) for a dict
        loss.backward()
        sync(device)
        sent = time.monotonic_ns()
        recorder.compute_off(sent)  # waits while the push-pulls are in flight
        seq = recorder.iteration
        calls = [(s, idx, rpc.rpc_async(f"server{s}", _push_pull,
                                         args=([params[i].grad.cpu() for i in idx], windex, seq)))
                 for s, idx in enumerate(shards) if idx]
        torch.futures.wait_all([fut for _, _, fut in calls])
        done = time.monotonic_ns()
        recorder.compute_on(done)
        for s, _, _ in calls:
            recorder.add_comm(COMM_KINDS["pushpull"], sent, done, shard_bytes[s], shard_bytes[s], peer=s)
        with torch.no_grad():
            for _, idx, fut in calls:
                for i, value in zip(idx, fut.wait()):
                    params[i].copy_(value)
        sync(device)
        return log.end(recorder.end_iteration())

    typical_s = warm_up(job, name, step)
    iterations = spec["iterations"]
    if iterations is None:
        iterations = iterations_for(job, typical_s)
    for _ in range(iterations):
        step()
    log.close()
    recorder.save(workdir)
    for s in range(servers):
        rpc.rpc_sync(f"server{s}", _leave)
    rpc.shutdown()
    hold_store_until_peers_leave(workdir, rank, world)
    return 0


def main(argv=None) -> None:
    run_and_exit(run, argv)


if __name__ == "__main__":
    main()
