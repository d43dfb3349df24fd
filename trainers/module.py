"""A thin LightningModule around ``DeepTransformer``: loss, optimizer, schedule, logging."""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from record.schema import Metric
from trainers.config import RunConfig, TrainConfig, flatten
from trainers.model import DeepTransformer


def lm_loss(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean next-token cross-entropy in nats; targets of -100 carry no loss."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)


def bits_per_byte(loss: Tensor, bytes_per_token: float) -> Tensor:
    return loss / math.log(2) / bytes_per_token


def _no_decay(model: nn.Module) -> set[int]:
    """Vectors and scalars (norm gains and biases), plus what a module lists in its
    ``no_weight_decay`` attribute (AttnRes stores its per-site queries and gains as matrices)."""
    ids = {id(p) for p in model.parameters() if p.ndim < 2}
    for module in model.modules():
        for name in getattr(module, "no_weight_decay", ()):
            ids.add(id(getattr(module, name)))
    return ids


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only: decaying norms, biases, gains or AttnRes queries
    toward zero would change the wiring, not regularize it."""
    skip = _no_decay(model)
    decay = [p for p in model.parameters() if id(p) not in skip]
    rest = [p for p in model.parameters() if id(p) in skip]
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to 1, then cosine decay to ``min_lr_ratio`` at ``max_steps``."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.max_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine


class LanguageModelModule(L.LightningModule):
    def __init__(self, cfg: RunConfig, bytes_per_token: float | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.bytes_per_token = bytes_per_token
        self.model = DeepTransformer(cfg.model)
        self.save_hyperparameters(flatten(cfg))  # dotted names, as MLflow records them

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(idx)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = lm_loss(self.model(x), y)
        # sync_dist: data-parallel ranks log (and judge divergence by) the mean over the global
        # batch, not their own share; on one device it is the value itself
        self.log(Metric.TRAIN_LOSS, loss, prog_bar=True, sync_dist=True)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        loss = lm_loss(self.model(x), y)
        self.log(Metric.VAL_LOSS, loss, prog_bar=True, batch_size=len(x), sync_dist=True)
        if self.bytes_per_token:
            bpb = bits_per_byte(loss, self.bytes_per_token)
            self.log(Metric.VAL_BPB, bpb, batch_size=len(x), sync_dist=True)

    def configure_optimizers(self) -> Any:
        t = self.cfg.train
        fused = {"fused": True} if self.device.type == "cuda" else {}
        optimizer = torch.optim.AdamW(
            param_groups(self.model, t.weight_decay), lr=t.lr, betas=(t.beta1, t.beta2), **fused
        )
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, t))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
