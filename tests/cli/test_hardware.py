"""``driple hardware`` and ``driple predict --hardware``, called as main([...])."""
import json
from pathlib import Path

import pytest

from driple.cli import main
from driple.hardware.spec import HardwareSpec

ROOT = Path(__file__).resolve().parents[2]


def test_probe_json_is_a_spec_and_show_reads_it(capsys, tmp_path):
    assert main(["hardware", "probe", "--json", "--repeats", "1"]) == 0
    record = json.loads(capsys.readouterr().out)
    spec = HardwareSpec.from_dict(record)
    assert spec.flops_per_s > 0 and spec.threads_per_worker == 1
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(record))
    assert main(["hardware", "show", str(path)]) == 0
    text = capsys.readouterr().out
    assert "matmul GFLOP/s on 1 thread(s)" in text and "copy:" in text
    assert main(["hardware", "probe", "--threads", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err


def shipped(monkeypatch):
    monkeypatch.setenv("DRIPLE_MODELS", str(ROOT / "trained_models"))


def test_predict_for_another_spec_carries_durations_only(monkeypatch, capsys, tmp_path):
    shipped(monkeypatch)
    args = ["predict", "resnet", "--set", "depth=20", "--batch-size", "32", "--setting", "cpu-ps-p1w2-1g", "--json"]
    assert main(args) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["hardware"]["described"] == "trained"
    spec = HardwareSpec.from_dict(trained["hardware"]["spec"])
    slower = HardwareSpec.from_dict({**spec.to_dict(), "matmul_flops_per_s": {"float32": spec.flops_per_s / 2},
                                     "copy_bytes_per_s": spec.copy_bytes_per_s / 2})
    path = tmp_path / "slow.json"
    path.write_text(slower.to_json())
    assert main([*args, "--hardware", str(path)]) == 0
    carried = json.loads(capsys.readouterr().out)
    assert carried["hardware"]["described"] == str(path)
    # the error this inspector's carried predictions were measured with (registry "carried")
    assert "measured_error" not in trained["hardware"]
    measured = carried["hardware"]["measured_error"]
    assert measured and all(m["jobs"] > 0 and m["step_time_mape"] > 0 for m in measured)
    m0, m1 = trained["metrics"], carried["metrics"]
    assert m1["step_time"] > m0["step_time"] and m1["compute_burst_duration"] > m0["compute_burst_duration"]
    assert m1["compute_burst_amount"] == m0["compute_burst_amount"]  # amounts stay
    assert main(["predict", "mlp", "--setting", "cpu-ps-p1w2-1g", "--batch-size", "8",
                 "--hardware", str(path)]) == 0
    text = capsys.readouterr().out
    assert "hardware: " in text
    assert f"measured error when carried to {measured[0]['machine']} ({measured[0]['jobs']} jobs): step time " \
        f"{measured[0]['step_time_mape']:.1f} % MAPE" in text


def test_carried_summary_and_its_registration(monkeypatch, capsys, tmp_path):
    import importlib.util
    import shutil

    from driple.evaluation.hardware import carried_summary
    from driple.errors import DripleError
    from driple.predict.formatting import carried_error_lines

    result = {"setting": "cpu-ddp-w2-lo", "dataset": "d", "jobs": 3, "targets": {
        "step_time": {"carried": {"mape": 11.04}}, "compute_burst_duration": {"carried": {"mape": 10.0}},
        "memory_idle_duration": {"carried": {"mape": 30.0}}, "tx_burst_duration": {"carried": {"mape": 20.0}},
        "memory_burst_amount": {"carried": {"mape": 99.0}}}}
    s = carried_summary(result, "a slower host")
    assert (s["machine"], s["jobs"], s["step_time_mape"], s["durations_median_mape"]) == ("a slower host", 3, 11.04, 20.0)
    with pytest.raises(DripleError, match="no carried step time"):
        carried_summary({"dataset": "d", "targets": {}}, "x")
    assert carried_error_lines(None) == [] and "not measured" in carried_error_lines([])[0]
    # the script writes the entry of a copy of the shipped registry, and refuses another setting's file
    root = tmp_path / "models"
    shutil.copytree(ROOT / "trained_models", root, ignore=shutil.ignore_patterns("evaluation"))
    monkeypatch.setenv("DRIPLE_MODELS", str(root))
    (tmp_path / "e.json").write_text(json.dumps(result))
    spec = importlib.util.spec_from_file_location("register_carried", ROOT / "scripts" / "register_carried.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--setting", "cpu-ddp-w2-lo", "--evaluation", str(tmp_path / "e.json"),
                        "--machine", "a slower host"]) == 0
    entry = next(e for e in json.loads((root / "registry.json").read_text())["inspectors"]
                 if e["setting"] == "cpu-ddp-w2-lo")
    assert entry["carried"][0]["machine"] == "a slower host"
    assert script.main(["--setting", "cpu-ps-p1w2-1g", "--evaluation", str(tmp_path / "e.json"),
                        "--machine", "x"]) == 2
    assert "evaluates 'cpu-ddp-w2-lo', not 'cpu-ps-p1w2-1g'" in capsys.readouterr().err


def test_empty_and_unreadable_arguments_say_so_in_one_line(monkeypatch, capsys, tmp_path):
    shipped(monkeypatch)
    for opt in ("--setting", "--plot", "--hardware"):
        assert main(["predict", "mlp", opt, ""]) == 2
        err = capsys.readouterr().err
        assert f"{opt} is empty" in err and err.count("\n") == 1
    assert main(["predict", "mlp", "--hardware", str(tmp_path / "none.json")]) == 2
    assert "no hardware spec at" in capsys.readouterr().err


def test_an_unwritable_plot_keeps_the_prediction(monkeypatch, capsys, tmp_path):
    shipped(monkeypatch)
    target = tmp_path / "missing-dir" / "p.png"
    assert main(["predict", "mlp", "--batch-size", "8", "--plot", str(target)]) == 2
    out, err = capsys.readouterr()
    assert "step time" in out  # printed before the plot failed
    assert "cannot write the plot" in err and err.count("\n") == 1
