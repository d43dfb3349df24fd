"""DeepNorm: x <- LN(alpha * x + f(x)) with alpha = (2M)^(1/4), and Xavier-normal init with gain
beta = (8M)^(-1/4) on the value, attention-output and MLP projections, M decoder blocks
(Wang et al. 2022, "DeepNet", arXiv 2203.00555; the decoder-only constants)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.model.layers import MLP, Attention  # the sublayers whose projections the paper names
from trainers.residual.base import RESIDUALS, Residual


def deepnorm_alpha(n_layers: int) -> float:
    return (2 * n_layers) ** 0.25


def deepnorm_beta(n_layers: int) -> float:
    return (8 * n_layers) ** -0.25


def xavier_normal_(weight: Tensor, gain: float) -> None:
    """Xavier-normal for one (fan_out, fan_in) matrix or a slice of a fused one."""
    fan_out, fan_in = weight.shape
    with torch.no_grad():
        weight.normal_(0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


class DeepNormSite(nn.Module):
    def __init__(self, alpha: float, post_norm: nn.Module) -> None:
        super().__init__()
        self.alpha = alpha  # a constant of the depth, not a parameter
        self.post_norm = post_norm

    def forward(self, x: Tensor, branch: nn.Module) -> Tensor:
        return self.post_norm(self.alpha * x + branch(x))


@RESIDUALS.register("deepnorm")
class DeepNorm(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return DeepNormSite(deepnorm_alpha(cfg.n_layers), post_norm)

    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        """Query and key projections Xavier with gain 1; value, attention output and both MLP
        projections Xavier with gain beta."""
        beta = deepnorm_beta(cfg.n_layers)
        d = cfg.d_model
        for module in model.modules():
            if isinstance(module, Attention):
                q, k, v = module.qkv.weight.split(d, dim=0)
                xavier_normal_(q, 1.0)
                xavier_normal_(k, 1.0)
                xavier_normal_(v, beta)
                xavier_normal_(module.proj.weight, beta)
            elif isinstance(module, MLP):
                xavier_normal_(module.fc_in.weight, beta)
                xavier_normal_(module.fc_out.weight, beta)
