"""ReZero: x <- x + alpha * f(x), one scalar alpha per sublayer initialized to zero, so the
network is the identity at init (Bachlechner et al. 2020, arXiv 2003.04887)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.base import RESIDUALS, Residual


class ReZeroSite(nn.Module):
    def __init__(self, post_norm: nn.Module) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(()))
        self.post_norm = post_norm  # empty for ReZero's placements (none, pre)

    def forward(self, x: Tensor, branch: nn.Module) -> Tensor:
        return self.post_norm(x + self.alpha * branch(x))


@RESIDUALS.register("rezero")
class ReZero(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return ReZeroSite(post_norm)
