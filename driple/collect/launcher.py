"""Run one real distributed training job, sample it, and turn it into a result row.

:func:`run_job` starts every rank of a setting (servers first for ``ps``, then workers) as its
own process with the torch env contract (``MASTER_ADDR``/``PORT``, ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``), or through ``torchrun`` (``launcher="torchrun"``, loopback only). In an
emulated setting (network != ``lo``) each rank runs in its own namespace of an
:class:`~driple.collect.netns.EmulatedCluster`; with ``nodes=N`` each namespace is a node with
its own torchrun agent and sampler, joined through c10d rendezvous (:mod:`driple.collect.multinode`).
A :class:`~driple.collect.sampling.SamplerProcess` samples every rank while it runs; afterwards each rank's series is labelled over its
measurement window (after warm-up, taken from its iteration log) and the row is built by
:mod:`driple.collect.results`.

Whatever happens — a rank crashes, the job hangs past ``timeout``, Ctrl-C or SIGTERM — every
process group started here is killed, the sampler stopped and the namespaces removed before
:func:`run_job` returns (or raises :class:`~driple.collect.job.JobInterrupted`). If the
collector itself is killed outright (SIGKILL), the kernel kills its ranks with it (parent-death
signal, :func:`~driple.collect.workers.common.die_with_parent`); a job never starts while
ranks of a dead collector still run (:func:`stale_ranks`), and namespaces of a dead collector
are removed first.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from driple.collect.files import write_json
from driple.collect.interrupts import deferred_interrupts, signals_as_interrupt
from driple.collect.job import JobInterrupted, JobResult, JobSpec, job_id as make_job_id
from driple.collect.workers.common import DRIVER_ENV, PARENT_ENV, parent_death_hook
from driple.errors import DripleError
from driple.hardware.devices import device_kind
from driple.settings import Setting, parse_setting

LAUNCHERS = ("env", "torchrun")
TIMELINES = ("marks", "profiler")
POLL_S = 0.05
KILL_GRACE_S = 3.0
MIN_ITERATIONS = 20  # measured iterations per worker: the labels are medians over them
DEFAULT_MAX_SECONDS = 120.0  # cap on the measured part; a job that needs more fails clearly


def default_timeout(seconds: float, max_seconds: float | None = None) -> float:
    """Seconds after which a job counts as hung: start-up and warm-up get 90 s, the longest
    measurement the job may take (``max_seconds``, else ``seconds``) counts twice."""
    return 90.0 + 2.0 * max(float(seconds), float(max_seconds or 0.0))


#: Row columns of :func:`host_probe` (beside the whole spec in ``hardware``).
PROBE_COLUMNS = ("probe_gemm_gflops", "probe_copy_gb_s")


def host_probe() -> dict:
    """This machine's :class:`~driple.hardware.spec.HardwareSpec`, probed right before a job (a
    couple of seconds): the ``hardware`` column (the spec as JSON) and, for a glance down a
    table, its float32 matmul GFLOP/s and copy GB/s.

    A VM's host can get 10-15 % slower or faster over hours without the guest seeing it (no
    steal time, the same nominal clock), and a cgroup quota halves a job's compute while a
    one-thread matmul reads the same: with the spec in every row, drift shows up job by job and
    a row says which machine it describes. Empty (NaN) if the probe fails: a job is never lost
    to it.
    """
    try:
        from driple.hardware.probe import probe

        spec = probe(repeats=5)
        return {"probe_gemm_gflops": round(spec.flops_per_s / 1e9, 2),
                "probe_copy_gb_s": round(spec.copy_bytes_per_s / 1e9, 3),
                "hardware": spec.to_json()}
    except Exception:  # noqa: BLE001 - a probe must never cost a measurement
        return {**dict.fromkeys(PROBE_COLUMNS, float("nan")), "hardware": ""}


def roles(setting: Setting) -> list[str]:
    """Process names by rank: ``server0..`` then ``worker0..`` (a DDP setting has only workers)."""
    return [f"server{i}" for i in range(setting.servers)] + [f"worker{i}" for i in range(setting.workers)]


def run_job(
    spec: JobSpec | dict,
    setting: Setting | str,
    seconds: float = 10.0,
    out_dir: str | os.PathLike = "runs",
    *,
    timeout: float | None = None,
    launcher: str = "env",
    period_s: float = 0.01,
    job_id: str | None = None,
    record: bool = True,
    min_iterations: int = MIN_ITERATIONS,
    max_seconds: float | None = DEFAULT_MAX_SECONDS,
    timeline: str = "marks",
    master_port: int | None = None,
    start_gate: dict | None = None,
    host_probe_on: bool = True,
    nodes: int | None = None,
) -> JobResult:
    """Launch ``spec`` in ``setting`` for real, measure after warm-up, return its row.

    The measured part lasts ``max(min_iterations iterations, seconds)`` per worker (unless
    ``spec.iterations`` fixes it); a job whose ``min_iterations`` would take longer than
    ``max_seconds`` fails with that reason. ``timeline`` chooses how the ranks record their
    timeline: ``"marks"`` (phase marks, the default on CPU) or ``"profiler"`` (torch.profiler;
    always on GPUs).

    Writes ``out_dir/raw/<job_id>.npz`` (sampled counters), ``.json`` (per-rank labels,
    iteration and bucket logs) and ``.log`` (the ranks' output). Never raises for a failed job:
    the row has ``status="failed"`` and a ``reason``. Raises :class:`JobInterrupted` (a
    ``KeyboardInterrupt`` carrying the failed result) on Ctrl-C / SIGTERM, after cleaning up,
    and :class:`DripleError` for unusable input (unknown setting, no root for namespaces).
    ``record=True`` also appends the row to ``out_dir/results.csv`` (and starts
    ``provenance.json`` there); sweeps and the CLI pass False and record rows themselves.
    ``master_port``: the ranks' rendezvous port on loopback (default: a free one picked now; a
    co-run hands each of its jobs its own); an emulated cluster always uses 29500 on its hosts.
    ``host_probe_on``: measure the host's speed just before the job (:func:`host_probe`, a
    quarter of a second) and keep it in the row.
    ``nodes``: run as a multi-node job of that many emulated nodes, one torchrun agent each,
    joined through c10d rendezvous (:mod:`driple.collect.multinode`); the row says which node
    held which rank (``nodes``, ``rank_nodes``).
    """
    spec = spec if isinstance(spec, JobSpec) else JobSpec.from_dict(spec)
    setting = parse_setting(setting)
    if launcher not in LAUNCHERS:
        raise DripleError(f"unknown launcher {launcher!r}; use 'env' or 'torchrun'")
    if timeline not in TIMELINES:
        raise DripleError(f"unknown timeline source {timeline!r}; use 'marks' or 'profiler'")
    if int(min_iterations) < 1:
        raise DripleError("min_iterations must be at least 1")
    if nodes is not None:
        from driple.collect.multinode import check_nodes

        check_nodes(setting, nodes, launcher)
    if launcher == "torchrun" and setting.emulated:
        raise DripleError("torchrun starts all ranks on one host; emulated settings use launcher='env'")
    if float(seconds) <= 0 and spec.iterations is None:
        raise DripleError("seconds must be positive (length of the measurement after warm-up)")
    if device_kind(setting.device).one_per_worker:
        _require_gpus(setting)
    if setting.emulated:
        from driple.collect.netns import require_root

        require_root()
    _refuse_stale_ranks()
    timeout = float(timeout) if timeout else default_timeout(seconds, max_seconds)
    out_dir = Path(out_dir)
    raw_dir = out_dir / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    jid = job_id or make_job_id(spec, setting.id, seconds)
    work = raw_dir / f"{jid}.work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for stale in raw_dir.glob(f"{jid}.*"):
        if stale != work:
            stale.unlink()
    (work / "job.json").write_text(json.dumps({
        "workdir": str(work.resolve()), "timeout": timeout, "seconds": float(seconds),
        "min_iterations": int(min_iterations), "max_seconds": max_seconds, "timeline": timeline,
        "setting": setting.to_dict(), "spec": spec.to_dict(), "start_gate": start_gate,
    }))

    run = _Run(spec, setting, jid, work, raw_dir, timeout, launcher, period_s, master_port, nodes)
    probe = host_probe() if host_probe_on else {}
    started = datetime.now(timezone.utc)
    t0 = time.monotonic()
    interrupted = False
    try:
        with signals_as_interrupt():
            run.start_and_wait()
    except KeyboardInterrupt:
        interrupted = True
        run.fail("interrupted by Ctrl-C/SIGTERM during the job (re-run on the next sweep)")
    except DripleError:
        raise
    except Exception as err:  # a launcher bug or an OS error: the job fails, the sweep goes on
        run.fail(f"launcher error: {err!r}")
    finally:
        with deferred_interrupts() as pending:
            run.cleanup()
        interrupted = interrupted or pending.fired
        if pending.fired and run.status == "ok":
            run.fail("interrupted by Ctrl-C/SIGTERM during the job (re-run on the next sweep)")
    duration = time.monotonic() - t0

    from driple.collect.results import build_row

    row, detail = build_row(run, started=started, duration_s=duration, out_dir=out_dir)
    row.update(probe)
    row.update(run.node_columns())
    detail_path = raw_dir / f"{jid}.json"
    write_json(detail_path, detail)
    _merge_logs(work, raw_dir / f"{jid}.log")
    shutil.rmtree(work, ignore_errors=True)
    raw_path = run.raw_path if run.raw_path and run.raw_path.exists() else None
    result = JobResult(row=row, raw_path=raw_path, detail_path=detail_path)
    if record:
        from driple.collect.provenance import record as record_provenance
        from driple.collect.results import ResultTable

        ResultTable(out_dir).append(row)
        if not (out_dir / "provenance.json").exists():
            record_provenance(out_dir, setting=setting.id)
    if interrupted:
        raise JobInterrupted(result)
    return result


class _Run:
    """The processes, sampler and cluster of one job, and what became of them."""

    def __init__(self, spec, setting, jid, work, raw_dir, timeout, launcher, period_s, master_port=None,
                 nodes=None):
        self.spec, self.setting, self.job_id = spec, setting, jid
        self.work, self.raw_dir, self.timeout = work.resolve(), raw_dir, timeout
        self.launcher, self.period_s, self.master_port = launcher, period_s, master_port
        self.nodes = int(nodes) if nodes else None
        self.rank_nodes: dict[str, int] = {}
        self.node_samplers: list = []
        self.names = roles(setting)
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.cluster = None
        self.sampler = None
        self.raw_path: Path | None = None
        self.targets = []
        self.status, self.reason = "ok", ""
        self.sampler_t0_ns: int | None = None

    def fail(self, reason: str) -> None:
        if self.status == "ok":
            self.status, self.reason = "failed", reason

    # -- start --------------------------------------------------------------------------
    def start_and_wait(self) -> None:
        deadline = time.monotonic() + self.timeout
        hosts = [None] * len(self.names)
        if self.setting.emulated:
            from driple.collect.netns import EmulatedCluster

            self.cluster = EmulatedCluster(self.nodes or len(self.names), self.setting.link_bps)
            self.cluster.create()
            hosts = self.cluster.hosts
        if self.nodes:
            self._spawn_nodes()
            pids = self._wait_pids(deadline)
            if pids is not None and self._start_node_samplers(pids):
                self._supervise(deadline)
            return
        if self.launcher == "torchrun":
            self._spawn_torchrun()
        else:
            self._spawn_env(hosts)
        pids = self._wait_pids(deadline)
        if pids is None:
            return
        if self._start_sampler(pids, hosts):
            self._supervise(deadline)

    def _base_env(self) -> dict:
        env = dict(os.environ)
        path = [str(Path.cwd())] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        env.update({
            "PYTHONPATH": os.pathsep.join(path),
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONWARNINGS": "ignore::UserWarning",
            "WORLD_SIZE": str(len(self.names)),
            DRIVER_ENV: str(os.getpid()),
        })
        if device_kind(self.setting.device).one_per_worker:
            env.setdefault("NCCL_P2P_DISABLE", "1")  # one host: force NCCL through sockets
            env.setdefault("NCCL_SHM_DISABLE", "1")
        return env

    def _module(self) -> str:
        """The worker module of the setting's strategy (its registration)."""
        from driple.strategies import get_strategy

        return get_strategy(self.setting.strategy).worker

    def _spawn_env(self, hosts) -> None:
        base = self._base_env()
        if self.cluster is not None:
            master, port = self.cluster.hosts[0].address, 29500
        else:
            master, port = "127.0.0.1", self.master_port or _free_port()
        for rank, name in enumerate(self.names):
            env = dict(base, MASTER_ADDR=master, MASTER_PORT=str(port), RANK=str(rank),
                       LOCAL_RANK=str(0 if hosts[rank] else rank),
                       LOCAL_WORLD_SIZE=str(1 if hosts[rank] else len(self.names)),
                       **{PARENT_ENV: str(os.getpid())})  # `ip netns exec` execs: same parent
            cmd = [sys.executable, "-m", self._module(), "--job", str(self.work / "job.json")]
            if hosts[rank] is not None:
                env.update(hosts[rank].env())
                cmd = hosts[rank].wrap(cmd)
            self._popen(name, cmd, env)

    def _spawn_torchrun(self) -> None:
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc-per-node={len(self.names)}", "--max-restarts=0", "--monitor-interval=0.2",
            "-m", self._module(), "--job", str(self.work / "job.json"),
        ]
        env = self._base_env()
        env.pop("WORLD_SIZE")
        self._popen("torchrun", cmd, env)

    def _spawn_nodes(self) -> None:
        """One torchrun agent per emulated node (:mod:`driple.collect.multinode`)."""
        from driple.collect.multinode import agent_command

        env = self._base_env()
        env.pop("WORLD_SIZE")
        per_node = len(self.names) // self.nodes
        rdzv_host = self.cluster.hosts[0].address
        for host in self.cluster.hosts:
            cmd = agent_command(host, self.nodes, per_node, self.job_id, rdzv_host, self._module(),
                                self.work / "job.json")
            self._popen(f"node{host.index}", cmd, dict(env, **host.env()))

    def _start_node_samplers(self, pids: dict[str, int]) -> bool:
        """Learn each rank's node from its namespace, then start one sampler per node."""
        from driple.collect.multinode import node_of_pid
        from driple.collect.sampling import Target

        for name, pid in pids.items():
            node = node_of_pid(pid, self.cluster.hosts)
            if node is None:
                self.fail(f"{name} (pid {pid}) runs in none of the job's nodes")
                return False
            self.rank_nodes[name] = node
        for host in self.cluster.hosts:
            targets = [Target(name=n, pid=pids[n], cores=1.0, veth=host.veth)
                       for n in self.names if self.rank_nodes[n] == host.index]
            self.targets += targets
            sampler = self._launch_sampler(targets, self.raw_dir / f"{self.job_id}.node{host.index}.npz",
                                           "veth", f"node {host.index}'s sampler")
            if sampler is None:
                return False
            self.node_samplers.append(sampler)
        return True

    def node_columns(self) -> dict:
        """Row columns of a multi-node job: how many nodes, and which node held which rank."""
        if not self.nodes:
            return {}
        return {"nodes": self.nodes, "rank_nodes": json.dumps(self.rank_nodes, sort_keys=True)}

    def _popen(self, name: str, cmd: list[str], env: dict) -> None:
        log = open(self.work / f"{name}.log", "wb")
        try:
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    preexec_fn=_DIE_WITH_US)
        finally:
            log.close()
        self.procs.append((name, proc))

    def _wait_pids(self, deadline: float) -> dict[str, int] | None:
        """Pid of every rank (its ``.pid`` file); None when the job failed before that."""
        if self.launcher == "env" and not self.nodes:
            return {name: proc.pid for name, proc in self.procs}
        while time.monotonic() < deadline:
            pids = {}
            for name in self.names:
                f = self.work / f"{name}.pid"
                if f.exists():
                    pids[name] = int(f.read_text())
            if len(pids) == len(self.names):
                return pids
            if self._check_exits():
                return None
            time.sleep(POLL_S)
        self.fail(f"timeout: ranks did not start within {self.timeout:.0f} s")
        return None

    def _start_sampler(self, pids: dict[str, int], hosts) -> bool:
        from driple.collect.sampling import Target

        for rank, name in enumerate(self.names):
            veth = hosts[rank].veth if hosts[rank] is not None else None
            gpu = rank - self.setting.servers if (device_kind(self.setting.device).one_per_worker and name.startswith("worker")) else None
            self.targets.append(Target(name=name, pid=pids[name], cores=1.0, veth=veth, gpu_index=gpu))
        net_mode = "veth" if self.cluster is not None else "tcp_info"
        self.sampler = self._launch_sampler(self.targets, self.raw_dir / f"{self.job_id}.npz", net_mode, "sampler")
        return self.sampler is not None

    def _launch_sampler(self, targets, path: Path, net_mode: str, what: str):
        """A started :class:`~driple.collect.sampling.SamplerProcess`, or None with the job failed."""
        from driple.collect.sampling import SamplerProcess

        sampler = SamplerProcess(targets, path, period_s=self.period_s, device=self.setting.device,
                                 net_mode=net_mode)
        try:
            sampler.start()
        except DripleError as err:  # e.g. a rank already died: report the rank, not the sampler
            time.sleep(0.5)
            self._check_exits()
            self.fail(f"{what} could not start: {err}")
            return None
        return sampler

    # -- supervise ----------------------------------------------------------------------
    def _check_exits(self) -> bool:
        """True when the job is over (all ranks done, or one failed: then the row says why).

        When several ranks are found dead at once, the reason names the one whose error is not
        merely a lost connection to a peer that died first.
        """
        codes = [(name, proc.poll()) for name, proc in self.procs]
        failed = [(name, code) for name, code in codes if code not in (None, 0)]
        if failed:
            reasons = [(f"{name} {_describe_exit(code)}: {_last_error(self.work / f'{name}.log')}")
                       for name, code in failed]
            reasons.sort(key=_is_peer_loss)
            self.fail(reasons[0])
            return True
        return all(code == 0 for _, code in codes)

    def _supervise(self, deadline: float) -> None:
        while not self._check_exits():
            if time.monotonic() > deadline:
                self.fail(f"timeout: job still running after {self.timeout:.0f} s (hung ranks killed)")
                return
            time.sleep(POLL_S)

    # -- clean up -----------------------------------------------------------------------
    def cleanup(self) -> None:
        """Kill every process group, stop the sampler, remove the cluster. Never raises."""
        _kill_groups([p for _, p in self.procs])
        self._kill_ranks()
        if self.sampler is not None:
            try:
                self.raw_path = Path(self.sampler.stop())
            except Exception as err:  # keep the job's outcome; say what the sampler did
                self.fail(f"sampler failed: {err}")
        self._gather_node_series()
        if self.cluster is not None:
            self.cluster.remove()


    def _gather_node_series(self) -> None:
        """Stop the nodes' samplers and merge their files into the job's one raw file."""
        if not self.node_samplers:
            return
        from driple.collect.multinode import merge_series

        parts = []
        for i, sampler in enumerate(self.node_samplers):
            try:
                parts.append(Path(sampler.stop()))
            except Exception as err:  # noqa: BLE001 - keep the job's outcome; say which node failed
                self.fail(f"node {i}'s sampler failed: {err}")
        try:
            if len(parts) == len(self.node_samplers):
                self.raw_path = merge_series(parts, self.raw_dir / f"{self.job_id}.npz")
        except DripleError as err:
            self.fail(str(err))
        finally:
            for part in parts:
                part.unlink(missing_ok=True)

    def _kill_ranks(self) -> None:
        """Ranks that torchrun started in sessions of their own (they outlive a killed agent)."""
        marker = str(self.work.resolve()).encode()
        for f in self.work.glob("*.pid"):
            try:
                pid = int(f.read_text())
                with open(f"/proc/{pid}/cmdline", "rb") as cmd:
                    if marker not in cmd.read():
                        continue  # not ours (pid reused)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ValueError):
                pass


