"""A thin LightningModule around ``DeepTransformer``: loss, optimizer, schedule, logging."""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from record.schema import Metric, optim_metric
from trainers import parametrization as par
from trainers.config import RunConfig, TrainConfig, flatten
from trainers.layers import MLP, Attention
from trainers.model import DeepTransformer
from trainers.norms import NORMS


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


def _group_of(model: DeepTransformer) -> dict[int, str]:
    """Each parameter's parametrization group (``trainers.parametrization.GROUPS``) by id: the
    embeddings and the head; the sublayers' matrices and biases; the norms' gains and biases
    (the final norm apart); and the wiring's own, split as sp's weight decay splits them."""
    group: dict[int, str] = {}
    for module in model.modules():
        if isinstance(module, (Attention, MLP)):
            for linear in (m for m in module.modules() if isinstance(m, nn.Linear)):
                group[id(linear.weight)] = par.HIDDEN_WEIGHT
                if linear.bias is not None:
                    group[id(linear.bias)] = par.HIDDEN_BIAS
        if isinstance(module, tuple(NORMS.get(n) for n in NORMS.names())):
            for p in module.parameters():
                group[id(p)] = par.HIDDEN_NORM
    no_decay = _no_decay(model)
    for p in model.parameters():
        wiring = par.WIRING_GAIN if id(p) in no_decay else par.WIRING_WEIGHT
        group.setdefault(id(p), wiring)
    for p in model.final_norm.parameters():
        group[id(p)] = par.OUTPUT_NORM
    embeddings = (model.tok_emb, model.pos_emb, model.head)
    for p in (p for m in embeddings if m is not None for p in m.parameters()):
        group[id(p)] = par.EMBEDDING
    return group


def parametrized_groups(model: DeepTransformer, t: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups under a parametrization other than sp: ``parametrization.group_rules``'
    multipliers times ``train.lr``, ``train.weight_decay`` and ``ADAM_EPS``, one group per
    rule (empty ones left out), each named."""
    rules = par.group_rules(model.cfg)
    group = _group_of(model)
    out = []
    for name, rule in rules.items():
        params = [p for p in model.parameters() if group[id(p)] == name]
        if params:
            out.append(
                {
                    "params": params,
                    "name": name,
                    "lr": t.lr * rule.lr,
                    "weight_decay": t.weight_decay * rule.weight_decay,
                    "eps": par.ADAM_EPS * rule.eps,
                }
            )
    return out


def optimizer_groups(model: DeepTransformer, t: TrainConfig) -> list[dict[str, Any]]:
    """The one rule for AdamW's parameter groups: sp's two (decayed or not, at ``train.lr``;
    today's, so its optimizer state is unchanged) or the parametrization's."""
    if model.cfg.parametrization == "sp":
        return param_groups(model, t.weight_decay)
    return parametrized_groups(model, t)


def group_record(groups: list[dict[str, Any]], t: TrainConfig) -> dict[str, float]:
    """What a parametrized run records of its groups (``record.schema.optim_metric``): each
    group's tensors, elements, and lr / weight-decay / eps multipliers."""
    out: dict[str, float] = {}
    for g in groups:
        name, params = g["name"], g["params"]
        out[optim_metric(name, "tensors")] = float(len(params))
        out[optim_metric(name, "params")] = float(sum(p.numel() for p in params))
        out[optim_metric(name, "lr_mult")] = g["lr"] / t.lr
        wd = g["weight_decay"] / t.weight_decay if t.weight_decay else 0.0
        out[optim_metric(name, "wd_mult")] = wd
        out[optim_metric(name, "eps_mult")] = g["eps"] / par.ADAM_EPS
    return out


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

    def on_train_start(self) -> None:
        """A parametrized run records its optimizer groups once (sp's two are the rule)."""
        if self.cfg.model.parametrization == "sp" or self.logger is None:
            return
        groups = self.optimizers().optimizer.param_groups  # type: ignore[union-attr]
        self.logger.log_metrics(group_record(groups, self.cfg.train), step=0)

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
        groups = optimizer_groups(self.model, t)
        optimizer = torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), **fused)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, t))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}
