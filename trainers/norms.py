"""Normalization layers, one uniform signature ``Norm(d, eps)``, registered by ``model.norm``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trainers.registry import Registry

NORMS: Registry[type[nn.Module]] = Registry("model.norm")


@NORMS.register("layernorm")
class LayerNorm(nn.Module):
    """LayerNorm with a gain and a bias (Ba et al. 2016, arXiv 1607.06450)."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


@NORMS.register("rmsnorm")
class RMSNorm(nn.Module):
    """RMSNorm with a gain, eps inside the root (Zhang & Sennrich 2019, arXiv 1910.07467)."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def build_norm(name: str, d: int, eps: float) -> nn.Module:
    return NORMS.get(name)(d, eps)
