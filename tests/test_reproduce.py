"""``scripts/reproduce.py`` on tiny datasets and a tiny registry: its accuracy rows are what
``driple evaluate`` prints for the same checkpoint and split (one code path)."""
import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import driple.inspector.dataset as dataset_module
from driple.cli import main as driple_main
from driple.evaluation.reproduce.cards import CARD_HEADING, configuration_lines
from driple.evaluation.reproduce.colocate import colocate_overall
from driple.evaluation.reproduce.context import Context
from driple.evaluation.reproduce.coverage import coverage_other_families, fold_coverage, held_out_intervals
from driple.evaluation.reproduce.outofzoo import drift_corrected_scores, session_drift
from driple.evaluation.reproduce.readme import refresh_readme
from driple.evaluation.reproduce.standing import report_standing
from driple.evaluation.reproduce.transfer import transfer_overview
from driple.evaluation.reproduce.unseen import outofzoo_other_families, outofzoo_unseen_modes, unseen_modes
from driple.evaluation.reproduce.unseen_report import report_unseen

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str, module: str | None = None):
    """``scripts/<name>.py`` imported as a module (scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(module or name, ROOT / "scripts" / f"{name}.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


@pytest.fixture
def reproduce():
    import driple.evaluation.reproduce.command as module

    return module


@pytest.fixture
def shipped(tmp_path, write_dataset, fake_builder, monkeypatch):
    """datasets/{cpu-ddp-w2-lo, -lo-retest, cpu-ddp-w2-1g} and a registry holding a source
    inspector (lo) and one transferred from it (1g)."""
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.splits import random_split
    from driple.inspector.train import TrainOptions, train_inspector
    from driple.inspector.transfer import finetune
    from driple.shipping.ship import calibrate, ship

    monkeypatch.setattr(dataset_module, "zoo_graph", fake_builder)
    monkeypatch.setattr(dataset_module, "_zoo_builder_id", lambda: "fake")
    # one set of host figures for every training and prior of the test (a measured host differs
    # between two runs, and the CLI must reproduce the script's numbers exactly)
    monkeypatch.setenv("DRIPLE_HOST_SPEED", "1e9,1e10")
    data = tmp_path / "datasets"
    lo = write_dataset(data / "cpu-ddp-w2-lo", n_configs=24)
    one_g = write_dataset(data / "cpu-ddp-w2-1g", n_configs=24, setting="cpu-ddp-w2-1g")
    retest = write_dataset(data / "cpu-ddp-w2-lo-retest", n_configs=6, repeats=1)
    lines = Path(retest, "results.csv").read_text().splitlines()  # measured again: 10 % more compute
    col = lines[0].split(",").index("compute_burst_amount")
    rows = []
    for line in lines[1:]:
        cells = line.split(",")  # no comma inside a cell of these rows
        cells[col] = f"{float(cells[col]) * 1.1!r}"
        rows.append(",".join(cells))
    Path(retest, "results.csv").write_text("\n".join([lines[0], *rows]) + "\n")

    options = TrainOptions(epochs=2, patience=2)
    src_ds = InspectorDataset(lo, progress=False)
    split = random_split(src_ds)
    source = train_inspector(src_ds, split, hidden_channels=8, num_repeats=2, options=options, progress=False)
    calibrate(source, src_ds, split)
    models = tmp_path / "models"
    ship(source, "cpu-ddp-w2-lo", description="source", trained="test", command="pytest", root=models,
         default=True)
    tgt_ds = InspectorDataset(one_g, progress=False)
    tsplit = random_split(tgt_ds)
    tuned = finetune(source, tgt_ds, split=tsplit, options=options, progress=False)
    calibrate(tuned, tgt_ds, tsplit)
    ship(tuned, "cpu-ddp-w2-1g", description="target", trained="test", command="pytest", root=models)
    for d in (lo, one_g):
        shutil.rmtree(Path(d) / "processed")
    return data, models


def test_accuracy_rows_are_driple_evaluate(reproduce, shipped, tmp_path, monkeypatch, capsys):
    data, models = shipped
    out, work = tmp_path / "eval", tmp_path / "work"
    argv = ["--sections", "retest,accuracy", "--datasets-dir", str(data), "--models-dir", str(models),
            "--out", str(out), "--work-dir", str(work), "--splits", "family", "--families", "beta",
            "--estimators", "mean,hgb", "--epochs", "2", "--quiet"]
    assert reproduce.main(argv) == 0
    assert not (data / "cpu-ddp-w2-lo" / "processed").exists()  # built in the work dir
    acc = json.loads((out / "accuracy.json").read_text())["settings"]
    assert list(acc) == ["cpu-ddp-w2-lo", "cpu-ddp-w2-1g"]
    lo = acc["cpu-ddp-w2-lo"]["family"]
    assert lo["estimators"] == ["inspector", "mean", "hgb"]
    # the retest measured compute 10 % higher: a floor MAPE of 0.1 / 1.1 on that label
    assert lo["floor_check"]["mape"]["compute_burst_amount"]["floor"] == pytest.approx(100 * 0.1 / 1.1)
    assert lo["floor_check"]["mape"]["tx_burst_amount"]["floor"] == 0
    assert lo["coverage"]["mean"]["nominal"] == 0.9 and 0 <= lo["coverage"]["mean"]["mean"] <= 1
    retest = json.loads((out / "retest.json").read_text())["settings"]["cpu-ddp-w2-lo"]
    # labels v2: the metric columns are the timeline labels (these tables carry no kmeans_* columns)
    assert {"retest", "timeline", "kmeans"} <= set(retest)
    assert retest["timeline"]["retest"]["compute_burst_amount"]["median_rel_diff"] == pytest.approx(0.1 / 1.05)
    text = (out / "results.md").read_text()
    assert "### cpu-ddp-w2-1g, family split" in text and "vs floor" in text
    # the accuracy bar, worked out from the same scores: median over the targets, inspector vs best table
    import numpy as np

    med = {m: np.median([lo["scores"][m][t]["mape"] for t in lo["targets"]]) for m in ("inspector", "mean", "hgb")}
    best = min(("mean", "hgb"), key=med.get)
    assert (f"best table model ({best}) {med[best]:.0f}%: the inspector is {1 - med['inspector'] / med[best]:.0%} "
            "lower") in text
    # --cards puts the same tables into each card, once however often it runs
    for _ in range(2):
        assert reproduce.main(["--report", "--cards", "--write-shipped", "--datasets-dir", str(data),
                               "--models-dir", str(models), "--out", str(out), "--quiet"]) == 0
    card = (models / "cpu-ddp-w2-lo" / "MODEL_CARD.md").read_text()
    assert card.count(CARD_HEADING) == 1 and card.index(CARD_HEADING) < card.index("## Reproduce")
    assert "### family split" in card and "Median over the targets: inspector" in card
    capsys.readouterr()

    monkeypatch.setenv("DRIPLE_MODELS", str(models))
    monkeypatch.chdir(tmp_path)
    assert driple_main(["evaluate", str(models / "cpu-ddp-w2-1g"), "--dataset", str(data / "cpu-ddp-w2-1g"),
                        "--split", "family", "--family", "beta", "--retrain-source", "--estimators",
                        "mean,hgb", "--epochs", "2", "--quiet", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["scores"] == acc["cpu-ddp-w2-1g"]["family"]["scores"]
    assert cli["transfer"] == {"from_setting": "cpu-ddp-w2-lo", "scheme": "paper", "source_retrained": True}
    assert os.path.exists(out / "results.md")


def test_side_by_side_processes_give_what_one_process_gives(reproduce, shipped, tmp_path):
    """``--jobs 2``: accuracy per setting in processes of their own, the other sections in one
    more, merged into one output: the same JSON as one process, with this command in it."""
    data, models = shipped
    common = ["--sections", "retest,accuracy", "--datasets-dir", str(data), "--models-dir", str(models),
              "--splits", "family", "--families", "beta", "--estimators", "mean,hgb", "--epochs", "2",
              "--quiet"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert reproduce.main([*common, "--out", str(one), "--work-dir", str(tmp_path / "w1")]) == 0
    assert reproduce.main([*common, "--out", str(two), "--work-dir", str(tmp_path / "w2"), "--jobs", "2"]) == 0
    a, b = (json.loads((d / "accuracy.json").read_text()) for d in (one, two))
    assert list(b["settings"]) == ["cpu-ddp-w2-lo", "cpu-ddp-w2-1g"]  # the source first
    for setting, entry in a["settings"].items():
        assert b["settings"][setting]["family"]["scores"] == entry["family"]["scores"], setting
    r1, r2 = (json.loads((d / "retest.json").read_text())["settings"] for d in (one, two))
    assert r1 == r2
    assert not [p for p in (tmp_path / "w2").iterdir() if p.name.startswith("reproduce-")]  # cleaned up
    # again for one setting: its new entry is kept (not the earlier one another child held a copy
    # of), the other setting's earlier entry stays
    before = json.loads((two / "accuracy.json").read_text())["settings"]
    assert reproduce.main([*common, "--out", str(two), "--work-dir", str(tmp_path / "w2"), "--jobs", "2",
                           "--settings", "cpu-ddp-w2-1g", "--estimators", "mean"]) == 0
    after = json.loads((two / "accuracy.json").read_text())["settings"]
    assert after["cpu-ddp-w2-1g"]["family"]["estimators"] == ["inspector", "mean"]  # this run's
    assert after["cpu-ddp-w2-lo"] == before["cpu-ddp-w2-lo"]
    # without a work directory the children read the datasets' own graph cache: nothing rebuilt
    three, cache = tmp_path / "three", data / ".graph-cache"
    shutil.rmtree(cache, ignore_errors=True)
    assert reproduce.main([*common, "--out", str(three), "--jobs", "2"]) == 0
    assert any(cache.iterdir())  # built where a run without --jobs would have
    cached = {p.name: p.stat().st_mtime_ns for p in cache.iterdir()}
    c = json.loads((three / "accuracy.json").read_text())
    for setting, entry in a["settings"].items():
        assert c["settings"][setting]["family"]["scores"] == entry["family"]["scores"], setting
    assert reproduce.main([*common, "--out", str(three), "--jobs", "2"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in cache.iterdir()} == cached  # none written again


def _child_then_sigterm(options: dict) -> None:
    """A stand-in for reproduce's child: the lo accuracy finishes at once; the other child
    records its pid, sends its parent SIGTERM (a scheduler stopping the run) and would then
    work for a minute."""
    import signal
    import time

    out = Path(options["out"])
    if options["settings"] == ["cpu-ddp-w2-lo"]:
        (out / "accuracy.json").write_text(json.dumps({"settings": {"cpu-ddp-w2-lo": {"finished": True}},
                                                       "source": "cpu-ddp-w2-lo"}))
        return None
    (out.parent.parent / f"child-{os.getpid()}.pid").write_text(str(os.getpid()))
    time.sleep(0.5)
    os.kill(os.getppid(), signal.SIGTERM)
    time.sleep(60)
    return None


def test_sigterm_stops_every_child_and_keeps_what_finished(reproduce, shipped, tmp_path, monkeypatch, capsys):
    """SIGTERM to a ``--jobs 2`` run: every child is stopped (none left running), the sections
    that finished are merged into the output, the scratch directory is removed, exit 143."""
    import time

    data, models = shipped
    work, out = tmp_path / "w", tmp_path / "out"
    import driple.evaluation.reproduce.run as run_module

    monkeypatch.setattr(run_module, "run_child", _child_then_sigterm)
    t0 = time.perf_counter()
    code = reproduce.main(["--sections", "accuracy", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--work-dir", str(work), "--jobs", "2", "--quiet"])
    assert code == 143 and time.perf_counter() - t0 < 50
    assert "interrupted; finished sections are in" in capsys.readouterr().err
    pids = [int(p.read_text()) for p in work.glob("child-*.pid")]
    assert pids
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert json.loads((out / "accuracy.json").read_text())["settings"] == {"cpu-ddp-w2-lo": {"finished": True}}
    assert not [p for p in work.iterdir() if p.name.startswith("reproduce-")]


def test_merge_estimators_reruns_the_inspector_and_keeps_the_other_estimators(reproduce, shipped, tmp_path, capsys):
    """--merge-estimators: the inspector and the named estimators are scored again, every other
    estimator of the earlier accuracy.json is kept as it was, the wins counted over all; an
    earlier run on other folds, or none, is refused."""
    data, models = shipped
    out = tmp_path / "eval"
    common = ["--sections", "accuracy", "--datasets-dir", str(data), "--models-dir", str(models), "--out", str(out),
              "--work-dir", str(tmp_path / "w"), "--splits", "random", "--settings", "cpu-ddp-w2-lo",
              "--epochs", "2", "--quiet"]
    assert reproduce.main([*common, "--estimators", "roofline", "--merge-estimators"]) == 2
    assert "has no random split of cpu-ddp-w2-lo" in capsys.readouterr().err
    assert reproduce.main([*common, "--estimators", "mean,hgb,roofline"]) == 0
    before = json.loads((out / "accuracy.json").read_text())["settings"]["cpu-ddp-w2-lo"]["random"]
    # side by side (--jobs): the child reads the earlier file copied into its own output
    assert reproduce.main([*common, "--estimators", "roofline", "--merge-estimators", "--jobs", "2"]) == 0
    entry = json.loads((out / "accuracy.json").read_text())["settings"]["cpu-ddp-w2-lo"]
    after = entry["random"]
    assert after["estimators"] == ["inspector", "mean", "hgb", "roofline"]
    assert after["merged"] == {"rerun": ["inspector", "roofline"], "kept": ["mean", "hgb"]}
    for name in ("mean", "hgb"):
        assert after["scores"][name] == before["scores"][name]
        assert after["folds"][0]["scores"][name] == before["folds"][0]["scores"][name]
    assert set(after["wins"]["mape"]) == set(after["estimators"]) and entry["kept_from"]["command"]
    damaged = json.loads((out / "accuracy.json").read_text())  # an earlier run on other test jobs
    damaged["settings"]["cpu-ddp-w2-lo"]["random"]["folds"][0]["test_job_ids"] = ["elsewhere"]
    (out / "accuracy.json").write_text(json.dumps(damaged))
    capsys.readouterr()
    assert reproduce.main([*common, "--estimators", "roofline", "--merge-estimators"]) == 2
    assert "scored on other folds" in capsys.readouterr().err
    # another seed: recorded, and never merged into a run of another seed
    assert reproduce.main([*common, "--estimators", "mean", "--seed", "1"]) == 0
    assert json.loads((out / "accuracy.json").read_text())["settings"]["cpu-ddp-w2-lo"]["random"]["seed"] == 1
    assert reproduce.main([*common, "--estimators", "roofline", "--merge-estimators"]) == 2
    assert "scored on other folds" in capsys.readouterr().err


def test_unseen_family_intervals_are_shipped_into_the_checkpoints(reproduce, shipped, tmp_path, capsys):
    """The family split's held-out-family intervals go into each shipped checkpoint with its
    training families (the transferred one's include its source's); the registry's checksum
    follows, and the Predictor takes them for a job of another family."""
    script = load_script("calibrate_unseen_families", "calibrate_unseen")
    data, models = shipped
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "accuracy", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--work-dir", str(tmp_path / "w"), "--splits", "family",
                           "--estimators", "mean,roofline", "--epochs", "2", "--quiet"]) == 0
    acc = json.loads((out / "accuracy.json").read_text())["settings"]
    assert len(acc["cpu-ddp-w2-lo"]["family"]["folds"]) == 3 and "unseen_modes" in acc["cpu-ddp-w2-lo"]["family"]
    capsys.readouterr()
    assert script.main(["--evaluation", str(out), "--models-dir", str(models), "--json",
                        "--roofline-modes", "never"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert [d["setting"] for d in done] == ["cpu-ddp-w2-1g", "cpu-ddp-w2-lo"]
    assert all(d["families"] == ["alpha", "beta", "gamma"] and d["modes"] == {} for d in done)
    assert all(d["roofline_modes"]["rule"] == "never" and not d["roofline_modes"]["shipped"] for d in done)
    from driple.predict.unseen import UnseenFamilyCalibration, modes_win
    from driple.predict.predictor import Predictor
    from driple.predict.registry import resolve

    path, entry = resolve("cpu-ddp-w2-1g", root=models)  # the checksum checked: renewed
    predictor = Predictor.load(str(path))
    cal = UnseenFamilyCalibration.from_dict(predictor.inspector.info["unseen_family"])
    assert cal.intervals.to_dict() == acc["cpu-ddp-w2-1g"]["family"]["family_intervals"]
    assert cal.source["coverage"] == acc["cpu-ddp-w2-1g"]["family"]["coverage_other_families"]["inspector"]["mean"]
    assert entry["description"] == "target"  # the rest of the entry kept
    assert script.main(["--evaluation", str(out), "--models-dir", str(models), "--roofline-modes"]) == 0
    capsys.readouterr()
    # auto (the default): the modes go in exactly where they win cross-fitted; with the
    # evaluation's own roofline alone they are the evaluation's modes, named by that roofline
    assert script.main(["--evaluation", str(out), "--models-dir", str(models), "--json", "--roofline-sets", "all"]) == 0
    for d in json.loads(capsys.readouterr().out):
        check, fam = d["roofline_modes"], acc[d["setting"]]["family"]
        wins = modes_win(fam["unseen_modes"]["cross_fitted"]["scores"], fam["scores"]["inspector"])
        assert check["rule"] == "auto" and check["shipped"] == wins
        assert (check["median_mape_with"] < check["median_mape_as_is"]) == wins
        assert {t: m.replace(":all", "") for t, m in d["modes"].items()} == (
            fam["unseen_modes"]["calibration"]["modes"] if wins else {})
    # every variant offered: the set with the lower cross-fitted median is the one shipped, its
    # rooflines in the checkpoint, and a user's model is joined with them
    assert script.main(["--evaluation", str(out), "--models-dir", str(models), "--json"]) == 0
    figures = json.loads((out / "unseen_families.json").read_text())["settings"]
    for d in json.loads(capsys.readouterr().out):
        sets, fig = d["figures"]["roofline_sets"], figures[d["setting"]]
        assert set(sets) == {"all", "all,all-overlap,physical,physical-overlap"} and "nested" not in fig  # 3 folds
        best = min(sets, key=lambda n: sets[n]["median_mape"])
        assert d["roofline_modes"]["median_mape_with"] == sets[best]["median_mape"]
        assert d["roofline_modes"]["shipped"] == (sets[best]["median_mape"] < d["roofline_modes"]["median_mape_as_is"])
        cal = UnseenFamilyCalibration.from_dict(
            Predictor.load(str(resolve(d["setting"], root=models)[0])).inspector.info["unseen_family"])
        used = {m.partition(":")[2] for m in cal.joined.values()}
        assert set(cal.rooflines) == used and used <= set(best.split(","))
    capsys.readouterr()
    for bad, says in ((",", "names no roofline"), ("all,bogus", "unknown roofline variant(s) bogus")):
        assert script.main(["--evaluation", str(out), "--models-dir", str(models), "--roofline-sets", bad]) == 2
        assert says in capsys.readouterr().err
    (out / "unseen_families.json").write_text("{damaged")
    assert script.main(["--evaluation", str(out), "--models-dir", str(models), "--roofline-sets", "all"]) == 0
    assert "could not be read" in capsys.readouterr().err
    assert set(json.loads((out / "unseen_families.json").read_text())["settings"]) == {"cpu-ddp-w2-1g", "cpu-ddp-w2-lo"}
    with pytest.raises(SystemExit):  # argparse: an unknown rule is refused, nothing written
        script.main(["--evaluation", str(out), "--models-dir", str(models), "--roofline-modes", "sometimes"])
    assert script.main(["--evaluation", str(tmp_path / "none"), "--models-dir", str(models)]) == 2
    assert "cannot read" in capsys.readouterr().err
    # without --evaluation: the models directory's own evaluation, read and written there
    (models / "evaluation").mkdir(exist_ok=True)
    (models / "evaluation" / "accuracy.json").write_text((out / "accuracy.json").read_text())
    assert script.main(["--models-dir", str(models), "--roofline-sets", "all"]) == 0
    assert (models / "evaluation" / "unseen_families.json").exists()


def test_rejoin_roofline_reproduces_the_evaluated_inspector_without_retraining(reproduce, shipped, tmp_path, capsys):
    """The source inspector with a roofline joined, evaluated on a family split: the evaluation
    keeps its networks' own predictions per fold, and scripts/rejoin_roofline.py, joining a
    roofline fitted again to them, gives the evaluation's figures; a variant gives its own; an
    inspector without a roofline is refused by name."""
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.splits import Split
    from driple.predict.registry import register, resolve

    script = load_script("rejoin_roofline", "rejoin")
    data, models = shipped
    path, entry = resolve("cpu-ddp-w2-lo", root=models)
    source = load_inspector(str(path))
    ds = InspectorDataset(str(data / "cpu-ddp-w2-lo"), progress=False)
    joined = with_roofline(source, ds, Split.from_dict(source.info["split"], ds))
    joined.save(os.path.dirname(str(path)))
    register("cpu-ddp-w2-lo", path, root=models, default=True,
             **{k: entry[k] for k in ("description", "trained", "scores") if entry.get(k) is not None})
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "accuracy", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--work-dir", str(tmp_path / "w"), "--splits", "family",
                           "--settings", "cpu-ddp-w2-lo", "--estimators", "mean", "--epochs", "2",
                           "--quiet"]) == 0
    family = json.loads((out / "accuracy.json").read_text())["settings"]["cpu-ddp-w2-lo"]["family"]
    assert len(family["network_predictions"]) == len(family["folds"]) == 3
    args = ["--evaluation", str(out), "--models-dir", str(models), "--datasets-dir", str(data),
            "--settings", "cpu-ddp-w2-lo", "--json"]
    capsys.readouterr()
    assert script.main(args) == 0
    r = json.loads(capsys.readouterr().out)["settings"]["cpu-ddp-w2-lo"]
    assert r["step_time_mape"] == pytest.approx(r["evaluated_step_time_mape"], rel=1e-9)
    assert r["median_mape"] == pytest.approx(r["evaluated_median_mape"], rel=1e-9)
    assert script.main([*args, "--terms", "physical", "--no-overlap"]) == 0
    assert "cpu-ddp-w2-lo" in json.loads(capsys.readouterr().out)["settings"]
    assert script.main([*args[:-2], "--settings", "cpu-ddp-w2-1g"]) == 2  # not evaluated in this run
    assert "no family split of cpu-ddp-w2-1g" in capsys.readouterr().err


def test_transfer_section_rows_per_scheme_with_their_run(reproduce, shipped, tmp_path):
    """The transfer study of each target: every scheme at every fraction, and the run that made
    the entry (with --settings the other targets' entries stay from earlier runs)."""
    data, models = shipped
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "transfer", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--fractions", "0.5", "1.0", "--epochs", "2", "--quiet"]) == 0
    entry = json.loads((out / "transfer.json").read_text())["targets"]["cpu-ddp-w2-1g"]
    assert sorted((r["fraction"], r["scheme"]) for r in entry["rows"]) == [
        (f, s) for f in (0.5, 1.0) for s in ("mlp", "paper", "scratch")]
    assert entry["date"] and entry["command"].startswith("python scripts/reproduce.py --sections transfer ")
    assert "--fractions 0.5 1.0" in entry["command"]  # main's argv, not the test runner's


def test_transfer_section_of_a_features_only_source_has_no_paper_scheme(reproduce, shipped, tmp_path):
    """A features-only source has no graph layers for the paper's scheme to split: the study
    compares fine-tuning its MLP with training from scratch (it stopped with an error)."""
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.splits import random_split
    from driple.inspector.train import TrainOptions, preset, train_inspector
    from driple.inspector.transfer import finetune
    from driple.shipping.ship import calibrate, ship

    data, models = shipped
    options = TrainOptions(epochs=2, patience=2, target_scaling="ln")
    config, _ = preset("features", hidden_channels=8)
    src_ds = InspectorDataset(data / "cpu-ddp-w2-lo", progress=False)
    split = random_split(src_ds)
    source = train_inspector(src_ds, split, options, config, progress=False)
    calibrate(source, src_ds, split)
    ship(source, "cpu-ddp-w2-lo", description="source", trained="test", command="pytest", root=models,
         default=True)
    tgt_ds = InspectorDataset(data / "cpu-ddp-w2-1g", progress=False)
    tsplit = random_split(tgt_ds)
    tuned = finetune(source, tgt_ds, scheme="mlp", split=tsplit, options=options, progress=False)
    calibrate(tuned, tgt_ds, tsplit)
    ship(tuned, "cpu-ddp-w2-1g", description="target", trained="test", command="pytest", root=models)
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "transfer", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--fractions", "1.0", "--epochs", "2", "--quiet"]) == 0
    entry = json.loads((out / "transfer.json").read_text())["targets"]["cpu-ddp-w2-1g"]
    assert sorted(r["scheme"] for r in entry["rows"]) == ["mlp", "scratch"]


def test_outofzoo_section_is_driple_evaluate_external(reproduce, shipped, tmp_path, write_dataset,
                                                      monkeypatch, capsys):
    """The out-of-zoo section scores the shipped source on a held-out set of other jobs, as
    ``driple evaluate --external`` does, with interval coverage."""
    data, models = shipped
    ooz = write_dataset(tmp_path / "out-of-zoo", n_configs=6)
    path = Path(ooz, "results.csv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], *("ooz" + line for line in lines[1:])]) + "\n")
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "outofzoo", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--work-dir", str(tmp_path / "work"), "--out-of-zoo", ooz,
                           "--estimators", "mean,hgb,analytic", "--quiet"]) == 0
    section = json.loads((out / "outofzoo.json").read_text())
    assert section["jobs"] == 6 and section["estimators"] == ["inspector", "mean", "hgb", "analytic"]
    assert section["folds"][0]["kind"] == "external" and section["n_test"] == 6
    assert 0 <= section["coverage"]["inspector"]["mean"] <= 1
    assert "## Out-of-zoo: 6 jobs" in (out / "results.md").read_text()
    capsys.readouterr()
    monkeypatch.setenv("DRIPLE_MODELS", str(models))
    assert driple_main(["evaluate", str(models / "cpu-ddp-w2-lo"), "--dataset", str(data / "cpu-ddp-w2-lo"),
                        "--external", ooz, "--estimators", "mean,hgb,analytic", "--quiet", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert cli["scores"] == section["scores"]
    assert driple_main(["evaluate", str(models / "cpu-ddp-w2-lo"), "--dataset", str(data / "cpu-ddp-w2-lo"),
                        "--external", ooz, "--split", "family", "--quiet"]) == 2
    assert "--external scores the inspector as trained" in capsys.readouterr().err


def test_an_out_of_zoo_set_per_setting(reproduce, shipped, tmp_path, write_dataset, capsys):
    """Out-of-zoo sets of two settings: each scored by its setting's shipped inspector, the
    source's in outofzoo.json (with the step-time bar), the other's in outofzoo-<setting>.json
    (without); two sets of one setting are refused."""
    data, models = shipped
    sets = {}
    for setting in ("cpu-ddp-w2-lo", "cpu-ddp-w2-1g"):
        ooz = write_dataset(tmp_path / f"ooz-{setting}", n_configs=6, setting=setting)
        path = Path(ooz, "results.csv")
        lines = path.read_text().splitlines()
        path.write_text("\n".join([lines[0], *("ooz" + line for line in lines[1:])]) + "\n")
        sets[setting] = ooz
    out = tmp_path / "eval"
    argv = ["--sections", "outofzoo", "--datasets-dir", str(data), "--models-dir", str(models),
            "--out", str(out), "--work-dir", str(tmp_path / "work"), "--estimators", "mean", "--quiet"]
    assert reproduce.main(argv + ["--out-of-zoo", sets["cpu-ddp-w2-1g"], "--out-of-zoo", sets["cpu-ddp-w2-lo"]]) == 0
    source = json.loads((out / "outofzoo.json").read_text())
    other = json.loads((out / "outofzoo-cpu-ddp-w2-1g.json").read_text())
    assert (source["setting"], source["source"], other["setting"], other["source"]) == (
        "cpu-ddp-w2-lo", True, "cpu-ddp-w2-1g", False)
    assert other["command_of_a_row"].startswith("driple evaluate <models>/cpu-ddp-w2-1g --external ")
    report = (out / "results.md").read_text()
    assert report.index("(cpu-ddp-w2-lo)\n") < report.index("(cpu-ddp-w2-1g)\n")  # the source's set first
    rows = {}  # the bars' table (the first with these rows; the medians' table follows)
    for line in report.splitlines():
        if line.startswith("| out of zoo ("):
            rows.setdefault(line.split(" | ")[0], line)
    assert "(bar 15%)" in rows["| out of zoo (cpu-ddp-w2-lo inspector)"]
    assert "(bar" not in rows["| out of zoo (cpu-ddp-w2-1g inspector)"]
    # side by side (--jobs): the other setting's file is merged too, with the same scores
    two = tmp_path / "eval2"
    assert reproduce.main([*argv[:argv.index("--out")], "--out", str(two), *argv[argv.index("--out") + 2:],
                           "--jobs", "2", "--out-of-zoo", sets["cpu-ddp-w2-1g"],
                           "--out-of-zoo", sets["cpu-ddp-w2-lo"]]) == 0
    assert json.loads((two / "outofzoo-cpu-ddp-w2-1g.json").read_text())["scores"] == other["scores"]
    assert json.loads((two / "outofzoo.json").read_text())["scores"] == source["scores"]
    capsys.readouterr()
    twice = write_dataset(tmp_path / "ooz-lo-again", n_configs=6)
    assert reproduce.main(argv + ["--out-of-zoo", sets["cpu-ddp-w2-lo"], "--out-of-zoo", twice]) == 2
    assert "two out-of-zoo sets of cpu-ddp-w2-lo" in capsys.readouterr().err


def test_an_out_of_zoo_set_on_a_drifted_host_is_also_scored_on_the_dataset_s_host(reproduce, tmp_path,
                                                                                  write_dataset):
    """The set's provenance names the retest jobs measured beside it; their rows against the
    dataset's (here every step 1.25x as long) give the host's drift per label, and the scores
    are computed again with the measured labels divided by it."""
    import pandas as pd

    from driple.errors import DripleError
    from driple.inspector.scores import score_table

    data = write_dataset(tmp_path / "cpu-ps-p1w2-1g", n_configs=6)
    later = write_dataset(tmp_path / "cpu-ps-p1w2-1g-retest-later1", n_configs=6)
    frame = pd.read_csv(Path(later, "results.csv"))
    frame["step_time"] = frame["step_time"] * 1.25
    frame.to_csv(Path(later, "results.csv"), index=False)
    ooz = tmp_path / "ooz"
    ooz.mkdir()
    assert session_drift(str(ooz), data) is None  # no provenance: nothing to correct
    (ooz / "provenance.json").write_text(json.dumps({"same_session_retest": "cpu-ps-p1w2-1g-retest-later1"}))
    drift = session_drift(str(ooz), data)
    assert drift["jobs"] == 6 and drift["ratio"]["step_time"] == pytest.approx(1.25)
    assert drift["ratio"]["compute_burst_amount"] == pytest.approx(1.0)

    targets = ["compute_burst_amount", "step_time"]
    measured = np.array([[50.0, 1.25], [80.0, 2.5]])
    report = {"targets": targets, "folds": [{"measured": measured, "predictions": {"inspector": [[50.0, 1.0], [80.0, 2.0]]}}]}
    scores = drift_corrected_scores(report, drift)["inspector"]
    assert scores["step_time"]["mape"] == pytest.approx(0.0)  # exact on the dataset's host
    assert scores == score_table(measured / [1.0, 1.25], np.array([[50.0, 1.0], [80.0, 2.0]]), targets)
    (ooz / "provenance.json").write_text(json.dumps({"same_session_retest": "nowhere"}))
    with pytest.raises(DripleError, match="names its same-session retest nowhere"):
        session_drift(str(ooz), data)


def test_retest_section_reads_the_setting_index_and_compares_hosts(reproduce, tmp_path, write_dataset):
    """With a settings.json, a setting's dataset (and its retest beside it) is the one the index
    names; the same grid measured in another collection (another host) is compared label by label."""
    import pandas as pd

    data = tmp_path / "datasets"
    for d in ("new-host/cpu-ddp-w2-lo", "new-host/cpu-ddp-w2-lo-retest", "new-host/cpu-ddp-w2-lo-retest-day2",
              "old-host/cpu-ddp-w2-lo"):
        write_dataset(data / d, n_configs=6)
    old = data / "old-host" / "cpu-ddp-w2-lo" / "results.csv"
    table = pd.read_csv(old)
    table["step_time"] *= 1.25  # the old host was slower
    table.to_csv(old, index=False)
    day2 = data / "new-host" / "cpu-ddp-w2-lo-retest-day2" / "results.csv"
    table = pd.read_csv(day2)
    table["started"] = pd.date_range("2026-11-25 06:57", periods=len(table), freq="min", tz="UTC").map(
        lambda t: t.isoformat())
    table.to_csv(day2, index=False)
    (data / "settings.json").write_text(json.dumps({"format": "driple-setting-datasets", "settings": {
        "cpu-ddp-w2-lo": {"dataset": "new-host/cpu-ddp-w2-lo", "cpu_model": "?"}}}))
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "retest", "--datasets-dir", str(data), "--out", str(out), "--quiet"]) == 0
    entry = json.loads((out / "retest.json").read_text())["settings"]["cpu-ddp-w2-lo"]
    assert entry["retest"].endswith(os.path.join("new-host", "cpu-ddp-w2-lo-retest"))
    other = entry["other_host"]
    assert other["jobs"] == 6 and other["dataset"].endswith(os.path.join("old-host", "cpu-ddp-w2-lo"))
    assert other["labels"]["step_time"]["median_ratio"] == pytest.approx(1 / 1.25)
    assert other["labels"]["compute_burst_amount"]["median_ratio"] == pytest.approx(1)
    assert "### cpu-ddp-w2-lo: the same jobs on another host" in (out / "results.md").read_text()
    # the retest jobs measured in another session are compared with the dataset, column by column
    (run,) = entry["other_sessions"]
    assert run["dataset"].endswith("cpu-ddp-w2-lo-retest-day2") and len(run["jobs"]) == 6
    assert run["labels"]["step_time"]["median_diff"] == 0 and run["when"] == "2026-11-25 06:57-07:02 UTC"
    report = (out / "results.md").read_text()
    assert "### cpu-ddp-w2-lo: the retest jobs in other sessions" in report
    assert "| step_time | 0% | 0% |" in report


