"""The language-model loss, torch only: what the LightningModule trains on and what the coord
check steps on, one definition for both."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy in nats; targets of -100 carry no loss."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
