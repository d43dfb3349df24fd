"""LayerScale (Touvron et al. 2021, "Going deeper with Image Transformers", CaiT, arXiv
2103.17239, §2 and eq. 3): each residual branch's output multiplied by a learned per-channel
vector, the diagonal of a matrix,

    x'_l   = x_l  + diag(lambda_{l,1}, ..., lambda_{l,d}) x SA(eta(x_l))
    x_{l+1} = x'_l + diag(lambda'_{l,1}, ..., lambda'_{l,d}) x FFN(eta(x'_l))

with eta the (pre-)norm: one d-wide vector per sublayer, 2L in all, each initialized to the same
small epsilon. The paper fixes epsilon by depth (the number of blocks, ``n_layers``): 0.1 up to
depth 18, 1e-5 at depth 24 and 1e-6 beyond. It leaves depths 19 to 23 open; here they take 1e-5,
the next rule up (``layerscale_epsilon``), so the scale never grows with depth.

The vectors are 1-D, so AdamW does not decay them (``trainers.model.optim_groups``), as the CaiT
code's optimizer, which decays no 1-D parameter, does not either.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.base import RESIDUALS, Residual

# (deepest n_layers, epsilon), in order: CaiT §2, "Initialization of the diagonal weights".
EPSILONS = ((18, 0.1), (24, 1e-5))
DEEPER = 1e-6


def layerscale_epsilon(n_layers: int) -> float:
    """The diagonal's initial value at depth ``n_layers``."""
    return next((eps for deepest, eps in EPSILONS if n_layers <= deepest), DEEPER)


class LayerScaleSite(nn.Module):
    """x <- post_norm(x + lambda * f(x)), lambda a learned vector of width d (its diagonal)."""

    def __init__(self, d_model: int, epsilon: float, post_norm: nn.Module) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((d_model,), epsilon))
        self.post_norm = post_norm  # empty for LayerScale's placement (pre)

    def forward(self, x: Tensor, branch: nn.Module) -> Tensor:
        return self.post_norm(x + self.scale * branch(x))  # (B, T, d) * (d,)


@RESIDUALS.register("layerscale")
class LayerScale(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return LayerScaleSite(cfg.d_model, layerscale_epsilon(cfg.n_layers), post_norm)