def test_coverage_leaves_out_targets_an_estimator_does_not_predict(reproduce):
    """The analytic estimator predicts step time only: its other targets get no coverage (not 0)."""
    import numpy as np

    rng = np.random.default_rng(0)
    measured = rng.uniform(1, 2, size=(40, 2))
    pred = measured * rng.uniform(0.9, 1.1, size=measured.shape)
    partial = pred.copy()
    partial[:, 0] = np.nan
    fold = {"calibration_measured": measured[:20], "measured": measured[20:],
            "calibration_predictions": {"a": pred[:20], "b": partial[:20]},
            "predictions": {"a": pred[20:], "b": partial[20:]}}
    cov = fold_coverage({"targets": ["x", "step_time"], "estimators": ["a", "b"], "folds": [fold]}, 0.9)
    assert cov["a"]["x"] > 0.5 and cov["a"]["step_time"] > 0.5
    assert cov["b"]["x"] is None and cov["b"]["step_time"] == cov["a"]["step_time"]
    assert cov["b"]["mean"] == cov["b"]["step_time"]



def test_coverage_other_families_calibrates_each_fold_on_the_others(reproduce):
    """Three folds: residuals (measured / predicted) of 1.0 in two folds and 2.0 in the third.
    Calibrated on the other two folds, fold 3's intervals (the log ratio 0 only) miss all its
    jobs; folds 1 and 2 (calibrated on ratios {1, 2}) cover theirs. Fewer than 3 folds: none."""
    import numpy as np

    def fold(ratio, n=10):
        measured = np.full((n, 1), 2.0)
        return {"measured": measured, "predictions": {"a": measured / ratio}}

    report = {"targets": ["x"], "estimators": ["a"], "folds": [fold(1.0), fold(1.0), fold(2.0)]}
    cov = coverage_other_families(report, 0.9)
    assert cov["a"]["x"] == 20 / 30 and cov["a"]["mean"] == 20 / 30 and cov["a"]["nominal"] == 0.9
    assert coverage_other_families({**report, "folds": report["folds"][:2]}, 0.9) == {}


