"""Hyper-Connections: the stream widens to n copies H (B, T, n, d); each sublayer reads
h = A_m^T H and writes H <- A_r^T H + B (x) f(h) (Zhu et al. 2024, arXiv 2409.19606).

Static init reproduces pre-norm exactly: A_m is one-hot at (sublayer mod n), A_r = I, B = 1, so
every copy holds the running sum and the sublayer reads one of them. Dynamic HC adds
s * tanh(Norm(H) W) to each map, with W = 0 and s = 0.01 at init. The model output sums the
copies; the final norm absorbs the factor n.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.model.norms import build_norm
from trainers.residual import probe
from trainers.residual.base import RESIDUALS, Residual, Stream


def read_and_mix(read: Tensor, mix: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
    """The sublayer input sum_k read_k H_k (B, T, d) and the mixed streams mix @ H (B, T, n, d),
    for maps shared by all tokens (read (n), mix (n, n)) or per token ((B, T, n), (B, T, n, n)).

    Both are linear maps of H, so they are one batched product with the read weights as an extra
    row; ``split`` hands the backward both gradients at once, where separate products would add
    two gradients of H. A shared map is expanded to one per token first: the batched product is
    5x faster than ``@`` broadcasting a (n, n) map into B*T tiny products."""
    n = h.shape[-2]
    rows = torch.cat((read.unsqueeze(-2), mix), dim=-2)  # (.., n + 1, n)
    out = rows.expand(*h.shape[:-2], n + 1, n) @ h
    x, mixed = out.split((1, n), dim=-2)
    # A copy of the one row: the branch keeps its input for its backward, and a view would keep
    # all n + 1 rows (the step's memory rose from 1.47x to 1.83x standard's).
    return x.squeeze(-2).clone(), mixed


def add_output(mixed: Tensor, post: Tensor, y: Tensor) -> Tensor:
    """mixed + post (x) y: the sublayer output y (B, T, d) written into each stream with its
    weight, post (n) or (B, T, n)."""
    return torch.addcmul(mixed, post.unsqueeze(-1), y.unsqueeze(-2))


class StreamsStream(Stream):
    """n copies of the embedding in, their sum out (shared by Hyper-Connections and mHC)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def begin(self, emb: Tensor) -> Tensor:
        return emb.unsqueeze(-2).expand(*emb.shape[:-1], self.n, emb.shape[-1])  # (B, T, n, d)

    def finish(self, state: Tensor) -> Tensor:
        return state.sum(dim=-2)


class HyperSite(nn.Module):
    # A_r starts at the identity: decaying it toward zero would cut the residual path.
    no_weight_decay = ("a_res",)

    def __init__(self, cfg: ModelConfig, sublayer: int) -> None:
        super().__init__()
        n, d = cfg.hc_streams, cfg.d_model
        self.index = sublayer
        self.a_in = nn.Parameter(F.one_hot(torch.tensor(sublayer % n), n).float())  # A_m
        self.a_res = nn.Parameter(torch.eye(n))  # A_r
        self.b_out = nn.Parameter(torch.ones(n))  # B
        self.dynamic = cfg.hc_dynamic
        if self.dynamic:
            self.norm = build_norm(cfg.norm, d, cfg.norm_eps)
            self.w_in = nn.Parameter(torch.zeros(d))
            self.w_res = nn.Parameter(torch.zeros(d, n))
            self.w_out = nn.Parameter(torch.zeros(d))
            self.s_alpha = nn.Parameter(torch.tensor(0.01))
            self.s_beta = nn.Parameter(torch.tensor(0.01))

    def maps(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """A_m (.., n), A_r (.., n, n), B (.., n), per token when dynamic."""
        if not self.dynamic:
            return self.a_in, self.a_res, self.b_out
        z = self.norm(h)  # (B, T, n, d)
        a_in = self.a_in + self.s_alpha * torch.tanh(z @ self.w_in)
        a_res = self.a_res + self.s_alpha * torch.tanh(z @ self.w_res)
        b_out = self.b_out + self.s_beta * torch.tanh(z @ self.w_out)
        return a_in, a_res, b_out

    def forward(self, h: Tensor, branch: nn.Module) -> Tensor:
        a_in, a_res, b_out = self.maps(h)
        token_dims = 2 if self.dynamic else 0
        probe.report("stream_read", self.index, lambda: a_in, token_dims)
        probe.report("stream_mix", self.index, lambda: a_res, token_dims)
        x, mixed = read_and_mix(a_in, a_res.mT, h)  # A_m^T H and A_r^T H
        return add_output(mixed, b_out, branch(x))


class MultiStream(Residual):
    """A wiring over ``hc_streams`` copies of the stream (HC and mHC differ only in the site)."""

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return StreamsStream(cfg.hc_streams)


@RESIDUALS.register("hyper")
class Hyper(MultiStream):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return HyperSite(cfg, sublayer)
