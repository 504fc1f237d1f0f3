"""Transfer an inspector to another setting with a fraction of its data (same as ``driple finetune``).

    python scripts/finetune.py --from trained_models/S --dataset datasets/T --fraction 0.4 --out my-models/T
    python scripts/finetune.py --from trained_models/S --dataset datasets/T --scheme mlp --out my-models/T-ft

Schemes: paper (second half of the repeated GCN layer + MLP), mlp (MLP only), scratch.
"""
import sys

from driple.cli import main

if __name__ == "__main__":
    sys.exit(main(["finetune", *sys.argv[1:]]))
