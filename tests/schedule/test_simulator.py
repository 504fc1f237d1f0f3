"""A 3-job, 2-node schedule worked out by hand for each policy; every number is derived in a comment.

Profiles (one worker each, compute capacity 100 % per node, memory 1000 MB):
- A: compute 100 % all the time (burst 1 s, idle 0 s: duty 1);
- P: compute 40 % for half the time (burst 1 s, idle 1 s: duty 0.5); memory 100 MB for both.
Jobs: J1 measured A but predicted P (driple is wrong about it), J2 and J3 measured and predicted P.
J1 and J2 arrive at 0 s and run 100 s alone; J3 arrives at 10 s and runs 50 s alone.
The interference model runs with alpha = beta = 0 so that its numbers can be worked by hand.
"""
from __future__ import annotations

import pytest

from driple.metrics import RESOURCES, target_names
from driple.predict.profile import ResourceProfile
from driple.schedule.catalogue import CatalogueJob
from driple.schedule.cluster import Cluster
from driple.schedule.interference import InterferenceModel
from driple.schedule.policies import get_policy
from driple.schedule.report import gain_share
from driple.schedule.simulator import SimJob, Simulation
from driple.schedule.trace import TraceJob

CAPACITY = {"compute": 100.0, "memory": 1000.0}
FAIR = InterferenceModel(alpha=0.0, beta=0.0)


def prof(name, compute, memory=(100.0, 1.0, 1.0)):
    m = {}
    zero = (0.0, 0.0, 1.0)
    for r, shape in zip(RESOURCES, (compute, memory, zero, zero)):
        m.update({f"{r}_burst_amount": shape[0], f"{r}_burst_duration": shape[1], f"{r}_idle_duration": shape[2]})
    if "step_time" in target_names():
        m["step_time"] = 1.0
    return ResourceProfile("cpu-ddp-w2-1g", name, m)


A = prof("A", (100.0, 1.0, 0.0))
P = prof("P", (40.0, 1.0, 1.0))


def jobs():
    def job(jid, arrival, duration, measured, predicted):
        entry = CatalogueJob(job_id=f"cat-{jid}", name=jid, measured=measured, predicted=predicted)
        return SimJob(trace=TraceJob(jid, arrival, 1, duration), entry=entry, workers=1, predicted=predicted)

    return [job("J1", 0.0, 100.0, A, P), job("J2", 0.0, 100.0, P, P), job("J3", 10.0, 50.0, P, P)]


def run(policy):
    return Simulation(jobs(), Cluster.uniform(2, CAPACITY), get_policy(policy), model=FAIR).run()


def finish(res):
    return {j.trace.job_id: j.finish for j in res.jobs}


def test_fifo_waits_for_an_empty_node():
    # J1 on node 0 and J2 on node 1 from 0 to 100 s; J3 waits and runs 100-150 s:
    # JCTs 100, 100, 140 -> average 113.33 s, makespan 150 s, nothing shared
    res = run("fifo")
    assert finish(res) == pytest.approx({"J1": 100.0, "J2": 100.0, "J3": 150.0})
    s = res.summary()
    assert s["avg_jct_s"] == pytest.approx(340.0 / 3)
    assert s["makespan_s"] == pytest.approx(150.0)
    assert s["colocations"] == 0 and s["violations"] == 0


def test_oracle_packs_the_pair_that_fits():
    # measured: node 0 holds A (A + P: mean 100 + 20 = 120 % > 100 %: "does not fit"); node 1
    # holds P (P + P: at most 80 % at once: "packs well"). J3 shares node 1; 40 + 40 <= 100 never
    # overloads, so nobody slows down: J3 runs 10-60 s. JCTs 100, 100, 50 -> 83.33 s, makespan 100 s
    res = run("oracle")
    assert finish(res) == pytest.approx({"J1": 100.0, "J2": 100.0, "J3": 60.0})
    s = res.summary()
    assert s["avg_jct_s"] == pytest.approx(250.0 / 3)
    assert (s["colocations"], s["violations"]) == (1, 0)


def test_driple_trusts_its_wrong_prediction_and_pays_for_it():
    # predicted, node 0 (J1 predicted P) fits first, so J3 joins J1, which is really A.
    # J3 in burst always meets J1 in burst: demand 140 -> stretch 1.4, slow-down 1 + 0.5 x 0.4 = 1.2.
    # J3's duty cycle stretched: 0.5 x 1.4 / (0.5 + 0.7) = 7/12, so J1's stretch is
    # 1 + 0.4 x 7/12 = 1.2333 and (duty 1) its slow-down too.
    # J3: 50 s of work at 1/1.2 -> 60 s, done at 70 s. J1: 90 s left at 10 s; by 70 s it did
    # 60 / 1.2333 = 48.65 s, so 41.35 s left alone: done at 111.35 s. J2 alone: 100 s.
    res = run("driple")
    f = finish(res)
    j1 = 70.0 + 90.0 - 60.0 / (1.0 + 0.4 * 7.0 / 12.0)
    assert f == pytest.approx({"J1": j1, "J2": 100.0, "J3": 70.0})
    s = res.summary()
    assert s["avg_jct_s"] == pytest.approx((j1 + 100.0 + 60.0) / 3)
    assert s["makespan_s"] == pytest.approx(j1)
    assert (s["colocations"], s["violations"], s["slowdown_violations"]) == (1, 1, 1)  # 1.23x > 1.15x
    # share of the oracle's gain: (113.33 - 90.45) / (113.33 - 83.33) = 0.763
    fifo, oracle = run("fifo").summary(), run("oracle").summary()
    assert gain_share(fifo, oracle, s) == pytest.approx((340.0 / 3 - s["avg_jct_s"]) / 30.0)
    assert gain_share(fifo, oracle, oracle) == pytest.approx(1.0)
    assert gain_share(fifo, fifo, oracle) is None  # an oracle that gains nothing: nothing to recover


def test_out_of_memory_placement_is_refused_and_waits():
    # J3 needs 950 MB: beside any 100 MB job it exceeds the node's 1000 MB; random packing tries,
    # counts the violation, and J3 waits for an empty node (100-150 s), as under FIFO
    big = prof("big", (40.0, 1.0, 1.0), memory=(950.0, 1.0, 1.0))
    js = jobs()
    js[2] = SimJob(trace=js[2].trace, entry=CatalogueJob("cat-big", "big", big, big), workers=1, predicted=big)
    res = Simulation(js, Cluster.uniform(2, CAPACITY), get_policy("random"), model=FAIR).run()
    assert finish(res)["J3"] == pytest.approx(150.0)
    assert res.oom_violations == 1


def test_a_job_wider_than_the_cluster_is_an_error():
    from driple.errors import DripleError

    js = jobs()
    js[0].workers = 3
    with pytest.raises(DripleError, match="never ran"):
        Simulation(js, Cluster.uniform(2, CAPACITY), get_policy("fifo"), model=FAIR).run()
