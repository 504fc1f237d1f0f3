"""The prediction commands, called as main([...]) against the tiny test registry."""
import json

from driple.cli import main
from driple.predict.colocate import slot_capacity
from driple.metrics import TARGETS  # every declared target (labels v2: with the step time)

PROFILE_KEYS = {"schema", "setting", "model", "metrics", "units", "intervals", "nominal_coverage",
                "resources", "inspector", "timings_s"}


def test_predict_json_schema(registry, capsys):
    assert main(["predict", "mlp", "--batch-size", "4", "--set", "hidden=32", "--set", "layers=1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert PROFILE_KEYS <= set(out)
    assert list(out["metrics"]) == list(TARGETS)
    assert set(out["intervals"]) == set(TARGETS) and out["nominal_coverage"] == 0.9
    assert set(out["resources"]) == {"compute", "memory", "tx", "rx"}
    assert out["setting"] == "cpu-ddp-w2-lo" and out["timings_s"]["total"] > 0


def test_predict_text_and_plot(registry, capsys, tmp_path):
    png = tmp_path / "p.png"
    assert main(["predict", "mlp", "--batch-size", "4", "--set", "hidden=32", "--plot", str(png)]) == 0
    text = capsys.readouterr().out
    assert "setting cpu-ddp-w2-lo" in text and "prediction interval" in text
    assert "burst amount" in text and png.stat().st_size > 1000


def test_user_mistakes_exit_2_with_a_reason(registry, capsys):
    assert main(["predict", "mlp", "--setting", "tpu-ddp-w2-lo"]) == 2
    assert "tpu" in capsys.readouterr().err
    assert main(["predict", "mlp", "--setting", "cpu-ps-p1w2-1g"]) == 2
    assert "known settings: cpu-ddp-w2-lo" in capsys.readouterr().err
    assert main(["predict", "no_such_model"]) == 2
    assert "no_such_model" in capsys.readouterr().err
    assert main(["predict", "no_such_pkg_abc:build"]) == 2
    assert "cannot import module" in capsys.readouterr().err
    assert main(["predict", "mlp", "--batch-size", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err


def test_settings_lists_registry(registry, capsys):
    assert main(["settings"]) == 0
    assert "cpu-ddp-w2-lo (default)" in capsys.readouterr().out
    assert main(["settings", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)
    assert entries[0]["setting"] == "cpu-ddp-w2-lo" and len(entries[0]["sha256"]) == 64
    assert entries[0]["checksum_ok"] is True


def test_settings_names_a_checkpoint_that_fails_its_checksum(registry, capsys):
    import shutil

    from driple.predict.registry import list_settings

    ckpt = registry / list_settings()[0]["path"]
    keep = ckpt.with_suffix(".keep")
    shutil.copy(ckpt, keep)
    try:
        with open(ckpt, "ab") as f:
            f.write(b"tampered")
        assert main(["settings"]) == 2
        out, err = capsys.readouterr()
        assert "CHECKSUM FAILS" in out and "checksum fails for cpu-ddp-w2-lo" in err
    finally:
        shutil.move(keep, ckpt)


def test_colocate_cli(registry, capsys):
    jobs = ["mlp,bs=4,hidden=32,layers=1", "mlp,bs=8,hidden=16,layers=1,opt=adam",
            "mlp,bs=2,hidden=8,layers=1"]
    assert main(["colocate", *jobs, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["jobs"]) == 3 and len(out["pairs"]) == 3
    assert out["capacity"]["compute"] == slot_capacity("cpu-ddp-w2-lo")["compute"]
    assert main(["colocate", *jobs[:2]]) == 0
    assert "verdict:" in capsys.readouterr().out
    assert main(["colocate", "mlp,bs=x"]) == 2
