"""Per-node features and the op-frequency code.

Driple's node-type code is the frequency of the op type in a corpus of training graphs: a
common op (``add_``, ``convolution``) gets a large code, a rare one a small code. The corpus
counts ship in ``op_frequency.json`` (built by ``scripts/build_op_frequency.py`` from the zoo);
an op never seen there falls in the explicit ``<unseen>`` bucket, worth half a count.

Feature sets (columns of the grouped graph's ``x``, one row per group):

- ``"driple"`` — the paper's three: summed op-frequency code, summed tensor size (MB of op
  outputs), group size (number of ops).
- ``"rich"`` — those plus summed GFLOPs, summed memory traffic (MB read + written), bytes
  communicated (MB), and the share of the group's ops in forward / backward / optimizer / comm.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import networkx as nx
import numpy as np

from driple.errors import DripleError

UNSEEN = "<unseen>"
FEATURE_SETS = {
    "driple": ("op_freq", "tensor_mb", "n_ops"),
    "rich": (
        "op_freq", "tensor_mb", "n_ops", "gflops", "traffic_mb", "comm_mb",
        "share_forward", "share_backward", "share_optimizer", "share_comm",
    ),
}
PHASES = ("forward", "backward", "optimizer", "comm")


@dataclass(frozen=True)
class OpVocabulary:
    """Op-type counts over a corpus; ``code(op)`` is the op's relative frequency."""

    counts: dict[str, int]
    corpus: str = ""
    reference_nodes: int = 1000  # typical op count of a corpus graph (the proportional policy's n_ref)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def code(self, op: str) -> float:
        count = self.counts.get(op)
        return (count if count is not None else 0.5) / max(self.total, 1)

    @property
    def digest(self) -> str:
        """Short hash identifying the vocabulary; checkpoints store it to refuse a mismatch."""
        blob = json.dumps(sorted(self.counts.items())).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def to_json(self) -> dict:
        return {"corpus": self.corpus, "total": self.total, "unseen_count": 0.5,
                "reference_nodes": self.reference_nodes, "counts": self.counts}

    @classmethod
    def from_graphs(cls, graphs: list[nx.DiGraph], corpus: str = "") -> OpVocabulary:
        counts: dict[str, int] = {}
        for g in graphs:
            for _, op in g.nodes(data="op"):
                counts[op] = counts.get(op, 0) + 1
        sizes = sorted(g.number_of_nodes() for g in graphs)
        median = sizes[len(sizes) // 2] if sizes else 1000
        return cls(dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))), corpus, median)

    @classmethod
    def load(cls, path: str | Path | None = None) -> OpVocabulary:
        """Load a vocabulary file; the shipped one by default."""
        try:
            if path is None:
                text = resources.files("driple.graph").joinpath("op_frequency.json").read_text()
            else:
                text = Path(path).read_text()
            data = json.loads(text)
            return cls({str(k): int(v) for k, v in data["counts"].items()}, data.get("corpus", ""),
                       int(data.get("reference_nodes", 1000)))
        except FileNotFoundError:
            raise DripleError(
                f"op-frequency file {path or 'op_frequency.json'} not found; rebuild it with "
                "`python scripts/build_op_frequency.py`"
            ) from None
        except (ValueError, KeyError, TypeError) as exc:
            raise DripleError(f"op-frequency file {path or 'op_frequency.json'} is corrupt ({exc})") from None


@lru_cache(maxsize=1)
def default_vocabulary() -> OpVocabulary:
    return OpVocabulary.load()


def node_table(graph: nx.DiGraph, vocab: OpVocabulary) -> dict[str, np.ndarray]:
    """Per-node raw quantities in ``graph`` node order (units as in the module docstring)."""
    data = [d for _, d in graph.nodes(data=True)]
    table = {
        "op_freq": np.array([vocab.code(d["op"]) for d in data]),
        "tensor_mb": np.array([d["out_bytes"] / 1e6 for d in data]),
        "n_ops": np.ones(len(data)),
        "gflops": np.array([d["flops"] / 1e9 for d in data]),
        "traffic_mb": np.array([(d["in_bytes"] + d["out_bytes"]) / 1e6 for d in data]),
        "comm_mb": np.array([d["out_bytes"] / 1e6 if d["phase"] == "comm" else 0.0 for d in data]),
    }
    for phase in PHASES:
        table[f"share_{phase}"] = np.array([1.0 if d["phase"] == phase else 0.0 for d in data])
    return table


def feature_names(feature_set: str) -> tuple[str, ...]:
    try:
        return FEATURE_SETS[feature_set]
    except KeyError:
        raise DripleError(
            f"unknown feature set {feature_set!r}; choose one of {', '.join(FEATURE_SETS)}"
        ) from None
