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
from trainers.norms import build_norm
from trainers.residual import probe
from trainers.residual.base import RESIDUALS, Residual, Stream


def read_streams(weights: Tensor, h: Tensor) -> Tensor:
    """sum_k w_k H_k, (B, T, d), for weights (n) or per token (B, T, n). A broadcast multiply and
    sum: as ``w @ H`` it would be B*T one-row products (2.8x slower forward and backward)."""
    return (weights.unsqueeze(-1) * h).sum(-2)


def write_streams(res: Tensor, post: Tensor, h: Tensor, y: Tensor) -> Tensor:
    """res^T H + post (x) y, (B, T, n, d), for maps shared by all tokens ((n, n), (n)) or per
    token ((B, T, n, n), (B, T, n)). A shared map is expanded to one per token first: the batched
    product is 5x faster forward and backward than ``@`` broadcasting the (n, n) map."""
    n = h.shape[-2]
    mixed = res.mT.expand(*h.shape[:-2], n, n) @ h
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
        y = branch(read_streams(a_in, h))
        return write_streams(a_res, b_out, h, y)


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
