"""The discrete-event simulation (SimPy): trace jobs arrive, wait in one FIFO queue, are placed by
a policy, run slowed down by their neighbours, and finish.

A job holds ``remaining`` seconds of solo work. While it runs, it progresses at ``1 / s`` per
second, ``s`` the largest slow-down over its nodes (its workers step together) that
:class:`~driple.schedule.interference.InterferenceModel` gives for the *measured* profiles of
the jobs on that node. Whenever a node's jobs change, the jobs on it are woken, book the work
done at the old pace and go on at the new one.

The queue is strict FIFO (the head job waits until the policy places it; nothing overtakes it),
the same for every policy. A **co-location** is a job's worker placed on a node that runs
another job; it is a **violation** when the jobs' measured memory (peak + resident) exceeds the
node's, or when one of them is slowed down by more than ``max_slowdown`` (1.15x). An
out-of-memory placement is not started: the job goes back to the head of the queue and waits
for empty nodes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from driple.errors import DripleError
from driple.predict.colocate import MAX_OVERLOAD
from driple.schedule.cluster import MAX_SHARE, Cluster
from driple.schedule.interference import InterferenceModel
from driple.schedule.policies import get_policy
from driple.schedule.trace import catalogue_index

MAX_SLOWDOWN = 1.15  # a co-location "fits" when no job is slowed down by more (datasets/v2/README.md)
NOISE_LEVELS = (0.0, 0.10, 0.25, 0.50)


@dataclass(eq=False)
class SimJob:
    """One trace job as simulated: its catalogue job, workers, the predicted profile its policy
    may judge it by (noise included), and what happened to it (s from the trace's start)."""

    trace: object
    entry: object
    workers: int
    predicted: object
    remaining: float = 0.0
    start: float | None = None
    finish: float | None = None
    nodes: list = field(default_factory=list)
    exclusive: bool = False
    changed: object = None

    def profile(self, view: str):
        return self.predicted if view == "predicted" else self.entry.measured

    @property
    def jct(self) -> float:
        return self.finish - self.trace.arrival_s


@dataclass
class SimResult:
    """What a simulation did: every job and the co-location counts."""

    policy: str
    nodes: int
    jobs: list
    colocations: int
    slowdown_violations: int
    oom_violations: int
    compute_capacity: float
    noise: float = 0.0
    seed: int = 0

    def jcts(self) -> np.ndarray:
        return np.array([j.jct for j in self.jobs])

    def summary(self) -> dict:
        """Average and p99 JCT (s), makespan (s), compute utilisation, co-locations and violations."""
        jct = self.jcts()
        first = min(j.trace.arrival_s for j in self.jobs)
        makespan = max(j.finish for j in self.jobs) - first
        work = sum(j.workers * j.trace.duration_s * j.entry.measured.mean_load("compute") for j in self.jobs)
        violations = self.slowdown_violations + self.oom_violations
        slow = [(j.finish - j.start) / j.trace.duration_s for j in self.jobs]
        return {"policy": self.policy, "noise": self.noise, "seed": self.seed, "jobs": len(self.jobs),
                "nodes": self.nodes, "avg_jct_s": float(jct.mean()), "p99_jct_s": float(np.quantile(jct, 0.99)),
                "makespan_s": float(makespan),
                "utilisation": float(work / (self.compute_capacity * self.nodes * makespan)) if makespan > 0 else 0.0,
                "mean_slowdown": float(np.mean(slow)), "colocations": self.colocations,
                "violations": violations, "slowdown_violations": self.slowdown_violations,
                "oom_violations": self.oom_violations,
                "violation_share": violations / self.colocations if self.colocations else 0.0}


class Simulation:
    """One policy on one cluster for one list of :class:`SimJob` (module doc)."""

    def __init__(self, jobs: list, cluster: Cluster, policy, model: InterferenceModel | None = None,
                 seed: int = 0, max_slowdown: float = MAX_SLOWDOWN):
        self.jobs = sorted(jobs, key=lambda j: (j.trace.arrival_s, j.trace.job_id))
        self.cluster = cluster
        self.policy = get_policy(policy) if isinstance(policy, str) else policy
        self.model = model or InterferenceModel()
        self.rng = np.random.default_rng(seed)
        self.max_slowdown = max_slowdown
        self.queue: list = []
        self.colocations = self.slowdown_violations = self.oom_violations = 0
        self._slow: dict = {}

    # -- interference ---------------------------------------------------------------------
    def node_slowdowns(self, node) -> dict:
        """``{job: slow-down}`` of the jobs on ``node`` (measured profiles)."""
        if len(node.residents) <= 1:
            return {j: 1.0 for j in node.residents}
        key = tuple(j.entry.job_id for j in node.residents)
        if key not in self._slow:
            self._slow[key] = self.model.slowdowns([j.entry.measured for j in node.residents],
                                                   node.capacity["compute"])
        return {j: float(s) for j, s in zip(node.residents, self._slow[key])}

    def slowdown(self, job: SimJob) -> float:
        return max(self.node_slowdowns(n)[job] for n in job.nodes)

    def _out_of_memory(self, node) -> bool:
        cap = node.capacity.get("memory")
        if cap is None:
            return False
        used = sum(j.entry.measured.metrics["memory_burst_amount"] + (j.entry.measured.resident or {}).get("memory", 0.0)
                   for j in node.residents)
        return used > cap

    # -- events ---------------------------------------------------------------------------
    def run(self) -> SimResult:
        import simpy

        self.env = simpy.Environment()
        for job in self.jobs:
            job.remaining = job.trace.duration_s
            self.env.process(self._arrive(job))
        self.env.run()
        unfinished = [j for j in self.jobs if j.finish is None]
        if unfinished:
            raise DripleError(f"{len(unfinished)} jobs never ran (first: {unfinished[0].trace.job_id}, "
                              f"{unfinished[0].workers} workers on {len(self.cluster)} nodes)")
        return SimResult(policy=self.policy.name, nodes=len(self.cluster), jobs=self.jobs,
                         colocations=self.colocations, slowdown_violations=self.slowdown_violations,
                         oom_violations=self.oom_violations,
                         compute_capacity=self.cluster.nodes[0].capacity["compute"])

    def _arrive(self, job: SimJob):
        yield self.env.timeout(job.trace.arrival_s)
        self.queue.append(job)
        self._schedule()

    def _schedule(self) -> None:
        while self.queue:
            head = self.queue[0]
            nodes = self.policy.place(head, self.cluster, self.rng)
            if nodes is None:
                return
            if self._start(head, nodes):
                self.queue.pop(0)

    def _start(self, job: SimJob, nodes: list) -> bool:
        shared = [n for n in nodes if n.residents]
        for n in nodes:
            n.residents.append(job)
        if any(self._out_of_memory(n) for n in shared):
            for n in nodes:
                n.residents.remove(job)
            self.colocations += len(shared)
            self.oom_violations += sum(self._out_of_memory_with(n, job) for n in shared)
            job.exclusive = True
            return False
        for n in shared:
            self.colocations += 1
            if max(self.node_slowdowns(n).values()) > self.max_slowdown:
                self.slowdown_violations += 1
        job.nodes, job.start = list(nodes), self.env.now
        self._wake(shared, but=job)
        self.env.process(self._run(job))
        return True

    def _out_of_memory_with(self, node, job) -> bool:
        node.residents.append(job)
        try:
            return self._out_of_memory(node)
        finally:
            node.residents.remove(job)

    def _run(self, job: SimJob):
        while True:
            job.changed = self.env.event()
            pace = self.slowdown(job)
            t0 = self.env.now
            done = self.env.timeout(job.remaining * pace)
            fired = yield self.env.any_of([done, job.changed])
            if done in fired:
                break
            job.remaining = max(job.remaining - (self.env.now - t0) / pace, 0.0)
        job.remaining, job.finish, job.changed = 0.0, self.env.now, None
        for n in job.nodes:
            n.residents.remove(job)
        self._wake(job.nodes, but=job)
        self._schedule()

    def _wake(self, nodes: list, but: SimJob) -> None:
        for n in nodes:
            for other in n.residents:
                if other is not but and other.changed is not None and not other.changed.triggered:
                    other.changed.succeed()


def sim_jobs(trace, catalogue, nodes: int, noise: float = 0.0, seed: int = 0) -> list:
    """:class:`SimJob` of every trace job: catalogue job by the mapping rule
    (:func:`driple.schedule.trace.catalogue_index`), workers = GPUs (at most ``nodes``), and a
    predicted profile with each metric scaled by ``1 + U(-noise, noise)`` (seeded)."""
    from driple.predict.profile import ResourceProfile

    if not 0.0 <= noise < 1.0:
        raise DripleError(f"noise is a relative amplitude in [0, 1), got {noise}")
    rng = np.random.default_rng([seed, 7])
    out = []
    for t in trace.jobs:
        entry = catalogue.jobs[catalogue_index(t.job_id, len(catalogue))]
        predicted = entry.predicted
        if noise > 0:
            p = entry.predicted
            predicted = ResourceProfile(setting=p.setting, model=p.model, resident=p.resident,
                                        metrics={m: v * (1.0 + rng.uniform(-noise, noise)) for m, v in p.metrics.items()})
        out.append(SimJob(trace=t, entry=entry, workers=max(1, min(int(t.gpus), nodes)), predicted=predicted))
    return out


def simulate(trace, policy: str, catalogue=None, nodes: int = 16, seed: int = 0, noise: float = 0.0,
             max_share: int = MAX_SHARE, model: InterferenceModel | None = None,
             max_overload: float = MAX_OVERLOAD) -> SimResult:
    """Run ``policy`` on ``trace`` (a :class:`~driple.schedule.trace.Trace`) over ``nodes`` worker
    slots of the catalogue's setting (default catalogue: the shipped one)."""
    from driple.schedule.catalogue import load_catalogue

    catalogue = catalogue or load_catalogue()
    pol = get_policy(policy, max_overload=max_overload)
    cluster = Cluster.uniform(nodes, catalogue.capacity, max_share=max_share)
    jobs = sim_jobs(trace, catalogue, nodes, noise=noise, seed=seed)
    res = Simulation(jobs, cluster, pol, model=model, seed=seed).run()
    res.noise, res.seed = noise, seed
    return res


def run_policies(trace, policies=("fifo", "random", "driple", "oracle"), catalogue=None, nodes: int = 16,
                 seed: int = 0, noise: float = 0.0, max_share: int = MAX_SHARE,
                 max_overload: float = MAX_OVERLOAD) -> dict:
    """``{policy: SimResult}`` for each of ``policies`` on the same jobs."""
    from driple.schedule.catalogue import load_catalogue

    catalogue = catalogue or load_catalogue()
    for p in policies:
        get_policy(p)  # unknown names fail before any work
    return {p: simulate(trace, p, catalogue=catalogue, nodes=nodes, seed=seed, noise=noise, max_share=max_share,
                        max_overload=max_overload)
            for p in policies}