def test_unseen_modes_are_measured_cross_fitted_and_reported_beside_the_shipped_intervals(reproduce):
    """Three held-out folds where the roofline is exact on the step time and the inspector 2x
    over: the modes take the roofline, and so does every cross-fitted fold (MAPE 0); the record
    is JSON. Without the roofline or with 2 folds: none. The report's row: as is, the shipped
    (held-out-family) intervals' coverage, the modes' figures; out of zoo the same."""
    import numpy as np

    from driple.inspector.scores import score_table

    def fold(n=8):
        y = np.linspace(1.0, 2.0, n)[:, None]
        return {"measured": y, "predictions": {"inspector": y * 2, "roofline": y}}

    report = {"targets": ["step_time"], "estimators": ["inspector", "roofline"], "folds": [fold(), fold(), fold()]}
    out = json.loads(json.dumps(unseen_modes(report, 0.9)))
    assert out["calibration"]["modes"] == {"step_time": "roofline"}
    assert out["cross_fitted"]["scores"]["step_time"]["mape"] == 0.0
    assert out["cross_fitted"]["modes"] == {"step_time": {"roofline": 3}} and out["command"].startswith("python")
    assert unseen_modes({**report, "estimators": ["inspector"]}, 0.9) is None
    assert unseen_modes({**report, "folds": report["folds"][:2]}, 0.9) is None

    y = np.linspace(1.0, 2.0, 8)[:, None]
    spread = {"targets": ["step_time"], "folds": [{"measured": y, "predictions": {"inspector": y * np.linspace(1.5, 2.5, 8)[:, None]}}]}
    intervals = held_out_intervals(spread, "inspector", 0.9)  # around the ratio 2 of the out-of-zoo jobs
    acc = {"settings": {"s": {"family": {
        "n_test": 24, "scores": {"inspector": score_table(y, 2 * y, ["step_time"])},
        "coverage": {"inspector": {"mean": 0.5}}, "coverage_other_families": {"inspector": {"mean": 0.875}},
        "family_intervals": intervals, "unseen_modes": out}}}}
    ooz = {"setting": "s", "n_test": 8, "scores": {"inspector": score_table(y, 2 * y, ["step_time"])},
           "coverage": {"inspector": {"mean": 0.25}},
           "inspector_predictions": {"measured": y.tolist(), "predicted": (2 * y).tolist(), "roofline": y.tolist()}}
    assert outofzoo_unseen_modes(acc, ooz)["scores"]["step_time"]["mape"] == 0.0
    text = "\n".join(report_unseen(acc, [ooz]))
    assert "| s, held-out families | 24 | 100.0% | 100.0% | 50.0% | 87.5% | 0.0% | 0.0% |" in text
    # out of zoo: the held-out intervals (ratios 1.5-2.5) cover the out-of-zoo jobs (ratio 2)
    assert "| out of zoo (s inspector) | 8 | 100.0% | 100.0% | 25.0% | 100.0% | 0.0% | 0.0% |" in text
    assert "- s (modes shipped: cross-fitted median MAPE 0.0% with them, 100.0% as is): the roofline joins step_time roofline" in text
    assert text.count("| modes and intervals |") == 2  # the setting's row and its out-of-zoo row
    # what a checkpoint holds wins over the rule (calibrate run with --roofline-modes never)
    kept = "\n".join(report_unseen(acc, [ooz], shipped={"s": False}))
    assert "| modes and intervals |" not in kept and "- s (no modes shipped: " in kept
    # what calibrate_unseen_families.py shipped (unseen_families.json): its own table
    fig = {"settings": {"s": {"modes": {"step_time": "roofline:physical"},
                              "roofline_sets": {"all": {"step_time_mape": 4.0, "median_mape": 9.0, "coverage": 0.9},
                                                "all,physical": {"step_time_mape": 3.0, "median_mape": 8.0, "coverage": 0.9}},
                              "cross_fitted": {"step_time_mape": 3.0, "median_mape": 8.0},
                              "as_is": {"step_time_mape": 5.0, "median_mape": 10.0},
                              "nested": {"step_time_mape": 3.5, "median_mape": 8.5},
                              "out_of_zoo": [{"step_time_mape": 6.0, "median_mape": 7.0, "coverage": 0.875}]}}}
    shipped_table = "\n".join(report_unseen(acc, [ooz], figures=fig))
    assert "| s | 4.0% / 9.0% | 3.0% / 8.0% | physical | 3.0% | 8.0% | 3.5% | 8.5% | 6.0% | 7.0% | 87.5% |" in shipped_table
    assert report_unseen({"settings": {}}, [ooz]) == []
    four = unseen_modes({**report, "folds": [fold() for _ in range(4)]}, 0.9)
    assert four["nested"]["chosen"] == ["modes"] * 4 and len(four["held_out"]["measured"]) == 32
    acc["settings"]["s"]["family"]["unseen_modes"] = json.loads(json.dumps(four))
    assert "- s: modes taken for 4 of 4 families; step time 0.0%, median MAPE 0.0%" in "\n".join(
        report_unseen(acc, [ooz]))


