"""Write the job grids of the shipped v2 datasets (deterministic: re-running writes the same files).

    python scripts/make_grids.py --out grids/      # then, per setting, on a quiet host:
    driple collect sweep --grid grids/cpu-ddp-w2-lo.yaml --out datasets/v2/cpu-ddp-w2-lo --overwrite-shipped ...

- every setting: the first N of the zoo's balanced sweep (``driple.zoo.sweep_configs(seed=0)``:
  11 families, several sizes, batch sizes and optimizers, 30 ms - 1.2 s per step), so that any
  prefix of a grid is balanced across families;
- the source setting (``cpu-ddp-w2-lo``) also gets the full-size jobs a user asks about most:
  ImageNet-size CNNs at 224x224 with small batches and GPT-2-small-size language models with
  short sequences, placed right after the first 40 zoo jobs (so an interrupted sweep still has
  them), with a cap on the measured part that fits 20 of their iterations;
- the targets (``cpu-ddp-w2-1g``, ``cpu-ps-p1w2-1g``, the FSDP settings) get a few of those at
  the end; the FSDP grids are the same jobs as ``cpu-ddp-w2-1g``'s, so every FSDP job also
  exists under DDP;
- ``<setting>-retest``: the first 20 jobs of the setting's grid, measured a second time.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import yaml

FULL_SIZE_CNN = [  # (model, batch, optimizer): ImageNet 224x224
    ("resnet50", 2, "sgd"), ("resnet50", 2, "adamw"), ("resnet50", 4, "sgd"), ("resnet50", 4, "adamw"),
    ("resnet50", 8, "sgd"), ("resnet50", 8, "adam"), ("resnet50", 8, "adamw"), ("resnet50", 16, "sgd"),
    ("resnet18", 4, "sgd"), ("resnet18", 8, "adamw"), ("resnet18", 16, "sgd"), ("resnet34", 8, "adam"),
    ("resnet101", 2, "sgd"), ("mobilenet_v2", 8, "sgd"), ("mobilenet_v2", 32, "adam"), ("vgg11", 2, "sgd"),
    ("densenet121", 2, "sgd"), ("densenet121", 8, "adamw"), ("googlenet_imagenet", 4, "adam"),
    ("googlenet_imagenet", 16, "sgd"), ("alexnet_imagenet", 16, "sgd"), ("alexnet_imagenet", 64, "adamw"),
    ("vit_b_16", 2, "adamw"), ("resnet50", 16, "adamw"),
]
FULL_SIZE_LM = [  # (model, batch, optimizer, sequence length): GPT-2 small (124 M) / BERT-base
    ("gpt2_small", b, opt, seq)
    for seq in (32, 64, 128) for b in (1, 2, 4) for opt in ("sgd", "adamw")
] + [("gpt2_small", 8, "sgd", 32), ("gpt2_small", 8, "adamw", 64),
     ("bert_base_cls", 2, "adamw", 128), ("bert_base_cls", 4, "sgd", 128)]
TARGET_FULL_SIZE = [("resnet50", 4, "sgd", None), ("resnet50", 8, "adamw", None),
                    ("gpt2_small", 2, "sgd", 64), ("gpt2_small", 4, "adamw", 32)]
SIZES = {"cpu-ddp-w2-lo": 340, "cpu-ddp-w2-1g": 170, "cpu-ps-p1w2-1g": 170,
         "cpu-fsdp-w2-lo": 170, "cpu-fsdp-w2-1g": 170}  # FSDP: the same jobs as cpu-ddp-w2-1g
FULL_SIZE_AFTER = 40
RETEST_JOBS = 20
MAX_SECONDS = 240.0  # 20 iterations of the slowest full-size job (~9 s on this VM) plus margin


def _zoo_jobs(n: int) -> list[dict]:
    from driple.zoo import sweep_configs

    return [{"model": c["name"], "knobs": dict(c.get("knobs") or {}), "batch_size": c["batch_size"],
             "optimizer": c["optimizer"], "est_seconds": c.get("est_seconds")}
            for c in sweep_configs(seed=0, n=400)[:n]]


def _full(model: str, batch: int, opt: str, seq: int | None = None) -> dict:
    from driple.zoo import estimate_step_seconds

    knobs = {"seq_len": seq} if seq else {}
    return {"model": model, "knobs": knobs, "batch_size": batch, "optimizer": opt,
            "est_seconds": round(estimate_step_seconds(model, batch, opt, **knobs), 3)}


def grids() -> dict[str, dict]:
    out = {}
    full = [_full(*j) for j in FULL_SIZE_CNN] + [_full(*j) for j in FULL_SIZE_LM]
    for setting, n in SIZES.items():
        zoo = _zoo_jobs(n)
        if setting == "cpu-ddp-w2-lo":
            jobs = zoo[:FULL_SIZE_AFTER] + full + zoo[FULL_SIZE_AFTER:]
        else:
            jobs = zoo + [_full(*j) for j in TARGET_FULL_SIZE]
        out[setting] = {"setting": setting, "seconds": 6.0, "warmup": 5, "min_iterations": 20,
                        "max_seconds": MAX_SECONDS, "jobs": jobs}
        out[f"{setting}-retest"] = {**out[setting], "jobs": jobs[:RETEST_JOBS]}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="grids", help="directory for <setting>.yaml (default grids/)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in grids().items():
        path = out / f"{name}.yaml"
        path.write_text(f"# {name}: {len(doc['jobs'])} jobs, written by scripts/make_grids.py\n"
                        + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
        est = sum((j["est_seconds"] or 0) * 25 for j in doc["jobs"]) / 3600
        print(f"{path}: {len(doc['jobs'])} jobs (~{est:.1f} h of steps by the zoo's estimate, plus start-up)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
