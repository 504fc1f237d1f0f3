"""Damaged inputs give one line `driple: error: ...` and exit 2, never a traceback; called as
main([...])."""
from pathlib import Path

import pytest

from driple.cli import main
from driple.collect.results import BASE_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "trained_models" / "cpu-ddp-w2-lo"


def _dataset(path: Path, damage: str) -> Path:
    """A results.csv of three ok rows, the second one garbled (a stray comma) or truncated."""
    path.mkdir()
    header = list(BASE_COLUMNS)
    rows = []
    for i in range(3):
        row = {c: "1.0" for c in header}
        row.update(job_id=f"job{i}", setting="cpu-ddp-w2-lo", model="mlp", family="mlp",
                   knobs="{}", batch_size="8", optimizer="sgd", status="ok", reason="",
                   started="2026-01-01T00:00:00", raw_path="")
        rows.append(",".join(row[c] for c in header))
    if damage == "garbled":
        rows[1] = rows[1].replace(",mlp,", ",ml,p,", 1)
    elif damage == "binary":
        rows[1] = rows[1].replace(",mlp,", ",m\x00\x00p,", 1)  # a disk error's bytes
    else:
        rows[1] = ",".join(rows[1].split(",")[:12])  # cut off mid-row
    (path / "results.csv").write_text("\n".join([",".join(header), *rows]) + "\n")
    return path


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("driple: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("damage", ["garbled", "truncated"])
def test_a_damaged_results_line_is_named(tmp_path, capsys, damage):
    ds = _dataset(tmp_path / "ds", damage)
    commands = [
        ["train", "--dataset", str(ds), "--out", str(tmp_path / "out"), "--quiet"],
        ["evaluate", str(SHIPPED), "--dataset", str(ds), "--quiet"],
        ["collect", "relabel", str(ds), "--no-progress"],
    ]
    for argv in commands:
        assert main(argv) == 2, argv
        err = _one_error_line(capsys)
        assert f"{ds / 'results.csv'} line 3:" in err and f"a {damage} row" in err, err
    assert not (tmp_path / "out").exists()


def test_binary_bytes_a_cut_header_and_an_empty_table_are_named(tmp_path, capsys):
    """A line with binary bytes, a header cut short into garbage (it once read as "labels v1"),
    a table of a header alone: one line each, naming what is wrong."""
    ds = _dataset(tmp_path / "ds", "binary")
    train = ["train", "--dataset", str(ds), "--out", str(tmp_path / "out"), "--quiet"]
    assert main(train) == 2
    assert f"{ds / 'results.csv'} line 3: binary bytes" in _one_error_line(capsys)
    text = (ds / "results.csv").read_text()
    (ds / "results.csv").write_text(text[:200] + "\x00\x01garbage")
    assert main(train) == 2
    assert "line 1: the header holds binary bytes" in _one_error_line(capsys)
    (ds / "results.csv").write_text(text.splitlines()[0] + "\n")
    assert main(train) == 2
    assert "holds no job rows, only a header" in _one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def _damaged_copies(tmp_path: Path) -> list[Path]:
    data = (SHIPPED / "inspector.pt").read_bytes()
    files = []
    for name, content in [("empty", b""), ("tenth", data[: len(data) // 10]),  # OSError in torch
                          ("half", data[: len(data) // 2]), ("text", b"hello, world\n")]:
        (tmp_path / f"{name}.pt").write_bytes(content)
        files.append(tmp_path / f"{name}.pt")
    damaged = bytearray(data)
    start = damaged.find(b"data.pkl") + 200  # inside the pickled dict
    damaged[start:start + 60] = b"A" * 60
    (tmp_path / "damaged.pt").write_bytes(bytes(damaged))
    return files + [tmp_path / "damaged.pt"]


def test_a_truncated_or_damaged_checkpoint_is_one_line(tmp_path, capsys):
    for ckpt in _damaged_copies(tmp_path):
        assert main(["evaluate", str(ckpt), "--dataset", str(tmp_path)]) == 2, ckpt
        err = _one_error_line(capsys)
        assert f"{ckpt} is not a readable driple inspector checkpoint" in err, err
        assert "weights_only" not in err  # torch's advice would run code from the file
        assert main(["predict", "mlp", "--setting", str(ckpt)]) == 2
        assert "not a readable driple inspector checkpoint" in _one_error_line(capsys)


def test_graph_refuses_zero_workers_or_servers(capsys):
    assert main(["graph", "mlp", "--workers", "0"]) == 2
    assert "--workers 0" in _one_error_line(capsys)
    assert main(["graph", "mlp", "--strategy", "ps", "--servers", "0"]) == 2
    assert "--servers 0" in _one_error_line(capsys)


def test_the_builder_refuses_zero_workers_or_servers():
    import torch

    from driple.errors import DripleError
    from driple.graph.build import build_input

    model, batch = torch.nn.Linear(4, 2), (torch.randn(2, 4), torch.randn(2, 2))
    with pytest.raises(DripleError, match="at least one worker"):
        build_input(model, batch, strategy="ddp", workers=0)
    with pytest.raises(DripleError, match="at least one server"):
        build_input(model, batch, strategy="ps", servers=0)