# Ranks (and a torchrun agent) die with this process: the kernel's parent-death signal fires
# when the *thread* that started them exits, and that thread is the one running run_job, which
# outlives its ranks.
_DIE_WITH_US = parent_death_hook(signal.SIGKILL)


def stale_ranks() -> list[int]:
    """Pids of collector ranks (``driple.collect.workers.*`` processes) whose collector is gone:
    ranks of an older driple, or of a collector killed before they set their parent-death
    signal. They still train, and a measurement taken now would run against them."""
    import psutil

    stale = []
    for p in psutil.process_iter(["pid", "cmdline", "ppid", "create_time"]):
        cmd = p.info["cmdline"] or []
        if not any(a.startswith("driple.collect.workers.") for a in cmd) or p.pid == os.getpid():
            continue
        try:
            driver = p.environ().get(DRIVER_ENV, "")
        except psutil.Error:
            driver = ""
        if driver.isdigit():
            if not _running_since(int(driver), p.info["create_time"]):
                stale.append(p.pid)
        elif p.info["ppid"] == 1:  # no driver recorded: an orphan
            stale.append(p.pid)
    return stale


def _running_since(pid: int, t: float | None) -> bool:
    """True when ``pid`` is a live (not zombie) process started no later than ``t``."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and (t is None or proc.create_time() <= t + 1.0)
    except psutil.Error:
        return False


def _refuse_stale_ranks() -> None:
    """Remove namespaces of dead collectors (root), then refuse to start next to stale ranks."""
    if os.geteuid() == 0 and shutil.which("ip"):
        from driple.collect.netns import remove_stale

        remove_stale()
    stale = stale_ranks()
    if stale:
        pids = " ".join(str(p) for p in stale)
        raise DripleError(f"{len(stale)} rank(s) of a collector that is gone still run (pid {pids}); "
                          f"a job measured now would share the host with them. Stop them "
                          f"(kill {pids}) and run again")


def _kill_groups(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group, then SIGKILL what is still there after a grace period."""
    live = []
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            live.append(proc)
        except (ProcessLookupError, PermissionError):
            pass
    end = time.monotonic() + KILL_GRACE_S
    for proc in live:
        try:
            proc.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _last_error(log: Path) -> str:
    """The most telling line of a rank's output: its last exception line, else its last line."""
    try:
        lines = [l.strip() for l in log.read_text(errors="replace").splitlines() if l.strip()]
    except OSError:
        return "no output"
    lines = [re.sub(r"^\[rank\d+\]:\s*", "", l) for l in lines]  # torch's per-rank prefix
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Interrupt")) and " " not in head:
            return line[:300] + (_SHADOWED if "partially initialized module" in line else "")
    return lines[-1][:300] if lines else "no output"


#: A worker runs with ``python -m``, which puts the current directory first on its path: a file
#: there named like a module the standard library imports (``nt.py``, which ``ntpath`` tries
#: first) runs before torch has finished importing, and a worker then fails this way.
_SHADOWED = (" (a file in the directory the collector was started from, or on PYTHONPATH, may have the "
             "name of a module Python imports, such as nt.py or stat.py: start it from another directory)")


_PEER_LOSS = ("connection", "closed", "broken pipe", "reset by peer", "gloo", "nccl", "tensorpipe",
              "eof", "timed out", "terminated", "sigterm")


def _is_peer_loss(reason: str) -> bool:
    """True for errors that follow another rank's death (lost connections, killed by us)."""
    text = reason.lower()
    return any(word in text for word in _PEER_LOSS)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _require_gpus(setting: Setting) -> None:
    try:
        import torch

        have = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        have = 0
    if have < setting.workers:
        raise DripleError(f"setting {setting.id} needs {setting.workers} GPUs on this host; found {have}")


def _merge_logs(work: Path, dest: Path) -> None:
    with open(dest, "w") as out:
        for log in sorted(work.glob("*.log")):
            out.write(f"===== {log.stem} =====\n")
            out.write(log.read_text(errors="replace"))