def test_out_of_zoo_is_checked_against_the_held_out_family_intervals(reproduce):
    """The source's intervals calibrated on its held-out folds (ratios measured / predicted of 1
    and 2) cover an out-of-zoo job at ratio 1.5 and miss one at 3; the row shows 50 %."""
    import numpy as np

    measured = np.full((20, 1), 2.0)
    predicted = np.concatenate([measured[:10], measured[10:] / 2])
    report = {"targets": ["x"], "folds": [{"measured": measured, "predictions": {"inspector": predicted}}]}
    record = held_out_intervals(report, "inspector", 0.9)
    acc = {"settings": {"s": {"family": {"family_intervals": record}}}}
    ooz = {"setting": "s", "inspector_predictions": {"measured": [[3.0], [3.0]], "predicted": [[2.0], [1.0]]}}
    assert outofzoo_other_families(acc, ooz) == 0.5
    assert outofzoo_other_families(None, ooz) is None
    assert outofzoo_other_families(acc, {"setting": "s"}) is None


def test_standing_table_states_each_bar_from_the_scores(reproduce):
    """The accuracy bars by hand: inspector median MAPE 10 % vs hgb's 20 % (50 % lower), step time
    9 % (bar 10 %: met) on held-out families; out of zoo 16 % (bar 15 %: missed); a label over 2x
    its floor is named; coverage in %."""
    def rep(step, other, hgb_step, hgb_other):
        return {"estimators": ["inspector", "hgb", "roofline"], "targets": ["step_time", "tx_idle_duration"],
                "n_test": 7,
                "scores": {"inspector": {"step_time": {"mape": step}, "tx_idle_duration": {"mape": other}},
                           "hgb": {"step_time": {"mape": hgb_step}, "tx_idle_duration": {"mape": hgb_other}},
                           "roofline": {"step_time": {"mape": 8.0}, "tx_idle_duration": {"mape": 30.0}}},
                "floor_check": {"mape": {"step_time": {"floor": 5.0, "ratio": 1.6, "within": True},
                                         "tx_idle_duration": {"floor": 4.0, "ratio": 2.5, "within": False}}},
                "coverage": {"inspector": {"mean": 0.875}}}

    family = {**rep(9.0, 11.0, 18.0, 22.0), "coverage_other_families": {"inspector": {"mean": 0.9}}}
    lines = report_standing({"settings": {"s": {"family": family}}},
                                       [{**rep(16.0, 20.0, 30.0, 30.0), "setting": "s"}])
    table = [line for line in lines if line.startswith("| s,") or line.startswith("| out of zoo")]
    assert table[0].split(" | ")[1:7] == ["7", "10.0%", "20.0% (hgb)", "50%", "9.0% ✓ (bar 10%)", "8.0%"]
    assert table[0].endswith("| 5.0% | 87.5% | 90.0% | tx_idle_duration |")
    assert table[1].endswith("| 87.5% | - | tx_idle_duration |")  # out of zoo: no folds to calibrate on
    assert "16.0% (bar 15%)" in table[1] and "✓" not in table[1]
    plain = report_standing({"settings": {"s": {"family": rep(9.0, 11.0, 18.0, 22.0)}}}, [])
    assert [line for line in plain if line.startswith("| s,")][0].endswith("| 5.0% | 87.5% | tx_idle_duration |")
    assert not any("calibrated on unseen families" in line for line in plain)  # a run without them
    assert "| s, held-out families | 10.0% | 20.0% | 19.0% |" in lines  # median per estimator
    assert report_standing(None, []) == []


