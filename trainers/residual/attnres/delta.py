"""Delta AttnRes: AttnRes's depth softmax added to a plain residual stream instead of replacing it
(Luo, Cai & Hu 2026, arXiv 2605.18855; reference code wdlctc/delta-attention-residuals-code,
modes ``delta``, ``delta_block`` and ``full_additive``). ``model.attnres_sources`` picks it.

With h_j the plain residual sum before sublayer j (h_0 the embedding, h_{j+1} = h_j + y_j) and
the sublayers cut into blocks (Full: one sublayer each; Block: ``attnres_blocks`` balanced
blocks), site j >= 1 of block n computes::

    x_j = h_j + sum_i softmax_i( w_j . RMSNorm_{g_j}(s_i) ) s_i,    s_0 = h_0 (the embedding)

over s_0 and one source per completed block m < n: its delta, the sum of its outputs
(``deltas``: h_end - h_start), or the cumulative state h_end after it (``cumulative``). Site 0
has nothing to route yet: x_0 = h_0. There is no output site: the final norm reads h_{2L}.

The choices the paper leaves to its code (docs/variants.md, "Delta AttnRes"):

* "partial" is the plain residual sum h_j, never reset at a block boundary (the code's
  ``partial_block`` in its delta modes);
* the embedding's delta is h_0 - 0 = h_0; it joins the sources after site 0, as in the code;
* a block's delta becomes a source at the next block's first site, and the current block's
  partial sum is no source (the code adds it one sublayer later, after that site's attention,
  and its ``partial_block - blocks[-1]`` is h_end - h_start only for the first two blocks);
* ``cumulative`` keeps the sources' positions and replaces each by its prefix sum, so the two
  kinds differ only in what is routed (the code's ``full_additive`` also drops h_0).

Every Table 4 switch composes (it changes only the weights over the sources). The plain path
(``depth_mixing``) computes it; the buffered two-phase path serves replacement routing only.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.registry import Registry
from trainers.residual import probe
from trainers.residual.attnres.depth_mixing import DepthMixer, PlainSources
from trainers.residual.base import Stream


@dataclass
class DeltaState:
    """The plain residual sum, the routed sources (the embedding and one per completed block)
    and the current block's delta so far."""

    stream: Tensor  # h_j, (B, T, d)
    sources: PlainSources
    block: Tensor | None = None

    def close_block(self, source: BlockSource) -> None:
        if self.block is not None:
            self.sources.append(source(self.stream, self.block))
            self.block = None

    def add(self, y: Tensor) -> None:
        self.stream = self.stream + y
        self.block = y if self.block is None else self.block + y


# What a completed block contributes as a source, from (h_end, the block's delta h_end - h_start).
BlockSource = Callable[[Tensor, Tensor], Tensor]

SOURCE_KINDS: Registry[BlockSource] = Registry("model.attnres_sources")
SOURCE_KINDS.register("deltas")(lambda h_end, delta: delta)
SOURCE_KINDS.register("cumulative")(lambda h_end, delta: h_end)


def block_starts(cfg: ModelConfig) -> frozenset[int]:
    """Global sublayer indices that open a block, sublayer 0 excluded: every one for Full (its
    ``attnres_block_sizes`` are a block per sublayer)."""
    return frozenset(itertools.accumulate(cfg.attnres_block_sizes[:-1]))


class DeltaSite(nn.Module):
    """x_j = h_j + the routed sources (nothing at site 0); the branch's output joins h and the
    current block. Its query is row j - 1 of the stream's mixer (site 0 has none)."""

    def __init__(self, index: int, starts_block: bool, source: BlockSource) -> None:
        super().__init__()
        self.index, self.starts_block, self.source = index, starts_block, source

    def forward(self, state: DeltaState, branch: nn.Module) -> DeltaState:
        if self.starts_block:
            state.close_block(self.source)
        x = state.stream
        if self.index > 0:
            routed, weights = state.sources.mix(self.index - 1)
            probe.report(state.sources.kind, self.index, weights)
            x = x + routed
        state.add(branch(x))
        return state


class DeltaStream(Stream):
    """Owns the mixer (one row per routing site, 1..2L - 1, flat under AttnRes's names); starts
    h and the sources with the embedding; hands the final norm h_{2L}."""

    fast = False  # always the plain path (AttnResStream's flag, which the tests read)

    def mixing_path(self, device_type: str, dtype: str, compiled: bool) -> tuple[str, str]:
        return "plain", "Delta AttnRes's mixer (depth_mixing)"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        n_sources = len(block_starts(cfg)) + 1  # the embedding and every block but the last
        self.sites = DepthMixer(cfg, cfg.n_sublayers - 1, n_sources)
        self.sites.probe_site = 1  # row j - 1 is site j's (the probe names sites as AttnRes)

    def begin(self, emb: Tensor) -> DeltaState:
        sources = PlainSources(self.sites)
        sources.append(emb)  # h_0 - 0: the embedding's delta, and its cumulative state
        return DeltaState(emb, sources)

    def finish(self, state: DeltaState) -> Tensor:
        return state.stream


def site(cfg: ModelConfig, sublayer: int) -> DeltaSite:
    """The site before global sublayer ``sublayer`` of Full or Block Delta AttnRes."""
    return DeltaSite(sublayer, sublayer in block_starts(cfg), SOURCE_KINDS.get(cfg.attnres_sources))
