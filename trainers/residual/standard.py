"""The plain residual: x <- post_norm(x + f(x)) (He et al. 2016; Vaswani et al. 2017)."""

from __future__ import annotations

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.base import RESIDUALS, Residual


class AddSite(nn.Module):
    """Adds the branch output to the stream with weight one, then fills the post-main slot."""

    def __init__(self, post_norm: nn.Module) -> None:
        super().__init__()
        self.post_norm = post_norm

    def forward(self, x: Tensor, branch: nn.Module) -> Tensor:
        return self.post_norm(x + branch(x))


@RESIDUALS.register("standard")
class Standard(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return AddSite(post_norm)