def test_transfer_overview_puts_each_fraction_on_one_row(reproduce):
    """Two schemes at two fractions: one row per fraction, the lower NRMSE of the row in bold."""
    rows = [{"fraction": f, "scheme": sc, "n_train": n, "nrmse": v, "mape": 10.0, "seconds": 1.5}
            for f, n, sc, v in ((0.5, 4, "paper", 0.2), (0.5, 4, "scratch", 0.3),
                                (1.0, 8, "paper", 0.25), (1.0, 8, "scratch", 0.1))]
    lines = transfer_overview({"targets": {"t": {"rows": rows}}})
    assert "| t | 50% | 4 | **0.200 (1.5 s)** | 0.300 (1.5 s) |" in lines
    assert "| t | 100% | 8 | 0.250 (1.5 s) | **0.100 (1.5 s)** |" in lines
    assert transfer_overview({"targets": {}}) == []


def test_colocate_overall_adds_the_sets_and_names_the_misses(reproduce):
    """Two co-run sets: the confusion tables summed, right = fit-fit + slowed-not, and the one
    pair whose verdict disagrees with its measured slow-down (1.10x <= 1.15: fits, predicted
    'contends') named."""
    def pair(models, slow, verdict):
        return {"models": models, "slowdown": slow, "inspector": {"verdict": verdict}}

    def conf(a, b, c, d):
        return {"fit_predicted_fit": a, "fit_predicted_not": b, "not_predicted_fit": c, "not_predicted_not": d}

    summary = {"compute": {"inspector_served_rel_err": 0.12}}
    co = {"coruns": {
        "corun-a": {"max_slowdown": 1.15, "confusion": {"inspector": conf(0, 1, 0, 1)}, "summary": summary,
                    "coruns": [pair(["x", "y"], [1.10, 1.05], "contends"), pair(["x", "z"], [1.5, 1.2], "contends")]},
        "corun-b": {"max_slowdown": 1.15, "confusion": {"inspector": conf(1, 0, 0, 0)}, "summary": {},
                    "coruns": [pair(["u", "v"], [1.01, 1.02], "packs well")]}}}
    lines = colocate_overall(co)
    assert "| inspector | 1 | 1 | 0 | 1 | 2 of 3 |" in lines
    missed = [line for line in lines if line.startswith("- missed")]
    assert missed == ["- missed (inspector): corun-a: x + y — 1.10/1.05x (fits; inspector: contends)"]
    assert "- inspector's combined mean load per slot against the measured, corun-a: compute 12%" in lines
    assert colocate_overall({"coruns": {}}) == []

