"""Train an inspector on one collector dataset (same as ``driple train``).

    python scripts/train.py --dataset datasets/cpu-ddp-w2-lo --out trained_models/cpu-ddp-w2-lo
    python scripts/train.py --dataset datasets/S --out trained_models/S --split family --family resnet

Prints the test scores and writes ``<out>/inspector.pt`` and ``<out>/scores.json``.
"""
import sys

from driple.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
