import pandas as pd
import pytest

from driple.errors import DripleError
from driple.inspector.dataset import InspectorDataset
from driple.inspector.jobs import architecture_key, job_table
from driple.inspector.splits import (PARTS, Split, assign_groups, cut_groups, family_split,
                                     family_splits, holdout_split, make_split, make_splits,
                                     random_split)


def tiny_table() -> pd.DataFrame:
    """10 jobs of 5 architectures (a..e), 2 jobs each (sgd and adam siblings), 3 families."""
    rows = []
    for arch, family in zip("abcde", ["cnn", "cnn", "lm", "lm", "mlp"]):
        for opt in ("sgd", "adam"):
            rows.append({"job_id": f"{arch}-{opt}", "family": family, "architecture": arch,
                         "optimizer": opt, "batch_size": 8})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- by hand
def test_assign_groups_by_hand():
    # 10 groups of 2 jobs, shares 50/15/15/20 of 20 jobs: bounds at 10, 13 and 16 jobs;
    # midpoints 1, 3, ..., 9 -> train; 11 -> val; 13, 15 -> calibration; 17, 19 -> test
    assert assign_groups([2] * 10, (0.5, 0.15, 0.15, 0.2)) == [0, 0, 0, 0, 0, 1, 2, 2, 3, 3]
    # sizes 5, 1, 1, 1 (8 jobs): bounds 4, 5.2, 6.4; midpoints 2.5, 5.5, 6.5, 7.5 -> 0, 2, 3, 3;
    # val is empty while test holds two groups: it takes test's last group
    assert assign_groups([5, 1, 1, 1], (0.5, 0.15, 0.15, 0.2)) == [0, 2, 3, 1]
    # a zero share stays empty: bounds 1.5, 1.5; a midpoint on a bound goes to the later part
    assert assign_groups([1, 1, 1], (0.5, 0.0, 0.5)) == [0, 2, 2]


def test_cut_groups_never_cuts_a_group_and_is_seeded():
    keys = list("aabbbcdddde")
    parts = cut_groups(keys, (0.5, 0.25, 0.25), seed=1)
    assert sorted(i for p in parts for i in p) == list(range(len(keys)))
    owner = {keys[i]: n for n, p in enumerate(parts) for i in p}
    assert all(owner[keys[i]] == n for n, p in enumerate(parts) for i in p)
    assert cut_groups(keys, (0.5, 0.25, 0.25), seed=1) == parts
    assert any(cut_groups(keys, (0.5, 0.25, 0.25), seed=s) != parts for s in range(2, 6))


def test_random_split_of_a_tiny_table():
    table = tiny_table()
    split = random_split(table, seed=0, fractions=(0.4, 0.2, 0.2, 0.2))
    parts = split.parts()
    assert list(parts) == list(PARTS)
    assert sorted(i for p in parts.values() for i in p) == list(range(10))
    # every part holds one or two whole architectures: siblings never straddle
    for part in parts.values():
        archs = {table["architecture"][i] for i in part}
        assert part and {i for i in range(10) if table["architecture"][i] in archs} == set(part)
    # 5 architectures of 2 jobs at 40/20/20/20: two go to train, one to each other part
    assert [len(p) for p in parts.values()] == [4, 2, 2, 2]
    assert random_split(table, seed=0, fractions=(0.4, 0.2, 0.2, 0.2)) == split


def test_family_split_of_a_tiny_table():
    table = tiny_table()
    split = family_split(table, "lm", seed=0, fractions=(0.34, 0.33, 0.33))
    assert split.kind == "family" and split.held_out == "lm"
    assert split.test == [4, 5, 6, 7]  # architectures c and d
    # the other three architectures (a, b, e): one each to train, val and calibration
    rest = [split.train, split.val, split.calibration]
    assert sorted(len(p) for p in rest) == [2, 2, 2]
    assert sorted(i for p in rest for i in p) == [0, 1, 2, 3, 8, 9]
    with pytest.raises(DripleError, match="at least 3 architectures outside mlp"):
        family_split(tiny_table().iloc[[0, 1, 8, 9]], "mlp")


