"""Full AttnRes: every sublayer's input is a learned softmax over the embedding and all earlier
sublayer outputs (Kimi Team 2026, arXiv 2603.15031, section 3.1)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.attnres import delta as delta_attnres
from trainers.residual.attnres import fused as fused_attnres
from trainers.residual.attnres.depth_attention import (
    Schedule,
    Sources,
    StackedSources,
    mix,
    window_hidden,
)
from trainers.residual.attnres.depth_buffer import BufferedSources
from trainers.residual.attnres.depth_mixing import DepthMixer, PlainSources, draw_queries
from trainers.residual.base import RESIDUALS, Residual, Stream

# Sites per phase-1 group. Any value computes the same function; with the buffered path 8 and 12
# tied for fastest among 4, 8, 12, 16, 24 at 32 blocks on a CPU.
GROUP_SIZE = 8
# Why a stream pinned on or off the fused kernels (train.depth_path) takes its path.
PINNED = {True: "pinned (train.depth_path=fused)", False: "pinned off (train.depth_path=torch)"}


class AttnResSite(nn.Module):
    """x_j = sum_i a_{j,i} y_i over all earlier outputs; y_j = branch(x_j) joins the sources.
    The site's query and gain live in the stream's ``sites`` (row ``index``), so that
    every source meets all queries in one product."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def forward(self, state: Sources, branch: nn.Module) -> Sources:
        state.append(branch(mix(state, self.index)))
        return state


class AttnResStream(Stream):
    """Owns every site's parameters; starts the sources with the embedding; the output site
    (the last row) mixes all sources before the final norm.

    The parameters are one ``DepthMixer`` (flat, the same names on either path). Where its
    ``buffered`` says so (the paper's design, and raw keys, a window and sigmoid gates) the sources
    are the fast two-phase path over them; the other Table 4 switches take the plain path
    (``depth_mixing``), the same function at the defaults. ``spans`` is how many sources each
    site mixes (a window's mask; Full: site j reads j + 1)."""

    def __init__(
        self,
        cfg: ModelConfig,
        schedule: Schedule | None = None,
        capacity: int = 0,
        spans: tuple[int, ...] = (),
    ) -> None:
        super().__init__()
        self.eps = cfg.norm_eps
        self.out_index = cfg.n_sublayers
        n_sites = cfg.n_sublayers + 1
        self.schedule = schedule or Schedule.every(GROUP_SIZE, n_sites)
        # The sources one forward stores: the embedding and every sublayer output (Full AttnRes).
        self.capacity = capacity or n_sites
        self.sites = DepthMixer(cfg, n_sites, self.capacity)
        self.fast = self.sites.buffered  # the two-phase path (the tests may turn it off)
        spans = spans or tuple(range(1, n_sites + 1))
        self.hidden = window_hidden(spans, cfg.attnres_window, self.capacity)
        self.cfg = cfg
        # The fused kernels (``fused``): None follows ``fused.fused_applies`` on each forward's
        # device and dtype; the tests set True to run them where the rule would not (Triton's
        # interpreter on a CPU) or False to keep them off (train.depth_path pins either).
        self.fused: bool | None = None
        self.kernels: fused_attnres.Kernels | None = None  # None: the package's

    def use_fused(self, emb: Tensor) -> bool:
        """Whether this forward mixes on the fused kernels (never while being compiled)."""
        if not self.fast or torch.compiler.is_compiling():
            return False
        return self._fused_on(emb.device.type, fused_attnres.mixing_dtype(emb))[0]

    def _fused_on(self, device_type: str, dtype: str) -> tuple[bool, str]:
        """Whether an eager forward there takes the kernels, and why: as pinned, else the rule."""
        if self.fused is not None:
            return self.fused, PINNED[self.fused]
        verdict = fused_attnres.dispatch(self.cfg, device_type, dtype)
        return verdict.fused, verdict.reason

    def fused_sources(self) -> fused_attnres.FusedSources:
        """Full AttnRes's sources on the kernels; Block AttnRes has its own."""
        queries = self.sites.folded()
        return fused_attnres.FullFusedSources(self.eps, queries, self.schedule, self.kernels)

    def new_sources(self) -> Sources:
        if not self.fast:
            return PlainSources(self.sites)
        queries, eps, sigmoid = self.sites.folded(), self.sites.key_eps, self.sites.sigmoid
        hidden = None if self.hidden is None else self.hidden.to(queries.device)
        if torch.compiler.is_compiling():  # the hand-written backward is opaque to the tracer
            return StackedSources(eps, queries, self.schedule, hidden, sigmoid)
        return BufferedSources(eps, queries, self.schedule, self.capacity, hidden, sigmoid)

    def mixing_path(self, device_type: str, dtype: str, compiled: bool) -> tuple[str, str]:
        if not self.fast:
            return "plain", "the switches' direct computation (depth_mixing)"
        if compiled:
            return "stacked", "compiled: the plain-autograd two-phase path, traced"
        fused, why = self._fused_on(device_type, dtype)
        if fused:
            return "fused", why
        return "buffered", f"eager: the two-phase path; not fused: {why}"

    def begin(self, emb: Tensor) -> Sources:
        state = self.fused_sources() if self.use_fused(emb) else self.new_sources()
        state.append(emb)
        return state

    def finish(self, state: Sources) -> Tensor:
        return mix(state, self.out_index)


@RESIDUALS.register("attnres")
class AttnRes(Residual):
    """The paper's replacement routing over outputs, or Delta AttnRes's additive routing
    (``attnres_sources`` deltas or cumulative: ``delta_attnres``)."""

    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        draw_queries(model)

    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        if cfg.attnres_sources != "outputs":
            return delta_attnres.site(cfg, sublayer)
        return AttnResSite(sublayer)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        if cfg.attnres_sources != "outputs":
            return delta_attnres.DeltaStream(cfg)
        return AttnResStream(cfg)
