"""Normalization layers, one uniform signature ``Norm(d, eps)``, registered by ``model.norm``;
and the depth scalings of the input norm, registered by ``model.norm_scaling``."""

from __future__ import annotations

import math
from collections.abc import Callable

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


# What multiplies the input norm's output in Transformer block l (1-based), by model.norm_scaling.
NORM_SCALINGS: Registry[Callable[[int], float]] = Registry("model.norm_scaling")
NORM_SCALINGS.register("none")(lambda block: 1.0)
# LayerNorm Scaling, "The Curse of Depth in LLMs" (Sun et al. 2025, arXiv 2502.05795): both
# sublayers of block l see N(x)/sqrt(l), which keeps the stream's variance growth polynomial.
NORM_SCALINGS.register("lns")(lambda block: 1.0 / math.sqrt(block))
