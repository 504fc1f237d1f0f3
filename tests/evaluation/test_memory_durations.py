"""The memory durations' harness: leave one family out on jobs whose durations the cycle
explains exactly, and the rule that keeps the network's durations where the cycle loses."""
import numpy as np
import pandas as pd
import pytest

from driple.evaluation.memory import cycle_durations, cycle_wins
from driple.graph.memory_cycle import MemoryCycle, TailFit
from driple.hardware.host_speed import HostSpeed


def test_jobs_the_cycle_explains_are_scored_exactly():
    rng = np.random.default_rng(1)
    truth = TailFit([0.2, 0.5, 0.0, 0.1])
    host = HostSpeed(flops_per_s=1.0, memory_bytes_per_s=1.0)
    cycles, rows = [], []
    for i in range(30):
        levels = rng.uniform(1, 10, 6)
        c = MemoryCycle(np.arange(1.0, 7), np.zeros(6), levels, 6.0, 0.0, float(rng.uniform(0, 8)),
                        float(rng.uniform(1, 4)), ["sgd", "adam"][i % 2])
        step = float(rng.uniform(0.1, 2))
        share = truth.burst_fraction(c, 1.0, 1.0)
        if not 0.05 < share < 0.95:
            continue
        cycles.append(c)
        rows.append({"job_id": f"j{i}", "family": f"f{i % 3}", "step_time": step,
                     "memory_burst_duration": share * step, "memory_idle_duration": (1 - share) * step})
    frame = pd.DataFrame(rows)
    tails = np.array([truth.tail(c, 1.0, 1.0) for c in cycles])
    steps = {r["job_id"]: r["step_time"] * 1.1 for r in rows}  # a step predicted 10 % long
    rule = {r["job_id"]: r["step_time"] * 0.95 for r in rows}  # the unseen-family rule's: 5 % short
    r = cycle_durations(frame, cycles, (tails, np.full(len(rows), np.nan)), host, np.ones(len(rows), dtype=bool), steps,
                        rule)
    assert r["with_unseen_rule_step"]["idle_mape"] == pytest.approx(5.0, rel=1e-6)
    assert r["with_unseen_rule_step"]["step_mape"] == pytest.approx(5.0, rel=1e-6)
    assert r["with_measured_step"]["burst_mape"] == pytest.approx(0.0, abs=1e-6)
    assert r["with_measured_step"]["idle_mape"] == pytest.approx(0.0, abs=1e-6)
    assert r["with_held_out_step"]["burst_mape"] == pytest.approx(10.0, rel=1e-6)
    assert r["share_mae"] == pytest.approx(0.0, abs=1e-9)
    assert r["tail"]["fitted_on"] == f"{len(rows)} training jobs with a measured tail"


def test_the_cycle_is_used_only_where_it_beat_the_network():
    won = {"with_held_out_step": {"burst_mape": 13.4, "idle_mape": 14.2},
           "network_held_out": {"burst_mape": 19.8, "idle_mape": 32.3}}
    assert cycle_wins(won)
    assert not cycle_wins({**won, "network_held_out": {"burst_mape": 50.2, "idle_mape": 13.0}})
    assert not cycle_wins({"with_measured_step": {"burst_mape": 1.0, "idle_mape": 1.0}})
    # a family never trained on gets the unseen-family rule's step: where its figures exist they decide
    rule = {"with_unseen_rule_step": {"burst_mape": 12.0, "idle_mape": 13.0},
            "unseen_rule_held_out": {"burst_mape": 17.8, "idle_mape": 41.3}}
    assert cycle_wins({**won, **rule, "network_held_out": {"burst_mape": 10.0, "idle_mape": 10.0}})
    assert not cycle_wins({**won, **rule, "unseen_rule_held_out": {"burst_mape": 11.0, "idle_mape": 41.3}})
    assert cycle_wins({**won, "with_unseen_rule_step": rule["with_unseen_rule_step"]})  # no rule figures: as before


