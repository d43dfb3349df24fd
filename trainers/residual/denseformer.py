"""DenseFormer: after block i, a depth-weighted average of the embedding and every block output
so far feeds the next block, Y_i = sum_{j<=i+1} alpha_{i,j} X_j; the weights start as the
identity, so at init it is the plain Transformer (Pagliardini et al. 2024, arXiv 2402.02622)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual import probe
from trainers.residual.base import RESIDUALS, Residual, Stream
from trainers.residual.standard import AddSite


@dataclass
class DenseState:
    x: Tensor  # what the next sublayer's site adds to
    outputs: list[Tensor] = field(default_factory=list)  # X_0 = embedding, X_1, ...


class DenseSite(AddSite):
    """The plain residual site, on the state's current stream."""

    def forward(self, state: DenseState, branch: nn.Module) -> DenseState:  # type: ignore[override]
        state.x = super().forward(state.x, branch)
        return state


def _latest_only(n: int) -> nn.Parameter:
    """Weights (0, ..., 0, 1): the average passes the newest block output through unchanged."""
    w = torch.zeros(n)
    w[-1] = 1.0
    return nn.Parameter(w)


class DenseFormerStream(Stream):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        # Block i averages i + 2 sources: L(L+3)/2 scalars in all, free (not normalized).
        self.weights = nn.ParameterList(_latest_only(i + 2) for i in range(cfg.n_layers))

    def begin(self, emb: Tensor) -> DenseState:
        return DenseState(emb, [emb])

    def after_block(self, state: DenseState, block: int) -> DenseState:
        state.outputs.append(state.x)
        stacked = torch.stack(state.outputs, dim=-2)  # (B, T, i + 2, d)
        state.x = self.weights[block] @ stacked  # (B, T, d)
        probe.report("dwa", block, lambda: self.weights[block], token_dims=0)
        return state

    def finish(self, state: DenseState) -> Tensor:
        return state.x


@RESIDUALS.register("denseformer")
class DenseFormer(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return DenseSite(post_norm)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return DenseFormerStream(cfg)
