"""The language-model loss, on torch alone (no Lightning): what the LightningModule trains on and
what the coord check steps on, one definition for both."""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor

from trainers.targets import IGNORE


def lm_loss(logits: Tensor, targets: Tensor, reduction: Literal["mean", "sum"] = "mean") -> Tensor:
    """Next-token cross-entropy in nats over the targets that are not ``IGNORE``: their mean, or
    their sum (what a mean over several micro-batches or ranks adds up before dividing by the
    count of them all: ``trainers.training.accumulate``). Half-precision logits are raised to
    float32 for the log-sum-exp; float64 logits keep their precision."""
    flat = logits.flatten(0, 1)
    if flat.element_size() < 4:  # bf16, fp16
        flat = flat.float()
    return F.cross_entropy(flat, targets.flatten(), ignore_index=IGNORE, reduction=reduction)


def counted(targets: Tensor) -> Tensor:
    """How many of ``targets`` carry loss (a 0-d int64 tensor, on their device)."""
    return (targets != IGNORE).sum()
