"""Block AttnRes: plain sums inside blocks of sublayers, AttnRes across block summaries
(Kimi Team 2026, arXiv 2603.15031, section 3.2).

The 2*n_layers sublayers split into N = ``attnres_blocks`` contiguous blocks of S = L // N
sublayers, the last block holding the remainder. The k-th sublayer of block n mixes
[s_0 = embedding, s_1, ..., s_{n-1}] plus, for k >= 2, the block's partial sum. N = L is Full
AttnRes; N = 1 is a plain residual with the embedding kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.attnres import AttnResSite, AttnResStream, Sources
from trainers.residual.base import RESIDUALS, Residual, Stream
from trainers.residual.depth_attention import unit_rms


def block_starts(n_sublayers: int, n_blocks: int) -> frozenset[int]:
    """Global sublayer indices (0-based) that open a new block, the first one excluded."""
    size = n_sublayers // n_blocks
    return frozenset(k * size for k in range(1, n_blocks))


@dataclass
class BlockSources(Sources):
    """Completed block summaries (with keys) plus the current block's partial sum."""

    partial: Tensor | None = field(default=None)

    def close_block(self) -> None:
        if self.partial is not None:
            self.append(self.partial)
            self.partial = None

    def add(self, y: Tensor) -> None:
        self.partial = y if self.partial is None else self.partial + y

    def sources(self) -> tuple[list[Tensor], list[Tensor]]:
        if self.partial is None:
            return self.values, self.keys
        return [*self.values, self.partial], [*self.keys, unit_rms(self.partial, self.eps)]


class BlockAttnResSite(AttnResSite):
    """Same parameters as Full AttnRes's site (so state dicts are interchangeable)."""

    def __init__(self, d: int, starts_block: bool) -> None:
        super().__init__(d)
        self.starts_block = starts_block

    def forward(self, state: BlockSources, branch: nn.Module) -> BlockSources:  # type: ignore[override]
        if self.starts_block:
            state.close_block()
        state.add(branch(self.mix(*state.sources())))
        return state


class BlockAttnResStream(AttnResStream):
    state_type = BlockSources

    def finish(self, state: BlockSources) -> Tensor:  # type: ignore[override]
        state.close_block()
        return super().finish(state)


@RESIDUALS.register("block_attnres")
class BlockAttnRes(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        starts = block_starts(cfg.n_sublayers, cfg.attnres_blocks)
        return BlockAttnResSite(cfg.d_model, sublayer in starts)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return BlockAttnResStream(cfg)
