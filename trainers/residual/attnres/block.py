"""Block AttnRes: plain sums inside blocks of sublayers, AttnRes across block summaries
(Kimi Team 2026, arXiv 2603.15031, section 3.2).

The L = 2*n_layers sublayers split into N = ``attnres_blocks`` contiguous, balanced blocks
(``ModelConfig.attnres_block_sizes``: S = L/N each when N divides L, else sizes differing by one,
the longer first). The k-th sublayer of block n mixes [s_0 = embedding, s_1, ..., s_{n-1}] plus,
for k >= 2, the block's partial sum. N = L is Full AttnRes; N = 1 is a plain residual with the
embedding kept apart.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from torch import Tensor, nn

from trainers.config import ModelConfig, balanced_partition
from trainers.residual.attnres import delta as delta_attnres
from trainers.residual.attnres import fused as fused_attnres
from trainers.residual.attnres.depth_attention import Schedule, Sources, mix
from trainers.residual.attnres.depth_mixing import draw_queries
from trainers.residual.attnres.full import AttnResSite, AttnResStream
from trainers.residual.base import RESIDUALS, Residual, Stream


def block_starts(n_sublayers: int, n_blocks: int) -> frozenset[int]:
    """Global sublayer indices (0-based) that open a new block, the first one excluded."""
    sizes = balanced_partition(n_sublayers, n_blocks)
    return frozenset(itertools.accumulate(sizes[:-1]))


def block_spans(cfg: ModelConfig) -> tuple[int, ...]:
    """How many sources each site mixes: in block b the embedding and b summaries, plus the
    partial sum from the block's second sublayer on; at the output all N + 1."""
    sizes = balanced_partition(cfg.n_sublayers, cfg.attnres_blocks)
    inside = (b + 1 + (k > 0) for b, size in enumerate(sizes) for k in range(size))
    return (*inside, len(sizes) + 1)


@dataclass
class BlockState:
    """Completed block summaries (stored as soon as completed: every site of the next block reads
    them) plus the current block's partial sum, which is mixed but never stored."""

    summaries: Sources
    partial: Tensor | None = None

    def close_block(self) -> None:
        if self.partial is not None:
            self.summaries.append(self.partial)
            self.partial = None

    def add(self, y: Tensor) -> None:
        self.partial = y if self.partial is None else self.partial + y

    def sources(self) -> list[Tensor]:
        partial = [] if self.partial is None else [self.partial]
        return self.summaries.sources() + partial


class BlockAttnResSite(AttnResSite):
    """Full AttnRes's site with block bookkeeping; the parameters (in the stream) are the same,
    so state dicts are interchangeable."""

    def __init__(self, index: int, starts_block: bool) -> None:
        super().__init__(index)
        self.starts_block = starts_block

    def forward(self, state: BlockState, branch: nn.Module) -> BlockState:  # type: ignore[override]
        if self.starts_block:
            state.close_block()
        state.add(branch(mix(state.summaries, self.index, state.partial)))
        return state


class BlockAttnResStream(AttnResStream):
    def __init__(self, cfg: ModelConfig) -> None:
        starts = block_starts(cfg.n_sublayers, cfg.attnres_blocks)
        # Phase 1 covers one block's sites: the summaries change only when a block opens.
        schedule = Schedule(tuple(sorted({0, *starts})), cfg.n_sublayers + 1)
        # The embedding and every block's summary; a site mixes at most that many sources (the
        # summaries before its block and its partial sum, or, at the output, all of them).
        super().__init__(cfg, schedule, cfg.attnres_blocks + 1, block_spans(cfg))

    def fused_sources(self) -> fused_attnres.FusedSources:
        return fused_attnres.FusedSources(
            self.eps, self.sites.folded(), self.schedule, self.kernels
        )

    def begin(self, emb: Tensor) -> BlockState:  # type: ignore[override]
        return BlockState(super().begin(emb))

    def finish(self, state: BlockState) -> Tensor:  # type: ignore[override]
        state.close_block()
        return super().finish(state.summaries)


@RESIDUALS.register("block_attnres")
class BlockAttnRes(Residual):
    """Replacement routing over block summaries, or Delta Block (``delta_attnres``)."""

    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        draw_queries(model)

    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        if cfg.attnres_sources != "outputs":
            return delta_attnres.site(cfg, sublayer)
        starts = block_starts(cfg.n_sublayers, cfg.attnres_blocks)
        return BlockAttnResSite(sublayer, sublayer in starts)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        if cfg.attnres_sources != "outputs":
            return delta_attnres.DeltaStream(cfg)
        return BlockAttnResStream(cfg)