def test_the_unseen_rule_s_held_out_steps_are_read_beside_the_evaluation(tmp_path):
    import json

    from driple.errors import DripleError
    from driple.evaluation.memory import unseen_rule_held_out

    assert unseen_rule_held_out("s", str(tmp_path)) == {}
    nested = {"per_job": {"step_time": {"j1": 0.5, "j2": 1.0}},
              "mape": {"step_time": 9.5, "memory_burst_duration": 17.8, "memory_idle_duration": 41.3}}
    (tmp_path / "unseen_families.json").write_text(json.dumps({"settings": {"s": {"nested": nested}}}))
    assert unseen_rule_held_out("s", str(tmp_path)) == {
        "steps": {"j1": 0.5, "j2": 1.0}, "durations": {"burst_mape": 17.8, "idle_mape": 41.3}}
    assert unseen_rule_held_out("other", str(tmp_path)) == {}
    (tmp_path / "unseen_families.json").write_text("{not json")
    with pytest.raises(DripleError, match="not readable"):
        unseen_rule_held_out("s", str(tmp_path))


def test_the_report_says_which_durations_profiles_take():
    from driple.evaluation.reproduce.memory_report import report_memory

    cycle = {"with_measured_step": {"burst_mape": 6.7, "idle_mape": 9.6},
             "with_held_out_step": {"burst_mape": 13.4, "idle_mape": 14.2, "step_mape": 10.8},
             "network_held_out": {"burst_mape": 19.8, "idle_mape": 32.3}}
    lines = report_memory({"command": "fit", "date": "d", "settings": {
        "a": {"lofo_mape": 0.7, "lofo_median": 0.6, "cycle": cycle},
        "b": {"lofo_mape": 3.2, "lofo_median": 2.4, "out_of_zoo": {"x": {"mape": 14.6}},
              "cycle": {**cycle, "network_held_out": {"burst_mape": 50.2, "idle_mape": 13.0}}}}})
    rows = [line for line in lines if line.startswith("| a ") or line.startswith("| b ")]
    assert rows[0].endswith("| 13.4 / 14.2 % (10.8 %) | 19.8 / 32.3 % | - | - | the cycle |")
    assert "| 14.6 % |" in rows[1] and rows[1].endswith("| the inspector |")
    assert not any("another machine" in line for line in lines)
    ruled = {**cycle, "with_unseen_rule_step": {"burst_mape": 12.0, "idle_mape": 13.0, "step_mape": 9.5},
             "unseen_rule_held_out": {"burst_mape": 17.8, "idle_mape": 41.3}}
    row = [line for line in report_memory({"settings": {"c": {"lofo_mape": 0.7, "cycle": ruled}}})
           if line.startswith("| c ")][0]
    assert row.endswith("| 12.0 / 13.0 % (9.5 %) | 17.8 / 41.3 % | the cycle |")
    other = {"jobs": 83, "lofo_mape": 0.70, "lofo_median": 0.63, "out_of_zoo": {"v2/ooz": {"mape": 1.94}},
             "cycle": {"share_mae": 0.02, "with_measured_step": {"burst_mape": 6.2, "idle_mape": 7.0}}}
    lines = report_memory({"settings": {"b": {"lofo_mape": 3.2, "other_machines": {"v2/b": other}}}})
    assert ("- b, `v2/b` (83 jobs): amount 0.7 % (0.6 %); burst / idle with the measured step 6.2 / 7.0 %"
            "; out of zoo `v2/ooz`: 1.9 %") in lines
    carried = {**other, "carried": {"mape": 0.70, "median_ape": 0.5, "signed_median": 0.42}}
    lines = report_memory({"settings": {"b": {"lofo_mape": 3.2, "other_machines": {"v2/b": carried}}}})
    assert any(line.startswith("- b, `v2/b` (83 jobs): amount 0.7 % (0.6 %), with the shipped machine's fit 0.7 %;")
               for line in lines)
    assert report_memory({"settings": {}}) == []
