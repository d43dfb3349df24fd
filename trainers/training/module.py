"""A thin LightningModule around ``DeepTransformer``: loss, optimizer, schedule, logging."""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any

import lightning as L
import torch
from torch import Tensor

from record.schema import Metric
from trainers.config import RunConfig, TrainConfig, flatten, micro_batch_of
from trainers.model.checkpointing import enable_checkpointing
from trainers.model.loss import lm_loss
from trainers.model.optim_groups import group_record, optimizer_groups, param_groups
from trainers.model.transformer import DeepTransformer
from trainers.training.accumulate import LossTotal, accumulate_gradients, loss_total
from trainers.upgrade import CHECKPOINT_VERSION, VERSION_KEY, upgrade_checkpoint

__all__ = ["LanguageModelModule", "group_record", "lm_loss", "optimizer_groups", "param_groups"]


def bits_per_byte(loss: Tensor, bytes_per_token: float) -> Tensor:
    return loss / math.log(2) / bytes_per_token


def lr_factor(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to 1, then cosine decay to ``min_lr_ratio`` at ``max_steps``."""
    if step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    span = max(1, cfg.max_steps - cfg.warmup_steps)
    progress = min(1.0, (step - cfg.warmup_steps) / span)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * cosine


class LanguageModelModule(L.LightningModule):
    """One optimizer step per training batch (this rank's share of the global batch), taken
    by hand: the share is accumulated in ``train.micro_batch`` micro-batches, each one's summed
    loss divided by the step's count of counted targets over every rank, so that the gradient
    is that of the global batch's token-weighted mean loss (``trainers.training.accumulate``);
    then the gradient norm is clipped, the optimizer and the schedule step. Every count of steps
    (Lightning's ``global_step``, validation, logging, callbacks) is one of optimizer steps.

    Validation is token-weighted the same way: one mean over every counted target of the pass,
    on every rank, logged once at the pass's end."""

    def __init__(self, cfg: RunConfig, bytes_per_token: float | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.bytes_per_token = bytes_per_token
        self.model = DeepTransformer(cfg.model)
        enable_checkpointing(self.model, cfg.train.checkpointing)
        self.automatic_optimization = False  # training_step accumulates and steps itself
        self.compiled = False  # compile_model() sets it
        self.val_total: LossTotal | None = None  # the validation pass so far
        self.save_hyperparameters(flatten(cfg))  # dotted names, as MLflow records them

    def forward(self, idx: Tensor) -> Tensor:
        return self.model(idx)

    def compile_model(self) -> None:
        """``torch.compile`` the model in place (``nn.Module.compile``: checkpoints keep their
        keys); its graph is built at the first training step."""
        self.model.compile()
        self.compiled = True

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Every checkpoint names the shape it is written in (``trainers.upgrade``)."""
        checkpoint[VERSION_KEY] = CHECKPOINT_VERSION

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The checkpoint in the current shape (``trainers.upgrade``: an older one's loop
        counts and weight names), in place: Lightning loads the weights and the loops from this
        dict after this hook."""
        checkpoint.update(upgrade_checkpoint(checkpoint))

    def on_train_start(self) -> None:
        """A parametrized run records its optimizer groups once (sp's two are the rule)."""
        if self.cfg.model.parametrization == "sp" or self.logger is None:
            return
        groups = self.optimizers().optimizer.param_groups  # type: ignore[union-attr]
        self.logger.log_metrics(group_record(groups, self.cfg.train), step=0)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        optimizer: Any = self.optimizers()
        optimizer.zero_grad()
        loss = accumulate_gradients(
            self.model,
            *batch,
            micro_batch_of(self.cfg.train),
            self.manual_backward,
            # data-parallel: gradients are averaged over ranks once, at the last micro-batch
            lambda last: nullcontext() if last else optimizer.toggle_model(sync_grad=False),
            ranks=self.trainer.world_size,
        )
        self._step(optimizer)
        # Data-parallel, ``loss`` is this rank's part of the global batch's mean (its summed
        # loss over the global count, times the ranks): sync_dist's mean over the ranks is that
        # mean, which every rank logs and judges divergence by (the guard averages the returned
        # loss too); on one device it is the value itself.
        self.log(Metric.TRAIN_LOSS, loss, prog_bar=True, sync_dist=True)
        return loss

    def _step(self, optimizer: Any) -> None:
        """Clip the accumulated gradient's norm, step the optimizer, then the schedule."""
        if self.cfg.train.grad_clip:
            clip = self.cfg.train.grad_clip
            self.clip_gradients(optimizer, gradient_clip_val=clip, gradient_clip_algorithm="norm")
        optimizer.step()
        self.lr_schedulers().step()  # type: ignore[union-attr]

    def on_validation_model_eval(self) -> None:
        """Eval mode for validation, except where it changes nothing but a compiled graph's
        guards: without dropout the model computes the same function in either mode, so a
        compiled one stays in training mode and validation reuses the training graph instead of
        compiling another."""
        if not (self.compiled and self.cfg.model.dropout == 0):
            super().on_validation_model_eval()

    def on_validation_epoch_start(self) -> None:
        self.val_total = None

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        """Add the batch's summed loss and count to the pass's: a mean of batch (or
        micro-batch) means would weight each target by how few its batch holds."""
        # A compiled graph is guarded on the grad mode, so validating under Lightning's no_grad
        # would compile a second graph. With gradients on, validation runs the training graph;
        # the autograd graph it builds is freed with each loss, and holds no more than a
        # training micro-batch's.
        with torch.enable_grad() if self.compiled else nullcontext():
            # in micro-batches, as training holds them: a validation batch is a training batch's size
            total = loss_total(self.model, *batch, micro_batch_of(self.cfg.train))
        self.val_total = total if self.val_total is None else self.val_total + total

    def on_validation_epoch_end(self) -> None:
        """Log the pass's mean over every counted target of every rank (one all-reduce each of
        the sum and the count where data-parallel). Every rank then holds the same value:
        sync_dist with max hands it back unchanged (a mean of equal floats could round), and
        tells Lightning the value stands for all ranks."""
        if self.val_total is None:  # no validation batch
            return
        loss = self.val_total.mean(self.trainer.world_size)
        self.log(Metric.VAL_LOSS, loss, prog_bar=True, sync_dist=True, reduce_fx="max")
        if self.bytes_per_token:
            bpb = bits_per_byte(loss, self.bytes_per_token)
            self.log(Metric.VAL_BPB, bpb, sync_dist=True, reduce_fx="max")

    def configure_optimizers(self) -> Any:
        t = self.cfg.train
        fused = {"fused": True} if self.device.type == "cuda" else {}
        groups = optimizer_groups(self.model, t)
        optimizer = torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), **fused)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, t))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