def test_holdout_split_and_disjointness_check():
    split = holdout_split(tiny_table(), [0, 9], seed=0)
    assert split.test == [0, 9] and 0 not in split.train + split.val + split.calibration
    # test jobs 0 (a-sgd) and 9 (e-adam) leave their siblings in the rest: a hold-out is by job
    bad = Split("random", train=[0, 1], val=[2], test=[1])
    with pytest.raises(DripleError, match="both the train and the test part"):
        bad.check()


def test_architecture_key_ignores_knob_order_not_values():
    assert architecture_key("vgg", '{"depth": 11, "width": 0.5}') == \
        architecture_key("vgg", {"width": 0.5, "depth": 11})
    assert architecture_key("vgg", {"depth": 13}) != architecture_key("vgg", {"depth": 11})
    assert architecture_key("mlp", "") == architecture_key("mlp", None) == "mlp {}"
    with pytest.raises(DripleError, match="JSON"):
        architecture_key("mlp", "{depth")
    table = job_table(pd.DataFrame({"job_id": [1], "family": ["f"], "model": ["m"],
                                    "knobs": ['{"b": 1, "a": 2}']}))
    assert table["architecture"][0] == 'm {"a": 2, "b": 1}'
    with pytest.raises(DripleError, match="architecture"):
        job_table(pd.DataFrame({"job_id": [1], "family": ["f"]}))


# ---------------------------------------------------------------------- on a dataset
@pytest.fixture
def siblings(fake_builder, tmp_path, label_columns):
    """16 architectures (knob ``seed``), each measured with sgd and with adam (32 jobs)."""
    from driple.metrics import METRICS

    root = tmp_path / "S"
    root.mkdir()
    extra, values = label_columns()
    header = ["job_id", "setting", "model", "family", "knobs", "batch_size", "optimizer", "status", *METRICS, *extra]
    lines = [",".join(header)]
    for c in range(16):
        for opt in ("sgd", "adam"):
            lines.append(",".join([f"j{c:02d}{opt}", "cpu-ddp-w2-lo", f"net{c % 3}", ["alpha", "beta", "gamma"][c % 3],
                                   f'"{{""seed"": {c}}}"', "8", opt, "ok", *(["1.0"] * len(METRICS)), *values]))
    (root / "results.csv").write_text("\n".join(lines) + "\n")
    return InspectorDataset(str(root), builder=fake_builder, builder_id="fake", progress=False)


def test_random_split_keeps_optimizer_siblings_together(siblings):
    split = random_split(siblings, seed=0)
    table = job_table(siblings)
    assert len(table) == 32 and table["architecture"].nunique() == 16
    owner = {}
    for part, idx in split.parts().items():
        assert idx, part
        for i in idx:
            assert owner.setdefault(table["architecture"][i], part) == part
    # the configuration keys (which include the optimizer) would have allowed straddling
    assert len(set(siblings.config_keys)) == 32
    assert sum(len(p) for p in split.parts().values()) == 32


def test_family_splits_and_record_round_trip(siblings):
    splits = family_splits(siblings, seed=0)
    fams = siblings.families
    assert [s.held_out for s in splits] == ["alpha", "beta", "gamma"]
    for s in splits:
        assert {fams[i] for i in s.test} == {s.held_out}
        assert s.held_out not in {fams[i] for i in s.train + s.val + s.calibration}
        assert sorted(s.train + s.val + s.calibration + s.test) == list(range(32))
        assert all(s.parts().values())
    assert [s.held_out for s in make_splits(siblings, "family", families=["beta"])] == ["beta"]
    with pytest.raises(DripleError, match="no job of family delta"):
        make_splits(siblings, "family", families=["delta"])
    with pytest.raises(DripleError, match="--family"):
        make_split(siblings, "family")

    split = random_split(siblings, seed=3)
    record = split.to_dict(siblings)
    assert set(record["calibration"]) and record["group_by"] == "architecture"
    assert Split.from_dict(record, siblings) == split
    old = {k: v for k, v in record.items() if k not in ("calibration", "group_by")}  # a v1 record
    again = Split.from_dict(old, siblings)
    assert again.calibration == [] and again.group_by == "configuration" and again.test == split.test


def test_random_split_needs_four_architectures(fake_builder, write_dataset, tmp_path):
    ds = InspectorDataset(write_dataset(tmp_path / "S", n_configs=3, repeats=3), builder=fake_builder,
                          builder_id="fake", progress=False)
    with pytest.raises(DripleError, match="at least 4 architectures"):
        random_split(ds)
