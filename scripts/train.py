"""Train an inspector on one collector dataset (same as ``driple train``).

    python scripts/train.py --dataset datasets/v2/cpu-ddp-w2-lo --out my-models/cpu-ddp-w2-lo
    python scripts/train.py --dataset datasets/S --out my-models/S --split family --family resnet

Prints the test scores and writes ``<out>/inspector.pt`` and ``<out>/scores.json``; a shipped
inspector's directory (trained_models/) is refused without ``--overwrite-shipped``.
"""
import sys

from driple.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
