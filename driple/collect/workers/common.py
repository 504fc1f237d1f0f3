"""What every worker process shares: the job file, the env contract, the logs it writes.

The launcher (or ``torchrun``) starts a worker with the torch env contract — ``MASTER_ADDR``,
``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` — and ``--job JOB.json``. The same
worker therefore runs under torchrun across real hosts. A worker writes, into the job's work
directory:

- ``<name>.pid``: its pid (the launcher samples it; torchrun hides worker pids otherwise),
- ``<name>.iters``: one line per iteration ``index start_ns end_ns`` (``time.monotonic_ns``);
  indexes below ``warmup`` are warm-up,
- ``<name>.buckets`` (DDP): one line per gradient bucket ``iteration bucket bytes start_ns end_ns``,
- ``<name>.timeline.npz``: the rank's timeline (:mod:`driple.collect.timeline.recorder`),
- ``<name>.json``: model facts (parameter count and bytes, family, config).

How many iterations are measured: at least ``min_iterations`` and at least ``seconds`` worth
(:func:`plan_iterations`); a job that would need more than ``max_seconds`` for its minimum
fails with :class:`MeasurementCapError`, which the launcher reports as the row's reason.

No rank outlives the collector that started it (:func:`die_with_parent`): a SIGKILLed
``driple collect run`` would otherwise leave its ranks training, and the next measurement
would run against them.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PARENT_ENV = "DRIPLE_PARENT_PID"  # the pid a rank's parent must have (set by the env launcher)
DRIVER_ENV = "DRIPLE_DRIVER_PID"  # the collector process that started the job (every rank)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def parent_death_hook(sig: int = signal.SIGKILL):
    """A function that makes the calling process receive ``sig`` when its parent thread exits
    (Linux ``prctl(PR_SET_PDEATHSIG)``); None off Linux. libc is resolved here, so the function
    is safe as a ``subprocess.Popen(preexec_fn=...)`` between fork and exec; the setting is
    kept across the exec of ``python`` and of ``ip netns exec``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.restype = ctypes.c_int
    args = (ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(int(sig)), ctypes.c_ulong(0),
            ctypes.c_ulong(0), ctypes.c_ulong(0))

    def hook() -> None:
        prctl(*args)

    return hook


def die_with_parent() -> None:
    """Called first by every rank: be killed (SIGKILL) when the process that started it exits,
    and exit at once if that already happened before this call (then the parent is no longer
    the pid the launcher recorded in ``DRIPLE_PARENT_PID``)."""
    hook = parent_death_hook(signal.SIGKILL)
    if hook is not None:
        hook()
    expected = os.environ.get(PARENT_ENV)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        sys.stderr.write("driple worker: the collector that started this rank is gone; exiting\n")
        os._exit(1)


def parse_args(argv=None) -> dict:
    parser = argparse.ArgumentParser(description="driple collector worker (started by the launcher or torchrun)")
    parser.add_argument("--job", required=True, help="job description written by the launcher")
    args = parser.parse_args(argv)
    return json.loads(Path(args.job).read_text())


class MeasurementCapError(RuntimeError):
    """The measurement would take longer than the job's time cap (the row fails with this)."""


def plan_iterations(typical_s: float, seconds: float, min_iterations: int, max_seconds: float | None) -> int:
    """Measured iterations: ``max(min_iterations, seconds / typical)``, within ``max_seconds``.

    ``typical_s`` is the (slowest rank's) typical warm-up iteration time. Raises
    :class:`MeasurementCapError` when even ``min_iterations`` would exceed ``max_seconds``.
    """
    import math

    typical_s = max(float(typical_s), 1e-6)
    need = max(int(min_iterations), math.ceil(float(seconds) / typical_s))
    if max_seconds is not None:
        if min_iterations * typical_s > float(max_seconds):
            raise MeasurementCapError(
                f"{min_iterations} iterations of {typical_s:.3g} s need {min_iterations * typical_s:.0f} s, "
                f"over the job's cap of {float(max_seconds):g} s (raise --max-seconds or shrink the job)")
        need = min(need, max(int(min_iterations), int(float(max_seconds) / typical_s)))
    return need


