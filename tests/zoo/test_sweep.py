"""The collector's grid of zoo configurations and the step-time estimate that balances it."""
from __future__ import annotations

import collections
import json
import random

import yaml

from driple.zoo import OPTIMIZERS, estimate_step_seconds, resolve_config, sweep_configs
from driple.zoo import sweep as sweep_mod
from driple.zoo.registry import build_model

FAMILIES = ("alexnet", "bert", "densenet", "googlenet", "gpt", "lstm_lm", "mlp", "mobilenetv2", "resnet", "vgg", "vit")


def test_sweep_configs_span_the_zoo_within_budget():
    configs = sweep_configs()
    assert len(configs) >= 300
    keys = {json.dumps({k: c[k] for k in ("name", "knobs", "batch_size", "optimizer")}, sort_keys=True)
            for c in configs}
    assert len(keys) == len(configs)  # distinct
    per_family = collections.Counter(c["name"] for c in configs)
    assert set(per_family) == set(FAMILIES)
    assert min(per_family.values()) >= 20
    for fam in FAMILIES:
        mine = [c for c in configs if c["name"] == fam]
        assert len({json.dumps(c["knobs"], sort_keys=True) for c in mine}) >= 3, fam
        assert len({c["batch_size"] for c in mine}) >= 2, fam
    assert {c["optimizer"] for c in configs} == set(OPTIMIZERS)
    low, high = sweep_mod.BUDGET_SECONDS
    assert all(low <= c["est_seconds"] <= high for c in configs)
    yaml.safe_load(yaml.safe_dump(configs))  # plain types only: the collector writes grid.yaml
    for c in configs[:: len(configs) // 25]:  # every entry is a valid build request
        resolve_config(c["name"], c["batch_size"], **c["knobs"])


def test_sweep_configs_seed_and_size():
    assert sweep_configs(seed=3) == sweep_configs(seed=3)
    assert sweep_configs(seed=3) != sweep_configs(seed=4)
    small = sweep_configs(n=22)
    assert len(small) == 22 and collections.Counter(c["name"] for c in small) == {f: 2 for f in FAMILIES}
    assert len(sweep_configs(n=10_000)) > 1000


def test_shipped_cost_table_is_current():
    shipped = sweep_mod._shipped_costs()
    grid = {(f, sweep_mod.config_key(resolve_config(f, **k))) for f, vs in sweep_mod.SWEEP_GRID.items() for k, _ in vs}
    assert grid <= set(shipped), "run driple.zoo.sweep.write_cost_table()"
    for family, key in random.Random(0).sample(sorted(grid), 4):
        cost = sweep_mod._count_forward(family, key)
        assert cost == shipped[family, key]
        assert cost.params == sum(p.numel() for p in build_model(family, json.loads(key), "meta").parameters())


def test_estimate_grows_with_batch_and_model():
    assert estimate_step_seconds("resnet", 64) > estimate_step_seconds("resnet", 8)
    assert estimate_step_seconds("resnet50") > estimate_step_seconds("resnet20_cifar")
    assert estimate_step_seconds("mlp", optimizer="adam") > estimate_step_seconds("mlp", optimizer="sgd")
