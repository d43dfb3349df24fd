"""The language-model loss, torch only: what the LightningModule trains on and what the coord
check steps on, one definition for both."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy in nats; targets of -100 carry no loss. Half-precision
    logits are raised to float32 for the log-sum-exp; float64 logits keep their precision."""
    flat = logits.flatten(0, 1)
    if flat.element_size() < 4:  # bf16, fp16
        flat = flat.float()
    return F.cross_entropy(flat, targets.flatten(), ignore_index=-100)
