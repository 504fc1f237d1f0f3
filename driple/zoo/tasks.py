"""Synthetic training data and losses, one :class:`~driple.zoo.registry.Task` per kind of input.

Batches are drawn from a caller's ``torch.Generator`` on CPU, so a seed fixes them. Losses are
plain torch functions (no Python branching on values) so ``make_fx`` can trace them.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from driple.zoo.registry import Task

IGNORE_INDEX = -100  # target id that cross-entropy skips (MLM positions that are not masked)
MLM_MASK_RATE = 0.15  # share of positions a masked-LM batch predicts (BERT)


def classification_loss(output: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy of logits ``[B, C]`` against class ids ``[B]``."""
    return F.cross_entropy(output, targets)


def token_loss(output: Tensor, targets: Tensor) -> Tensor:
    """Mean cross-entropy of logits ``[B, T, V]`` against ids ``[B, T]``, skipping -100."""
    return F.cross_entropy(output.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)


def _images(config: dict, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    size = config["image_size"]
    inputs = torch.randn(batch_size, 3, size, size, generator=generator)
    targets = torch.randint(0, config["num_classes"], (batch_size,), generator=generator)
    return inputs, targets


def _features(config: dict, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    inputs = torch.randn(batch_size, config["input_dim"], generator=generator)
    targets = torch.randint(0, config["num_classes"], (batch_size,), generator=generator)
    return inputs, targets


def _next_tokens(config: dict, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    tokens = torch.randint(0, config["vocab_size"], (batch_size, config["seq_len"] + 1), generator=generator)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _masked_tokens(config: dict, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """BERT-style MLM: the same number of positions per row (>= 1) get the [MASK] id
    (the last id of the vocabulary) and are the only ones predicted."""
    vocab, seq_len = config["vocab_size"], config["seq_len"]
    tokens = torch.randint(0, vocab - 1, (batch_size, seq_len), generator=generator)
    n_masked = max(1, round(MLM_MASK_RATE * seq_len))
    order = torch.rand(batch_size, seq_len, generator=generator).argsort(dim=1)
    masked = torch.zeros(batch_size, seq_len, dtype=torch.bool)
    masked.scatter_(1, order[:, :n_masked], True)
    inputs = tokens.masked_fill(masked, vocab - 1)
    targets = tokens.masked_fill(~masked, IGNORE_INDEX)
    return inputs, targets


def _token_classes(config: dict, batch_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    inputs = torch.randint(0, config["vocab_size"], (batch_size, config["seq_len"]), generator=generator)
    targets = torch.randint(0, config["num_classes"], (batch_size,), generator=generator)
    return inputs, targets


IMAGE_CLASSIFICATION = Task("image_classification", _images, classification_loss)
FEATURE_CLASSIFICATION = Task("feature_classification", _features, classification_loss)
LANGUAGE_MODELING = Task("language_modeling", _next_tokens, token_loss)
MASKED_LANGUAGE_MODELING = Task("masked_language_modeling", _masked_tokens, token_loss)
SEQUENCE_CLASSIFICATION = Task("sequence_classification", _token_classes, classification_loss)
