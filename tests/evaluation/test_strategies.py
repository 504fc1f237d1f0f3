"""Predicted against measured order of two strategies, judged by hand."""
from driple.evaluation.strategies import judge


def test_agreeing_and_disagreeing_orders():
    v = judge((1.0, 2.0), (1.5, 1.8), ("ddp", "fsdp"))
    assert v["measured_lower"] == v["predicted_lower"] == "ddp" and v["agrees"] and not v["tie"]
    v = judge((2.0, 1.0), (1.5, 1.8), ("ddp", "fsdp"))
    assert v["measured_lower"] == "fsdp" and v["predicted_lower"] == "ddp" and not v["agrees"]


def test_a_difference_within_the_noise_is_a_tie():
    assert judge((100.0, 104.0), (1, 2), ("a", "b"), tie=0.05)["tie"]
    assert not judge((100.0, 106.0), (1, 2), ("a", "b"), tie=0.05)["tie"]


def _job(model, family, batch, job_id):
    config = {"model": model, "knobs": {"width": 1.0}, "batch_size": batch, "optimizer": "sgd"}
    return (config, {"job_id": job_id + "-a", "family": family}, {"job_id": job_id, "family": family})


def test_first_per_family_follows_the_grid_and_passes_over_unmeasured_jobs(tmp_path):
    import pytest

    from driple.errors import DripleError
    from driple.evaluation.strategies import first_per_family

    grid = tmp_path / "grid.yaml"
    grid.write_text("seconds: 6\njobs:\n"
                    "- {model: vgg, knobs: {width: 1.0}, batch_size: 8, optimizer: sgd}\n"      # not measured
                    "- {model: resnet, knobs: {width: 1.0}, batch_size: 4, optimizer: sgd}\n"
                    "- {model: resnet, knobs: {width: 1.0}, batch_size: 8, optimizer: sgd}\n"   # resnet again
                    "- {model: vgg, knobs: {width: 1.0}, batch_size: 16, optimizer: sgd}\n"
                    "- {model: gpt, knobs: {width: 1.0}, batch_size: 2, optimizer: sgd}\n")
    jobs = [_job("gpt", "gpt", 2, "g2"), _job("vgg", "vgg", 16, "v16"), _job("resnet", "resnet", 8, "r8"),
            _job("resnet", "resnet", 4, "r4")]  # in dataset order, not the grid's
    chosen = first_per_family(jobs, grid, 2)
    assert [b["job_id"] for _, _, b in chosen] == ["r4", "v16"]
    assert [b["job_id"] for _, _, b in first_per_family(jobs, grid, 3)] == ["r4", "v16", "g2"]
    with pytest.raises(DripleError, match="only 3 families"):
        first_per_family(jobs, grid, 4)


def test_pairs_table_has_one_line_per_model_and_metric():
    from driple.evaluation.strategies import pairs_table

    rows = [{"job_id": "r4", "optimizer": "sgd", "metric": "step_time",
             **judge((1.0, 2.0), (1.5, 1.8), ("ddp", "fsdp"))},
            {"job_id": "r4", "optimizer": "sgd", "metric": "memory_burst_amount",
             **judge((200.0, 190.0), (210.0, 215.0), ("ddp", "fsdp"))}]
    table = pairs_table({"settings": ["ddp", "fsdp"], "rows": rows})
    lines = table.splitlines()
    assert lines[2].startswith("| r4 (sgd) | step_time (s) | 1 | 2 | 1.5 | 1.8 | ddp | ddp | yes | no |")
    assert "| fsdp | ddp | **no** | no |" in lines[3]
    assert lines[-1] == "The predicted order agrees with the measured one on 1 of 2 pairs."
