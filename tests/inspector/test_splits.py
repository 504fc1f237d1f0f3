import pytest

from driple.errors import DripleError
from driple.inspector.dataset import InspectorDataset
from driple.inspector.splits import Split, family_splits, make_split, random_split


@pytest.fixture
def repeated(fake_builder, write_dataset, tmp_path):
    root = write_dataset(tmp_path / "S", n_configs=20, repeats=2)
    return InspectorDataset(root, builder=fake_builder, builder_id="fake", progress=False)


def test_random_split_sizes_groups_and_seed(repeated):
    split = random_split(repeated, seed=0)
    assert (len(split.train), len(split.val), len(split.test)) == (24, 8, 8)
    assert sorted(split.train + split.val + split.test) == list(range(40))
    keys = repeated.config_keys
    parts = [{keys[i] for i in p} for p in (split.train, split.val, split.test)]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert random_split(repeated, seed=0) == split
    assert random_split(repeated, seed=1).test != split.test


def test_family_splits(repeated):
    splits = family_splits(repeated)
    assert [s.held_out for s in splits] == ["alpha", "beta", "gamma"]
    fams = repeated.families
    for s in splits:
        assert {fams[i] for i in s.test} == {s.held_out}
        assert s.held_out not in {fams[i] for i in s.train + s.val}
        assert sorted(s.train + s.val + s.test) == list(range(40))
    with pytest.raises(DripleError, match="--family"):
        make_split(repeated, "family")


def test_split_record_round_trip(repeated):
    split = random_split(repeated, seed=3)
    record = split.to_dict(repeated)
    assert record["test"][0].startswith("j")
    assert Split.from_dict(record, repeated) == split


def test_random_split_needs_three_configs(fake_builder, write_dataset, tmp_path):
    ds = InspectorDataset(write_dataset(tmp_path / "S", n_configs=2, repeats=3), builder=fake_builder,
                          builder_id="fake", progress=False)
    with pytest.raises(DripleError, match="at least 3"):
        random_split(ds)
