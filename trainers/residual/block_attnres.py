"""Block AttnRes: plain sums inside blocks of sublayers, AttnRes across block summaries
(Kimi Team 2026, arXiv 2603.15031, section 3.2).

The 2*n_layers sublayers split into N = ``attnres_blocks`` contiguous blocks of S = L // N
sublayers, the last block holding the remainder. The k-th sublayer of block n mixes
[s_0 = embedding, s_1, ..., s_{n-1}] plus, for k >= 2, the block's partial sum. N = L is Full
AttnRes; N = 1 is a plain residual with the embedding kept apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.attnres import AttnResSite, AttnResStream
from trainers.residual.base import RESIDUALS, Residual, Stream
from trainers.residual.depth_attention import DepthSources


def block_starts(n_sublayers: int, n_blocks: int) -> frozenset[int]:
    """Global sublayer indices (0-based) that open a new block, the first one excluded."""
    size = n_sublayers // n_blocks
    return frozenset(k * size for k in range(1, n_blocks))


@dataclass
class BlockSources(DepthSources):
    """Completed block summaries (stacked as soon as completed: every site of the next block
    reads them) plus the current block's partial sum."""

    partial: Tensor | None = None
    starts: tuple[int, ...] = ()  # sorted block starts, the first excluded

    def horizon(self, site: int) -> int:
        # The stack changes when the next block opens: phase 1 covers this block's sites.
        later = [s for s in self.starts if s > site]
        return later[0] if later else self.queries.shape[0]

    def close_block(self) -> None:
        if self.partial is not None:
            self.append(self.partial)
            self.partial = None

    def add(self, y: Tensor) -> None:
        self.partial = y if self.partial is None else self.partial + y


class BlockAttnResSite(AttnResSite):
    """Full AttnRes's site with block bookkeeping; the parameters (in the stream) are the same,
    so state dicts are interchangeable."""

    def __init__(self, index: int, starts_block: bool) -> None:
        super().__init__(index)
        self.starts_block = starts_block

    def forward(self, state: BlockSources, branch: nn.Module) -> BlockSources:  # type: ignore[override]
        if self.starts_block:
            state.close_block()
        state.add(branch(state.mix(self.index, state.partial)[0]))
        return state


class BlockAttnResStream(AttnResStream):
    fold_every = 1  # a completed summary is read by every later site: stack it at once

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.starts = tuple(sorted(block_starts(cfg.n_sublayers, cfg.attnres_blocks)))

    def new_state(self) -> BlockSources:
        return BlockSources(self.eps, self.sites.folded(), self.fold_every, starts=self.starts)

    def finish(self, state: BlockSources) -> Tensor:  # type: ignore[override]
        state.close_block()
        return super().finish(state)


@RESIDUALS.register("block_attnres")
class BlockAttnRes(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        starts = block_starts(cfg.n_sublayers, cfg.attnres_blocks)
        return BlockAttnResSite(sublayer, sublayer in starts)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return BlockAttnResStream(cfg)
