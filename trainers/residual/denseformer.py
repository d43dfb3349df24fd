"""DenseFormer: after block i, a depth-weighted average (DWA) of the embedding and every block
output so far feeds the next block, Y_i = sum_{j<=i} alpha_{i,j} X_j (X_0 the embedding, X_j the
output of block j, 1-based); the weights start as the identity, so at init it is the plain
Transformer (Pagliardini et al. 2024, arXiv 2402.02622).

The paper's k x p DenseFormer (§3.2, §3.3) sparsifies it with a dilation k (``dense_dilation``)
and a period p (``dense_period``): a DWA only after the blocks i with i = 0 mod p, reading only
{X_j | j <= i, j = i mod k} (``dwa_sources``); a block without one passes its output X_i on
unchanged. DWA i has floor(i/k) + 1 weights, alpha_{i,i} = 1 and the rest 0 at init, as in the
authors' ``DWAModules``. 1 x 1 is the full DenseFormer, L(L + 3)/2 weights.
"""

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


def dwa_blocks(n_layers: int, period: int) -> list[int]:
    """The 1-based blocks i followed by a DWA: i = 0 mod p."""
    return [i for i in range(1, n_layers + 1) if i % period == 0]


def dwa_sources(i: int, dilation: int) -> list[int]:
    """The outputs X_j the DWA after block i averages: j <= i, j = i mod k, oldest first."""
    return list(range(i % dilation, i + 1, dilation))


def _latest_only(n: int) -> nn.Parameter:
    """Weights (0, ..., 0, 1): the average passes the newest block output through unchanged."""
    w = torch.zeros(n)
    w[-1] = 1.0
    return nn.Parameter(w)


class DenseFormerStream(Stream):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.dilation = cfg.dense_dilation
        blocks = dwa_blocks(cfg.n_layers, cfg.dense_period)
        self.slot = {i - 1: n for n, i in enumerate(blocks)}  # 0-based block -> its weights
        # Free scalars (not normalized), one per source: L(L + 3)/2 in all when k = p = 1.
        self.weights = nn.ParameterList(
            _latest_only(len(dwa_sources(i, self.dilation))) for i in blocks
        )

    def begin(self, emb: Tensor) -> DenseState:
        return DenseState(emb, [emb])

    def after_block(self, state: DenseState, block: int) -> DenseState:
        state.outputs.append(state.x)
        if block not in self.slot:  # no DWA after this block: X_i goes on as it is
            return state
        i, w = block + 1, self.weights[self.slot[block]]
        sources = state.outputs[i % self.dilation :: self.dilation]  # dwa_sources(i, k)
        stacked = torch.stack(sources, dim=-2)  # (B, T, floor(i/k) + 1, d)
        state.x = w @ stacked  # (B, T, d)
        probe.report("dwa", block, lambda: self._dense_row(i, w), token_dims=0)
        return state

    def _dense_row(self, i: int, w: Tensor) -> Tensor:
        """Row i of the paper's alpha matrix (length i + 1): zero at the sources it skips."""
        row = w.new_zeros(i + 1)
        row[i % self.dilation :: self.dilation] = w
        return row

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
