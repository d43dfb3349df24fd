"""ReZero: x <- x + alpha * f(x), alpha a learned scalar initialized to zero, so the network is
the identity at init (Bachlechner et al. 2020, arXiv 2003.04887). Two forms:

* ``rezero``: one alpha per sublayer. The paper's Eq. 1, x_{i+1} = x_i + alpha_i F(x_i), has one
  alpha per residual update, and each sublayer of a Transformer block is one update;
* ``rezero_shared``: one alpha per block, the same scalar on the attention and the MLP output, as
  the paper's official code does (majumderb/rezero, ``RZTXEncoderLayer.resweight``).
"""

from __future__ import annotations

from typing import cast

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


@RESIDUALS.register("rezero_shared")
class ReZeroShared(ReZero):
    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        """Ties each block's MLP alpha to its attention alpha: one parameter, L in all. Like the
        tied embedding and head, the state dict lists it under both sites' names."""
        for block in cast(nn.ModuleList, model.blocks):
            attn, mlp = cast(ReZeroSite, block.attn_site), cast(ReZeroSite, block.mlp_site)
            mlp.alpha = attn.alpha
