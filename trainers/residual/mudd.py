"""MUDDFormer, multiway dynamic dense connections: after block i, four depth-wise aggregations
over the embedding X_0 and every block output X_1..X_i, with weights generated per token from
X_i, give the next block separate query, key, value and residual inputs
(Xiao et al. 2025, arXiv 2502.12170; reference code github.com/Caiyun-AI/MUDDFormer).

    A_i = GELU(RMSNorm(X_i) W_1) W_2 + a_i            (per token; C streams x (i + 1) sources)
    X_i^c = sum_j A_i[c, j] X_j,  c in (Q, K, V, R)
    block i + 1:  h = X_i^R + Attn(N_Q(X_i^Q), N_K(X_i^K), N_V(X_i^V));  X_{i+1} = h + MLP(N(h))

RMSNorm in the weight generator has no gain; N_Q, N_K, N_V are separate input norms (the
reference's ``sepln``). Init (the reference's): W_1 ~ N(0, 1/d), W_2 = 0, a_i one-hot on the
newest source X_i for every stream, so at init every stream is X_i and the model computes what the
pre-norm Transformer computes with the same weights. Block 0 reads the embedding as its one
input (one attention norm). The last block's aggregation only feeds the head: it builds the R
stream alone (C = 1) with a 4x wider hidden layer (the reference's ``expand_last``).

Where the reference differs for speed only, this module follows the paper's sizes: the hidden
width is C * (number of sources) (times 4 at the last block), not rounded up to a multiple of 64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.catalogue import mudd_shape
from trainers.config import ModelConfig
from trainers.residual import probe
from trainers.residual.base import RESIDUALS, Residual, Stream
from trainers.residual.standard import AddSite

# The aggregations' shapes (streams q, k, v, r in that order on the generated weights' stream
# axis; the last one's wider hidden layer) are the catalogue's (trainers.catalogue.mudd_shape),
# which its FLOP and parameter formulas read too.


@dataclass
class MuddState:
    x: Tensor  # the residual stream inside a block: X^R, then + attention, then + MLP
    qkv: tuple[Tensor, Tensor, Tensor] | None = None  # the attention's inputs; None: all are x
    outputs: list[Tensor] = field(default_factory=list)  # X_0 = embedding, X_1, ...


class MuddAttentionSite(AddSite):
    """The attention site: x <- X^R + branch(X^Q, X^K, X^V); block 0 reads x for all three."""

    def forward(self, state: MuddState, branch: nn.Module) -> MuddState:  # type: ignore[override]
        if state.qkv is None:
            state.x = super().forward(state.x, branch)
        else:
            q, k, v = state.qkv
            state.x = self.post_norm(state.x + branch(q, k, v))
        return state


class MuddSite(AddSite):
    """The MLP site: the plain residual on the block's stream."""

    def forward(self, state: MuddState, branch: nn.Module) -> MuddState:  # type: ignore[override]
        state.x = super().forward(state.x, branch)
        return state


class DepthAggregate(nn.Module):
    """DA_i: the per-token weights A_i (B, T, C, S) over S = i + 2 sources, from X_i."""

    # a_i is a (C, S) matrix; decaying it toward zero would cut the residual path.
    no_weight_decay = ("static",)

    def __init__(self, d: int, sources: int, streams: int, hidden: int, eps: float) -> None:
        super().__init__()
        self.streams, self.sources, self.eps = streams, sources, eps
        # W_1 ~ N(0, 1/d), drawn in Mudd.init_weights after the model's own init: a draw here
        # would shift the generator under every shared weight, and seeds pair arms on them.
        self.w_in = nn.Parameter(torch.empty(d, hidden))
        self.w_out = nn.Parameter(torch.zeros(hidden, streams * sources))  # W_2 = 0
        static = torch.zeros(streams, sources)
        static[:, -1] = 1.0  # every stream starts as the newest block output
        self.static = nn.Parameter(static)

    def forward(self, x: Tensor) -> Tensor:  # x: (B, T, d) -> (B, T, C, S)
        z = F.rms_norm(x, (x.shape[-1],), eps=self.eps)  # no gain
        dynamic = F.gelu(z @ self.w_in) @ self.w_out
        return dynamic.unflatten(-1, (self.streams, self.sources)) + self.static


class MuddStream(Stream):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.aggregates = nn.ModuleList(
            DepthAggregate(cfg.d_model, sources, streams, hidden, cfg.norm_eps)
            for streams, sources, hidden in (mudd_shape(cfg, i) for i in range(cfg.n_layers))
        )

    def begin(self, emb: Tensor) -> MuddState:
        return MuddState(emb, None, [emb])

    def after_block(self, state: MuddState, block: int) -> MuddState:
        state.outputs.append(state.x)
        weights = self.aggregates[block](state.x)  # (B, T, C, S)
        probe.report("dwa", block, lambda: weights[..., -1, :])  # the R stream's weights
        mixed = weights @ torch.stack(state.outputs, dim=-2)  # (B, T, C, d)
        *qkv, state.x = mixed.unbind(-2)
        state.qkv = (qkv[0], qkv[1], qkv[2]) if qkv else None
        return state

    def finish(self, state: MuddState) -> Tensor:
        return state.x


@RESIDUALS.register("mudd")
class Mudd(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return MuddAttentionSite(post_norm) if sublayer % 2 == 0 else MuddSite(post_norm)

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return MuddStream(cfg)

    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        for module in model.modules():
            if isinstance(module, DepthAggregate):
                nn.init.normal_(module.w_in, std=1 / math.sqrt(module.w_in.shape[0]))

    @staticmethod
    def inputs(cfg: ModelConfig, sublayer: int) -> int:
        """Separate query, key and value inputs for every attention after block 0's (whose one
        input is the embedding)."""
        return 3 if sublayer % 2 == 0 and sublayer > 0 else 1
