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
    die_with_parent,
    env_contract,
    parse_args,
    single_thread,
    sync,
    write_info,
)
from driple.strategies.ps import ps_shards  # the input builder's placement, so graph and job agree

_SERVER = None  # this process's shard when it is a server


class ShardServer:
    """One server's parameters and optimizer; answers push-pull RPCs."""

    def __init__(self, params, optimizer, workers: int, synchronous: bool):
        import torch

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
        for p, g in zip(self.params, grads):
            p.grad = g
        self.optimizer.step()
        self.steps += 1

    def push_pull(self, grads):
        import torch

        with self.lock:
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
def _push_pull(grads):
    """RPC target on a server: push this worker's gradients, get the shard's parameters (a future)."""
    return _SERVER.push_pull(grads)


def _leave():
    """RPC target on a server: this worker is done."""
    _SERVER.leave()


def main(argv=None) -> int:
    global _SERVER
    die_with_parent()  # no rank outlives its collector
    job = parse_args(argv)
    rank, world, local_rank = env_contract()
    servers = int(job["setting"]["servers"])
    is_server = rank < servers
    name = f"server{rank}" if is_server else f"worker{rank - servers}"
    workdir = Path(job["workdir"])
    announce(workdir, name)
    single_thread()

    import torch

    from driple.zoo.optim import make_optimizer
    from driple.zoo.workload import load_workload

    spec = job["spec"]
    # servers run first on a host: a worker's GPU is its local rank among the workers
    device = torch.device("cpu") if is_server else device_for(job, max(0, local_rank - servers))
    torch.manual_seed(spec["seed"])  # same initial weights on every rank
    workload = load_workload(spec["model"], spec["batch_size"], spec["knobs"])
    params = [p for p in workload.model.parameters() if p.requires_grad]
    owner = ps_shards([p.numel() * p.element_size() for p in params], servers)  # as the graph

    if is_server:
        mine = [p.detach().clone().requires_grad_(True) for p, o in zip(params, owner) if o == rank]
        _SERVER = ShardServer(
            mine, make_optimizer(spec["optimizer"], mine, lr=spec["lr"]),
            workers=world - servers, synchronous=bool(job["setting"]["synchronous"]),
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
        return 0

    model = workload.model.to(device)
    gen = torch.Generator().manual_seed(spec["seed"] + rank)
    inputs, targets = workload.make_batch(spec["batch_size"], generator=gen, device=device)
    write_info(workdir, name, workload, model, inputs)
    shards = [[i for i, o in enumerate(owner) if o == s] for s in range(servers)]
    log = IterationLog(workdir / f"{name}.iters")

    def step() -> int:
        log.start()
        for p in params:
            p.grad = None
        loss = workload.loss_fn(model(inputs), targets)
        loss.backward()
        sync(device)
        futs = [
            rpc.rpc_async(f"server{s}", _push_pull, args=([params[i].grad.cpu() for i in idx],))
            for s, idx in enumerate(shards) if idx
        ]
        with torch.no_grad():
            for idx, fut in zip([i for i in shards if i], futs):
                for i, value in zip(idx, fut.wait()):
                    params[i].copy_(value)
        sync(device)
        return log.end()

    for _ in range(spec["warmup"]):
        step()
    if spec["iterations"] is not None:
        for _ in range(spec["iterations"]):
            step()
    else:
        deadline = time.monotonic_ns() + int(float(job["seconds"]) * 1e9)
        while time.monotonic_ns() < deadline:
            step()
    log.close()
    for s in range(servers):
        rpc.rpc_sync(f"server{s}", _leave)
    rpc.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