SETTING_1G = "cpu-ddp-w2-1g"
CORUNS = ROOT / "datasets" / "v2" / f"corun-{SETTING_1G}"  # measured co-runs of a shipped setting
KEEP_CORUN = "corun-9963d4eaa9"  # MLP bs128 + MLP bs64: two quick graph builds


def test_colocate_section_is_eval_colocate(reproduce, tmp_path, capsys):
    """The colocate section finds ``corun-<setting>`` beside the setting's dataset, predicts the
    pairs with the registry's inspector and gives what ``scripts/eval_colocate.py`` gives."""
    import pandas as pd

    data = tmp_path / "datasets"
    shutil.copytree(ROOT / "datasets" / "v2" / SETTING_1G, data / SETTING_1G,
                    ignore=shutil.ignore_patterns("raw", "processed"))
    coruns = data / f"corun-{SETTING_1G}"
    shutil.copytree(CORUNS, coruns, ignore=lambda d, names: [n for n in names if n.startswith("corun-")
                                                               and not n.startswith(KEEP_CORUN)])
    table = pd.read_csv(coruns / "coruns.csv")
    table[table["corun_id"] == KEEP_CORUN].to_csv(coruns / "coruns.csv", index=False)
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "colocate", "--datasets-dir", str(data), "--models-dir",
                           str(ROOT / "trained_models"), "--out", str(out), "--quiet"]) == 0
    section = json.loads((out / "colocate.json").read_text())["coruns"][f"corun-{SETTING_1G}"]
    assert [c["corun_id"] for c in section["coruns"]] == [KEEP_CORUN]
    measured = table.set_index("corun_id").loc[KEEP_CORUN]
    assert section["summary"]["compute"]["measured_mean"] == pytest.approx(measured["compute_mean"])
    for name in ("inspector", "solo"):  # one pair, counted once in each confusion table
        assert sum(section["confusion"][name].values()) == 1
    assert len(section["slowdown"]) == 2 and min(section["slowdown"]) > 0
    assert f"### corun-{SETTING_1G} (1 co-runs" in (out / "results.md").read_text()
    # --settings redoes its own co-runs and keeps those of other settings
    saved = json.loads((out / "colocate.json").read_text())
    saved["coruns"]["corun-another-setting"] = dict(section, coruns=[])
    saved["coruns"][f"corun-{SETTING_1G}"] = {}
    (out / "colocate.json").write_text(json.dumps(saved))
    assert reproduce.main(["--sections", "colocate", "--settings", SETTING_1G, "--datasets-dir", str(data),
                           "--models-dir", str(ROOT / "trained_models"), "--out", str(out), "--quiet"]) == 0
    again = json.loads((out / "colocate.json").read_text())["coruns"]
    assert again["corun-another-setting"]["coruns"] == []
    unstamped = lambda entry: {k: v for k, v in entry.items() if k not in ("date", "command")}  # noqa: E731
    assert unstamped(again[f"corun-{SETTING_1G}"]) == unstamped(section) and section["date"] and section["command"]
    capsys.readouterr()

    script = load_script("eval_colocate", "eval_colocate_script")
    assert script.main(["--coruns", str(coruns), "--solo", str(data / SETTING_1G),
                        "--json", str(tmp_path / "co.json")]) == 0
    alone = json.loads((tmp_path / "co.json").read_text())
    for res, row in section["summary"].items():
        assert alone["summary"][res] == pytest.approx(row)
    assert alone["confusion"] == section["confusion"]