def warm_up(job: dict, name: str, step) -> float:
    """Run the job's warm-up iterations between its two start gates; returns the typical
    warm-up iteration in seconds (the median of the second half: the first ones pay for caches)."""
    import statistics

    wait_at_start_gate(job, name, "ready")
    warm = [step() for _ in range(job["spec"]["warmup"])]
    wait_at_start_gate(job, name, "warm")
    return statistics.median(warm[len(warm) // 2:]) / 1e9


def iterations_for(job: dict, typical_s: float) -> int:
    """:func:`plan_iterations` with the job's ``seconds``, ``min_iterations`` and ``max_seconds``."""
    return plan_iterations(typical_s, float(job["seconds"]), int(job.get("min_iterations", 1)),
                           job.get("max_seconds"))


def top_up_iterations(elapsed_s: float, done: int, seconds: float, max_seconds: float | None) -> int:
    """More iterations for a measurement that came out shorter than ``seconds``.

    The plan (:func:`plan_iterations`) comes from a few warm-up iterations, which can be slower
    than the steady state (a co-run's tiny job measured 1.4 s of a planned 3 s): after the
    planned ``done`` iterations took ``elapsed_s``, the rest of ``seconds`` at the measured
    rate, within ``max_seconds`` of measurement in all. 0 when the measurement is long enough.
    """
    import math

    short = float(seconds) - float(elapsed_s)
    if short <= 0 or done < 1 or elapsed_s <= 0:
        return 0
    per_iteration = float(elapsed_s) / done
    more = math.ceil(short / per_iteration)
    if max_seconds is not None:
        more = min(more, max(0, int((float(max_seconds) - float(elapsed_s)) / per_iteration)))
    return more


def run_and_exit(run, argv=None) -> None:
    """``run(job)`` then end the process with ``os._exit``: exit status 0 or ``run``'s, 1 with
    the traceback printed on an exception. Exiting without interpreter finalisation means no
    library thread (gloo, TensorPipe) can be caught needing the GIL while Python shuts down."""
    import sys
    import traceback

    die_with_parent()  # no rank outlives its collector
    code = 1
    try:
        code = int(run(parse_args(argv)) or 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - print it the way Python would, then exit non-zero
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


def env_contract() -> tuple[int, int, int]:
    """(rank, world size, local rank) from the torch env contract."""
    try:
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
    except KeyError as err:
        raise SystemExit(f"worker needs the torch env contract (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): missing {err}")
    return rank, world, int(os.environ.get("LOCAL_RANK", "0"))


def single_thread() -> None:
    """One compute thread per worker: each worker's cores allotment is 1."""
    import torch

    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # already set (e.g. by an earlier parallel op)
        pass


def wait_at_start_gate(job: dict, name: str, stage: str = "warm", poll_s: float = 0.005) -> bool:
    """Co-runs: wait until every worker of every job of the co-run has reached ``stage``.

    Jobs of a co-run start together but finish starting up at their own pace (seconds apart on
    a busy host); without gates the first job can finish measuring before the last one starts.
    Workers pass two gates: ``"ready"`` before the warm-up (the warm-up iterations, which set
    how many iterations are measured, then run under the co-run's load) and ``"warm"`` after
    it (the measurements start together). ``job["start_gate"]`` is ``{"dir", "parties",
    "timeout_s"}``: each worker leaves a file in ``dir/stage`` and waits until ``parties``
    files are there. After ``timeout_s`` it goes on (returns False); the co-run's overlap check
    then says the windows missed. No gate (a job on its own): returns True at once.
    """
    gate = job.get("start_gate")
    if not gate:
        return True
    gate_dir = Path(gate["dir"]) / stage
    gate_dir.mkdir(parents=True, exist_ok=True)
    (gate_dir / f"{name}.{os.getpid()}").touch()  # one file per process: names repeat across jobs
    return _wait_for_files(gate_dir, "*", int(gate["parties"]), float(gate["timeout_s"]), poll_s)


def hold_store_until_peers_leave(workdir: Path, rank: int, world: int, timeout_s: float = 30.0,
                                 poll_s: float = 0.01) -> bool:
    """Call right after ``rpc.shutdown()``: rank 0 hosts the rendezvous store that a graceful
    shutdown still reads, so it must not exit while another rank is finishing its shutdown
    (that rank then fails with "Connection reset by peer" after its measurement is done; seen
    on a loaded host). Ranks > 0 leave a file ``left.<rank>``; rank 0 waits until all
    ``world - 1`` are there, or ``timeout_s`` (returns False)."""
    if rank:
        (workdir / f"left.{rank}").touch()
        return True
    return _wait_for_files(workdir, "left.*", world - 1, timeout_s, poll_s)


def _wait_for_files(folder: Path, pattern: str, count: int, timeout_s: float, poll_s: float) -> bool:
    """The file barrier of the gates above: wait until ``count`` files of ``folder`` match
    ``pattern``; False after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while sum(1 for _ in folder.glob(pattern)) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True


def announce(workdir: Path, name: str) -> None:
    """Write ``<name>.pid`` atomically so the launcher can sample this process."""
    tmp = workdir / f".{name}.pid.tmp"
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, workdir / f"{name}.pid")


class IterationLog:
    """Per-iteration timestamps (monotonic ns) written and flushed as they happen: what a
    crashed rank leaves behind (its timeline file is written only at the end)."""

    def __init__(self, path: Path):
        self._f = open(path, "w", buffering=1)
        self.count = 0
        self._start = None

    def start(self, t: int | None = None) -> None:
        self._start = time.monotonic_ns() if t is None else t

    def end(self, t: int | None = None) -> int:
        """Log the iteration ending at ``t`` (now); returns its length (ns)."""
        end = time.monotonic_ns() if t is None else t
        self._f.write(f"{self.count} {self._start} {end}\n")
        self.count += 1
        return end - self._start

    def close(self) -> None:
        self._f.close()


def batch_len(inputs) -> int | None:
    """Samples in a batch: first dimension of the (first) input tensor."""
    while isinstance(inputs, (list, tuple)) and inputs:
        inputs = inputs[0]
    if isinstance(inputs, dict) and inputs:
        inputs = next(iter(inputs.values()))
    shape = getattr(inputs, "shape", None)
    return int(shape[0]) if shape else None


def write_info(workdir: Path, name: str, workload, model, inputs=None, **extra) -> None:
    """``<name>.json``: the model's facts (``extra``: a strategy's own, e.g. its FSDP units)."""
    params = list(model.parameters())
    info = {
        "batch_size": batch_len(inputs),
        "name": getattr(workload, "name", None),
        "family": getattr(workload, "family", None),
        "config": _jsonable(getattr(workload, "config", {}) or {}),
        "param_count": int(sum(p.numel() for p in params)),
        "param_bytes": int(sum(p.numel() * p.element_size() for p in params)),
        "trainable_bytes": int(sum(p.numel() * p.element_size() for p in params if p.requires_grad)),
        "pid": os.getpid(),
        **extra,
    }
    tmp = workdir / f".{name}.json.tmp"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, workdir / f"{name}.json")


def _jsonable(obj):
    try:
        json.dumps(obj)
        return obj
    except TypeError:
        return {str(k): repr(v) for k, v in dict(obj).items()} if isinstance(obj, dict) else repr(obj)


def device_for(job: dict, local_rank: int):
    import torch

    from driple.hardware.devices import device_kind

    kind = device_kind(job["setting"]["device"])
    if kind.one_per_worker:
        torch.cuda.set_device(local_rank)
        return torch.device(kind.torch_type, local_rank)
    return torch.device(kind.torch_type)


def sync(device) -> None:
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)


def measure_collectively(job: dict, name: str, step, device, profiled_recorder=None) -> None:
    """Warm up, then run the measured iterations of a collective job (DDP, FSDP): every rank
    must run the same number, since a collective waits for all. Unless the job fixes it, the
    ranks agree on it after warm-up from the slowest rank's typical iteration
    (:func:`plan_iterations`), then top up together: the shortest measurement decides
    (:func:`top_up_iterations`). ``step()`` runs one iteration and returns its ns; with
    ``profiled_recorder`` the measured part runs inside a profiler window for it."""
    import torch
    import torch.distributed as dist

    spec = job["spec"]
    typical_s = warm_up(job, name, step)
    iterations = spec["iterations"]
    if iterations is None:
        slowest = torch.tensor([typical_s], device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        iterations = iterations_for(job, slowest.item())

    def measure() -> None:
        t0 = time.monotonic_ns()
        for _ in range(iterations):
            step()
        if spec["iterations"] is not None:
            return
        done = iterations
        for _ in range(3):
            shortest = torch.tensor([float(time.monotonic_ns() - t0)], device=device)
            dist.all_reduce(shortest, op=dist.ReduceOp.MIN)
            more = top_up_iterations(shortest.item() / 1e9, done, float(job["seconds"]), job.get("max_seconds"))
            if not more:
                return
            for _ in range(more):
                step()
            done += more

    if profiled_recorder is not None:
        from driple.collect.timeline.profiler import ProfiledWindow

        with ProfiledWindow(profiled_recorder, cuda=device.type == "cuda"):
            measure()
    else:
        measure()


@dataclass
class CollectiveRank:
    """A worker rank of a collective job (DDP, FSDP) once set up by :func:`start_collective_rank`:
    its process group joined, its model built on its device (not yet wrapped) and its timeline
    recorder made (``use_profiler``: a profiler window records the timeline instead of marks)."""

    rank: int
    world: int
    local_rank: int
    name: str
    workdir: Path
    spec: dict
    device: object
    workload: object
    model: object
    use_profiler: bool
    recorder: object

    def make_batch(self):
        """This rank's synthetic batch (seeded with the job's seed + its rank)."""
        import torch

        gen = torch.Generator().manual_seed(self.spec["seed"] + self.rank)
        return self.workload.make_batch(self.spec["batch_size"], generator=gen, device=self.device)


def start_collective_rank(job: dict) -> CollectiveRank:
    """Announce the rank, pin it to one compute thread, join the process group (gloo on CPU,
    NCCL on GPU), build the job's model with its seed and make its timeline recorder."""
    rank, world, local_rank = env_contract()
    name = f"worker{rank}"
    workdir = Path(job["workdir"])
    announce(workdir, name)
    single_thread()

    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from driple.collect.timeline.recorder import TimelineRecorder
    from driple.hardware.devices import device_kind
    from driple.zoo.workload import load_workload

    spec = job["spec"]
    device = device_for(job, local_rank)
    cuda = device.type == "cuda"
    backend = device_kind(job["setting"]["device"]).collective_backend
    dist.init_process_group(backend, timeout=timedelta(seconds=float(job["timeout"])))
    torch.manual_seed(spec["seed"])
    workload = load_workload(spec["model"], spec["batch_size"], spec["knobs"])
    model = workload.model.to(device)
    use_profiler = cuda or job.get("timeline") == "profiler"
    recorder = TimelineRecorder(name, spec["warmup"], device="gpu" if cuda else "cpu",
                                device_index=local_rank if cuda else 0, memory=not use_profiler, rank=rank)
    return CollectiveRank(rank, world, local_rank, name, workdir, spec, device, workload, model,
                          use_profiler, recorder)


def end_collective_rank() -> None:
    """Leave the process group once every rank is done (the caller has dropped its wrapped model
    and optimizer first, so no library thread still holds them)."""
    import gc

    import torch.distributed as dist

    gc.collect()
    dist.barrier()
    dist.destroy_process_group()
