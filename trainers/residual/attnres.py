"""Full AttnRes: every sublayer's input is a learned softmax over the embedding and all earlier
sublayer outputs (Kimi Team 2026, arXiv 2603.15031, section 3.1)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.base import RESIDUALS, Residual, Stream
from trainers.residual.depth_attention import DepthAttention, unit_rms


@dataclass
class Sources:
    """Every output so far (y_0 = embedding first) and its unit-RMS key."""

    eps: float
    values: list[Tensor] = field(default_factory=list)
    keys: list[Tensor] = field(default_factory=list)

    def append(self, y: Tensor) -> None:
        self.values.append(y)
        self.keys.append(unit_rms(y, self.eps))


class AttnResSite(nn.Module):
    """x_j = sum_i a_{j,i} y_i over all earlier outputs; y_j = branch(x_j) joins the sources."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.mix = DepthAttention(d)

    def forward(self, state: Sources, branch: nn.Module) -> Sources:
        state.append(branch(self.mix(state.values, state.keys)))
        return state


class AttnResStream(Stream):
    """Starts the sources with the embedding; the output site mixes all of them."""

    state_type: type[Sources] = Sources

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.eps = cfg.norm_eps
        self.out_site = DepthAttention(cfg.d_model)

    def begin(self, emb: Tensor) -> Sources:
        state = self.state_type(self.eps)
        state.append(emb)
        return state

    def finish(self, state: Sources) -> Tensor:
        return self.out_site(state.values, state.keys)


@RESIDUALS.register("attnres")
class AttnRes(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return AttnResSite(cfg.d_model)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return AttnResStream(cfg)