def test_design_section_varies_the_shipped_network(reproduce, tmp_path, write_dataset, fake_builder, monkeypatch):
    """The design study trains the shipped configuration (here a residual hybrid) with one knob
    changed; a scaling other than ln drops the residuals (they are taken in log space)."""
    from driple.hardware.host_speed import HostSpeed
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.splits import random_split
    from driple.inspector.train import preset, train_inspector
    from driple.shipping.ship import ship

    monkeypatch.setattr(dataset_module, "zoo_graph", fake_builder)
    monkeypatch.setattr(dataset_module, "_zoo_builder_id", lambda: "fake")
    data = tmp_path / "datasets"
    lo = write_dataset(data / "cpu-ddp-w2-lo", n_configs=24)
    ds = InspectorDataset(lo, progress=False)
    split = random_split(ds)
    config, options = preset("hybrid", hidden_channels=8, num_repeats=2, epochs=2, patience=2)
    host = HostSpeed(flops_per_s=1e9, memory_bytes_per_s=1e10, memory_bytes=8e9, cpu_model="test")
    source = train_inspector(ds[split.train], ds[split.val], options, config, host=host, progress=False)
    models = tmp_path / "models"
    ship(source, "cpu-ddp-w2-lo", description="source", trained="test", command="pytest", root=models,
         default=True)
    out = tmp_path / "eval"
    assert reproduce.main(["--sections", "design", "--datasets-dir", str(data), "--models-dir", str(models),
                           "--out", str(out), "--work-dir", str(tmp_path / "work"), "--groupings", "uniform",
                           "--repeats", "2", "3", "--scalings", "max", "--quiet"]) == 0
    rows = {(r["study"], r["K"], r["scaling"]): r for r in json.loads((out / "design.json").read_text())["rows"]}
    assert set(rows) == {("grouping", 2, "ln"), ("K", 3, "ln"), ("scaling", 2, "max")}
    assert all(r["configuration"] == "hybrid" for r in rows.values())
    assert rows[("K", 3, "ln")]["residual"] and not rows[("scaling", 2, "max")]["residual"]
    assert "| hybrid (residual) | uniform | 3 | ln |" in (out / "results.md").read_text()


def test_a_dataset_is_copied_to_the_work_dir_once_per_run(reproduce, tmp_path, write_dataset, monkeypatch):
    """A dataset still being written is read as one snapshot: later sections of the same run
    see the copy made first, not rows added since."""
    from types import SimpleNamespace

    monkeypatch.setattr(dataset_module, "InspectorDataset", lambda root, **_: root)
    data = write_dataset(tmp_path / "datasets" / "cpu-ddp-w2-lo", n_configs=3)
    args = SimpleNamespace(datasets_dir=str(tmp_path / "datasets"), models_dir=str(tmp_path / "m"), out=None,
                           work_dir=str(tmp_path / "work"), graph_cache=None, build_workers=1, quiet=True)
    ctx = Context(args)
    copy = ctx.dataset("cpu-ddp-w2-lo", {})
    first = Path(copy, "results.csv").read_text()
    write_dataset(data, n_configs=6)  # the collector adds rows
    assert ctx.dataset("cpu-ddp-w2-lo", {}) == copy and Path(copy, "results.csv").read_text() == first


def test_another_scripts_file_under_a_sections_name_is_left_out_of_the_report(reproduce, tmp_path, capsys):
    from types import SimpleNamespace

    from driple.evaluation.reproduce.report import report

    (tmp_path / "datasets").mkdir()
    args = SimpleNamespace(datasets_dir=str(tmp_path / "datasets"), models_dir=str(tmp_path / "m"),
                           out=str(tmp_path / "out"), work_dir=None, settings=None)
    ctx = Context(args)
    ctx.save("transfer", {"source": "s", "targets": {}})
    assert ctx.load_section("transfer")["source"] == "s"
    (tmp_path / "out" / "transfer.json").write_text(json.dumps({"source": "s", "target": "t", "rows": []}))
    assert ctx.load_section("transfer") is None
    assert "is not this reproduction's transfer section" in capsys.readouterr().err
    assert report(ctx).startswith("# Reproduced results")


def test_readme_blocks_are_refreshed_from_results_and_nothing_else(reproduce, tmp_path):
    results = "\n".join(["# Reproduced results", "", "## Accuracy", "", "### lo, family split (9 jobs)", "",
                         "NRMSE:", "", "| a |", "", "MAPE %:", "", "| m |", "", "Inspector against the tables:",
                         "", "| t |", "", "Median over the targets: inspector 3%.", "",
                         "### Summary: mean over targets", "", "| s |", "", "## Design study on lo", "", "| d |", ""])
    readme = tmp_path / "README.md"
    readme.write_text("Prose 13 of 14.\n<!-- reproduce mape: lo, family split -->\nold\n<!-- /reproduce -->\n"
                      "More prose.\n<!-- reproduce section: Summary: mean -->\n<!-- /reproduce -->\n"
                      "<!-- reproduce section: Design study -->\nstale\n<!-- /reproduce -->\n")
    assert refresh_readme(str(readme), results) == 3
    assert readme.read_text() == (
        "Prose 13 of 14.\n<!-- reproduce mape: lo, family split -->\nMAPE %:\n\n| m |\n\n"
        "Median over the targets: inspector 3%.\n<!-- /reproduce -->\nMore prose.\n"
        "<!-- reproduce section: Summary: mean -->\n| s |\n<!-- /reproduce -->\n"
        "<!-- reproduce section: Design study -->\n| d |\n<!-- /reproduce -->\n")
    readme.write_text("<!-- reproduce section: No such table -->\n<!-- /reproduce -->\n")
    from driple.errors import DripleError

    with pytest.raises(DripleError, match="no section 'No such table'"):
        refresh_readme(str(readme), results)


