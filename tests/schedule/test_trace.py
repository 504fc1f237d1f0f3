"""Trace readers on tiny hand-written fixtures in the real formats (test fixtures, not trace rows)."""
from __future__ import annotations

import json

import pytest

from driple.errors import DripleError
from driple.schedule.trace import (
    Trace,
    TraceJob,
    catalogue_index,
    offered_load,
    read_trace,
    scale_to_load,
    subsample,
    synthetic_trace,
    write_trace,
)

# TEST FIXTURE, made up for this test: the Helios cluster_log.csv header with invented rows
HELIOS = """job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
j1,u1,vc1,1,6,1,COMPLETED,2020-09-01 00:00:10,2020-09-01 00:00:10,2020-09-01 00:10:10,600,0
j2,u2,vc1,0,4,1,COMPLETED,2020-09-01 00:00:20,2020-09-01 00:00:20,2020-09-01 00:01:20,60,0
j3,u1,vc2,8,48,1,FAILED,2020-09-01 00:01:10,2020-09-01 00:02:10,2020-09-01 01:02:10,3600,60
j4,u3,vc2,2,12,1,CANCELLED,2020-09-01 00:00:00,2020-09-01 00:00:00,2020-09-01 00:00:00,0,0
"""

# TEST FIXTURE, made up for this test: two entries in the Philly cluster_job_log schema
PHILLY = [
    {"status": "Pass", "vc": "v1", "jobid": "application_1", "user": "u1", "submitted_time": "2017-10-03 00:00:00",
     "attempts": [{"start_time": "2017-10-03 00:01:00", "end_time": "2017-10-03 00:02:00", "detail": []},
                  {"start_time": "2017-10-03 00:03:00", "end_time": "2017-10-03 00:13:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}, {"ip": "m2", "gpus": ["gpu0"]}]}]},
    {"status": "Killed", "vc": "v1", "jobid": "application_2", "user": "u2", "submitted_time": "2017-10-03 00:05:00",
     "attempts": []},
]


def test_helios_rows_become_jobs_from_the_first_submit(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HELIOS)
    trace = read_trace(path)
    # j2 (no GPU) and j4 (no run time) are left out; times from j1's submit
    assert trace.kind == "helios"
    assert trace.jobs == [TraceJob("j1", 0.0, 1, 600.0), TraceJob("j3", 60.0, 8, 3600.0)]


def test_philly_duration_sums_attempts_and_size_is_the_last_attempt(tmp_path):
    path = tmp_path / "cluster_job_log"
    path.write_text(json.dumps(PHILLY))
    trace = read_trace(path)
    # 60 s + 600 s of attempts; 3 GPUs on the last; application_2 never ran
    assert trace.kind == "philly"
    assert trace.jobs == [TraceJob("application_1", 0.0, 3, 660.0)]


def test_driple_csv_round_trips(tmp_path):
    trace = synthetic_trace(20, seed=3)
    write_trace(trace, tmp_path / "t.csv")
    back = read_trace(tmp_path / "t.csv")
    assert [j.job_id for j in back.jobs] == [j.job_id for j in trace.jobs]
    assert [j.duration_s for j in back.jobs] == pytest.approx([j.duration_s for j in trace.jobs], abs=1e-3)


@pytest.mark.parametrize("text, match", [
    ("a,b,c\n1,2,3\n", "is not a trace"),
    (HELIOS.replace(",600,0", ",ten minutes,0"), "line 2: malformed helios"),
    ("[{\"jobid\": \"x\"}]", "malformed Philly"),
    ("[1, 2", "not a Philly cluster_job_log"),
])
def test_malformed_traces_say_where(tmp_path, text, match):
    path = tmp_path / "trace.csv"
    path.write_text(text)
    with pytest.raises(DripleError, match=match):
        read_trace(path)


def test_subsample_load_and_mapping():
    trace = synthetic_trace(200, seed=1)
    sub = subsample(trace, 50, seed=2)
    assert len(sub) == 50 and sub.jobs[0].arrival_s == 0.0
    scaled = scale_to_load(sub, 8, 0.7)
    assert offered_load(scaled.jobs, 8) == pytest.approx(0.7)
    assert catalogue_index("j1", 151) == catalogue_index("j1", 151) < 151
    assert isinstance(subsample(trace, None), Trace)