def test_refit_roofline_fits_the_shipped_roofline_again_and_only_when_it_changes(shipped, capsys):
    """scripts/refit_roofline.py: a shipped roofline unlike the one the code fits (here: its rates
    zeroed) is fitted again on the checkpoint's training jobs, the checksum renewed, the stale
    unseen-family record dropped, the memory fit and the card's training date kept; a second run changes nothing,
    an inspector without a roofline is left alone."""
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.dataset import InspectorDataset
    from driple.inspector.ensemble import with_roofline
    from driple.inspector.evaluate import checkpoint_split
    from driple.predict.registry import resolve, sha256
    from driple.shipping.ship import ship

    script = load_script("refit_roofline", "refit_roofline")
    data, models = shipped
    path, _ = resolve("cpu-ddp-w2-lo", root=models)
    inspector = load_inspector(str(path))
    ds = InspectorDataset(inspector.info["dataset"], progress=False)
    stale = with_roofline(inspector, ds, checkpoint_split(inspector, ds))
    stale.roofline.weights = {t: [0.0] * len(w) for t, w in stale.roofline.weights.items()}
    stale.info["unseen_family"] = {"modes": {}, "intervals": {}, "families": [], "source": {}}
    fit = {"offset_mb": 100.0, "scale": 1.0, "fitted_on": "test"}
    ship(stale, "cpu-ddp-w2-lo", description="source", trained="test", command="pytest", root=models, default=True,
         keep={"memory": fit})
    card = models / "cpu-ddp-w2-lo" / "MODEL_CARD.md"
    card.write_text(card.read_text().replace("\nTrained ", "\nTrained 2000-01-01 00:00 UTC on x; was "))

    assert script.main(["--models-dir", str(models), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "cpu-ddp-w2-lo: would refit" in out and "cpu-ddp-w2-1g: no roofline" in out
    assert script.main(["--models-dir", str(models)]) == 0
    assert "cpu-ddp-w2-lo: refitted" in capsys.readouterr().out
    path, entry = resolve("cpu-ddp-w2-lo", root=models)  # resolve checks the renewed checksum
    assert entry["sha256"] == sha256(path) and entry["description"] == "source"
    assert entry["memory"] == fit  # the simulator's fit is no roofline's: it stays
    refitted = load_inspector(str(path))
    assert "unseen_family" not in refitted.info
    assert any(any(w) for w in refitted.roofline.weights.values())
    assert "Trained 2000-01-01 00:00 UTC on x" in card.read_text() and "Roofline fitted again" in card.read_text()
    assert "python scripts/refit_roofline.py" in card.read_text()
    assert script.main(["--models-dir", str(models), "--settings", "cpu-ddp-w2-lo"]) == 0
    assert "cpu-ddp-w2-lo: unchanged" in capsys.readouterr().out
    assert script.main(["--models-dir", str(models / "none")]) == 2
    assert "no shipped inspector" in capsys.readouterr().err


def test_choose_roofline_overlap_uses_only_the_inspectors_train_and_validation_jobs(shipped, capsys):
    """scripts/choose_roofline_overlap.py: every form scored by an inner leave-family-out over the
    shipped inspector's train + validation jobs (no calibration or test job)."""
    from driple.inspector.checkpoint import load_inspector
    from driple.predict.registry import resolve

    script = load_script("choose_roofline_overlap", "choose_overlap")
    data, models = shipped
    assert script.main(["--models-dir", str(models), "--settings", "cpu-ddp-w2-lo", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["cpu-ddp-w2-lo"]
    split = load_inspector(str(resolve("cpu-ddp-w2-lo", root=models)[0])).info["split"]
    assert r["jobs"] == len(split["train"]) + len(split["val"])
    assert set(r) >= {"roofline", "roofline-overlap", "roofline-overlap-messages"} and r["roofline"]["overlap"] == {}
    assert r["roofline-overlap-messages"]["step_time"] > 0
    assert r["roofline"]["step_time"] > 0 and r["roofline-overlap"]["step_time"] <= r["roofline"]["step_time"] * 1.5
    assert script.main(["--models-dir", str(models / "none")]) == 2
    assert "no shipped inspector" in capsys.readouterr().err


def test_choose_configuration_lofo_trains_each_family_out_on_train_and_validation_jobs(shipped, capsys, monkeypatch):
    """scripts/choose_configuration_lofo.py: every candidate predicts each family of the shipped
    source's train + validation jobs trained without it; no calibration or test job is used."""
    from driple.inspector.checkpoint import load_inspector
    from driple.inspector.estimators import GNNEstimator
    from driple.inspector.evaluate import own_jobs
    from driple.inspector.jobs import job_table
    from driple.predict.registry import resolve

    script = load_script("choose_configuration_lofo", "choose_configuration")
    data, models = shipped
    path = str(resolve("cpu-ddp-w2-lo", root=models)[0])
    ds, split = own_jobs(load_inspector(path))
    families = job_table(ds)["family"].tolist()
    fitted = []
    fit = GNNEstimator.fit
    monkeypatch.setattr(GNNEstimator, "fit", lambda self, d, train, val: fitted.append((self.name, train, val)) or fit(self, d, train, val))
    r = script.inner_leave_family_out(path, ["features"], epochs=2, patience=2, processes=1)
    inner = set(split.train + split.val)
    assert r["jobs"] == len(inner) and r["chosen"] == "features"
    assert len(fitted) == len(r["families"]) == len({families[i] for i in inner}) > 1
    for (name, train, val), family in zip(fitted, r["families"]):
        assert name == "features" and set(train) | set(val) <= inner
        assert family not in {families[i] for i in (*train, *val)}  # the family it predicts is unseen
    assert set(r["features"]["mape"]) == set(ds.target_names) and r["features"]["median"] > 0
    assert script.main(["--models-dir", str(models / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("choose_configuration_lofo: error:") and "Traceback" not in err


def test_ship_inspectors_selects_by_an_inner_leave_family_out(shipped, tmp_path, capsys):
    """--select-by lofo: the presets are trained with the roofline as usual, the inner
    leave-family-out on the train + validation jobs chooses, and the shipped source records the
    choice (and configuration_lofo.json beside it); refused without presets or with trees."""
    from driple.inspector.checkpoint import load_inspector
    from driple.predict.registry import resolve

    script = load_script("ship_inspectors", "ship_inspectors")
    data, _ = shipped
    out = tmp_path / "shipped"
    common = ["--datasets", str(data), "--out", str(out), "--targets", "", "--epochs", "2", "--patience", "2",
              "--processes", "1", "--build-workers", "1"]
    assert script.main([*common, "--select-by", "lofo"]) == 2
    assert "--select-by lofo chooses among the --select-models presets" in capsys.readouterr().err
    assert script.main([*common, "--select-models", "features,hybrid", "--select-by", "lofo"]) == 0
    printed = capsys.readouterr().out
    assert "inner leave-family-out over features, hybrid" in printed
    saved = json.loads((out / "evaluation" / "configuration_lofo.json").read_text())
    assert saved["command"].startswith("python scripts/ship_inspectors.py") and saved["chosen"] in ("features", "hybrid")
    chosen = min(("features", "hybrid"), key=lambda c: saved[c]["median"])
    selection = load_inspector(str(resolve("cpu-ddp-w2-lo", root=out)[0])).info["selection"]
    assert selection["chosen"] == f"{chosen}+roofline" == f"{saved['chosen']}+roofline"
    assert selection["candidates"] == {f"{c}+roofline": saved[c]["median"] for c in ("features", "hybrid")}


def test_the_configuration_choice_is_saved_with_its_provenance_and_shown_in_the_source_card(reproduce, tmp_path):
    script = load_script("choose_configuration_lofo", "choose_configuration")
    result = {"jobs": 12, "families": ["a", "b", "c"], "chosen": "hybrid",
              "features": {"median": 18.6, "mean": 17.9, "step_time": 12.0, "mape": {}},
              "hybrid": {"median": 16.7, "mean": 18.0, "step_time": 13.9, "mape": {}}}
    path = tmp_path / "evaluation" / "configuration_lofo.json"
    script.save(result, str(path), "cpu-ddp-w2-lo", ["--save"])
    saved = json.loads(path.read_text())
    assert saved["command"] == "python scripts/choose_configuration_lofo.py --save"
    assert saved["setting"] == "cpu-ddp-w2-lo" and saved["cpu_model"] and saved["date"]
    lines = configuration_lines(saved, "cpu-ddp-w2-lo")
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[1:] == ["| features | 18.6% | 17.9% | 12.0% |", "| **hybrid** | 16.7% | 18.0% | 13.9% |"]
    assert "3 families of the 12 train + validation jobs" in "\n".join(lines)
    assert configuration_lines(saved, "cpu-ddp-w2-1g") == []  # a target's card: not its choice
    assert configuration_lines(None, "cpu-ddp-w2-lo") == []


@pytest.mark.parametrize("script", ["reproduce", "ship_inspectors", "calibrate_unseen_families",
                                    "refit_roofline", "choose_configuration_lofo", "rejoin_roofline"])
def test_scripts_that_write_shipped_files_refuse_another_checkout_s_driple(script, tmp_path):
    """A second checkout's scripts scored and overwrote the first's trained_models/ through its
    editable install: a script that writes shipped files imports the installed driple (no
    sys.path edits) and stops, in one line, when that driple is not its own checkout's."""
    import subprocess

    other = tmp_path / "other" / "driple"  # another checkout's package, first on the path
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    for name in ("shipped.py", "errors.py"):  # what the check itself imports
        shutil.copy(ROOT / "driple" / name, other / name)
    env = {**os.environ, "PYTHONPATH": str(other.parent)}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), "--help"], env=env,
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [
        f"{script}.py: error: driple is imported from {other.parent}, not from this script's checkout "
        f"{ROOT}; run pip install -e {ROOT}"]
    assert "sys.path" not in (ROOT / "scripts" / f"{script}.py").read_text()


def test_nothing_shipped_is_written_unless_asked_by_name(reproduce, tmp_path, monkeypatch, capsys):
    """Without ``--write-shipped`` the report goes to ``driple-evaluation/`` in the current
    directory; an ``--out`` among the shipped inspectors, or ``--cards`` over them, is refused
    before any work."""
    data, models, empty = tmp_path / "datasets", tmp_path / "models", tmp_path / "empty"
    for d in (data, models, empty):
        d.mkdir()
    (models / "registry.json").write_text('{"format": "driple-registry", "settings": {}}')
    monkeypatch.chdir(tmp_path)
    common = ["--report", "--datasets-dir", str(data), "--quiet"]
    assert reproduce.main([*common, "--models-dir", str(empty)]) == 0
    assert (tmp_path / "driple-evaluation" / "results.md").read_text().startswith("# Reproduced results")
    capsys.readouterr()
    assert reproduce.main([*common, "--models-dir", str(models), "--out", str(models / "evaluation")]) == 2
    assert "--write-shipped" in capsys.readouterr().err
    assert reproduce.main([*common, "--models-dir", str(models), "--cards"]) == 2
    assert "--write-shipped" in capsys.readouterr().err
    assert not (models / "evaluation").exists()
