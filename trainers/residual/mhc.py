"""mHC, Manifold-Constrained Hyper-Connections: X <- H_res X + H_post^T f(H_pre X), with the maps
computed per token from the RMS-normalized, flattened n*d stream; H_pre = sigmoid(.),
H_post = 2*sigmoid(.), and H_res projected onto the doubly-stochastic matrices by Sinkhorn-Knopp
(Xie et al. 2025, DeepSeek, arXiv 2512.24880).

Each map is ``alpha * (x W) + b`` with gating alpha = 0.01 and W = 0 at init. The paper leaves the
biases' init open; this project picks them so that the network computes what pre-norm computes
at init while the streams are not symmetric (identical streams would stay identical forever):
b_pre = +4 at (sublayer mod n) and -4 elsewhere (H_pre near one-hot, as HC's A_m),
b_post = 0 (H_post = 1 everywhere, as HC's B), b_res = I (after Sinkhorn, 0.48 on the diagonal
and 0.17 off it for n = 4). A sharper identity (b_res = 4 I) slowed Sinkhorn's convergence so much
that after 60 AdamW steps at lr 3e-3 the 20 iterations left row sums off by 1e-2; b_res = I kept
them within 1e-6 (tests/trainers/test_baselines.py pins the 1e-3 bound).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import FunctionCtx, once_differentiable

from trainers.config import ModelConfig
from trainers.residual import probe
from trainers.residual.base import RESIDUALS
from trainers.residual.hyper import MultiStream, add_output, read_and_mix

PRE_INIT_LOGIT = 4.0  # sigmoid(4) = 0.982, sigmoid(-4) = 0.018
RES_INIT_LOGIT = 1.0


# exp(-60) = 9e-27 stays a normal float32: no row or column of exp(logits - max) can underflow
# to all zeros (which would divide 0 by 0). Entries that far below the maximum carry no weight
# worth keeping, and the log-domain iteration would give them ~exp(-60) too.
MIN_LOG_RATIO = -60.0


def _sum_maps(n: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """(n*n, n*n) 0/1 matrices: a flattened (n, n) matrix times the first gives each entry its
    row's sum, times the second its column's sum."""
    eye = torch.eye(n, dtype=like.dtype, device=like.device)
    ones = torch.ones(n, n, dtype=like.dtype, device=like.device)
    return torch.kron(eye, ones), torch.kron(ones, eye)


class _Sinkhorn(torch.autograd.Function):
    """Sinkhorn-Knopp in the linear domain, flattened to (.., n*n) so that every row or column
    sum is one small matrix product (``_sum_maps``), with a hand-written backward through the
    unrolled iterations. Per half-step: a product and a division forward; a product-add, a
    multiply and a division backward. Kernels over a trailing dimension of size n (log-softmax,
    sums) are the slow path on a CPU: this measured 1.9x faster than log-softmax steps with a
    hand-written backward, and 3.5x faster than autograd through them, at (1, 256, 4, 4)."""

    @staticmethod
    def forward(ctx: FunctionCtx, logits: Tensor, iters: int) -> Tensor:
        shifted = logits - logits.amax((-2, -1), keepdim=True)  # the maximum entry is exp(0)
        m0 = shifted.clamp_(min=MIN_LOG_RATIO).exp_().flatten(-2)
        maps, m, steps = _sum_maps(logits.shape[-1], logits), m0, []
        for _ in range(iters):
            for p in maps:  # rows sum to 1, then columns
                sums = m @ p
                m = m / sums
                steps += [m, sums]
        ctx.save_for_backward(m0, *steps)
        ctx.maps = maps  # type: ignore[attr-defined]
        return m.view(logits.shape)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        m0, *steps = ctx.saved_tensors
        g = grad.flatten(-2)
        for k in range(len(steps) // 2 - 1, -1, -1):
            # m' = m / (m P): dm = (g - (g * m') P) / (m P), P symmetric
            m, sums = steps[2 * k], steps[2 * k + 1]
            g = torch.addmm(g.flatten(0, -2), (g * m).flatten(0, -2), ctx.maps[k % 2], alpha=-1)
            g = g.view_as(m) / sums
        # through exp; the shift by the maximum cancels (Sinkhorn ignores a constant), and a
        # clamped entry's weight is exp(-60): its gradient is left as is, ~0
        return (g * m0).view(grad.shape), None


def sinkhorn(logits: Tensor, iters: int) -> Tensor:
    """Project exp(logits) (.., n, n) toward the doubly-stochastic matrices: alternate row and
    column normalization. ``iters`` >= 1 (the config checks it)."""
    return _Sinkhorn.apply(logits, iters)


class MHCSite(nn.Module):
    no_weight_decay = ("b_res",)

    def __init__(self, cfg: ModelConfig, sublayer: int) -> None:
        super().__init__()
        n, d = cfg.hc_streams, cfg.d_model
        self.n, self.eps, self.iters = n, cfg.norm_eps, cfg.mhc_sinkhorn_iters
        self.index = sublayer
        b_res = self.res_bias(n)
        self.w_pre = nn.Parameter(torch.zeros(n * d, n))
        self.w_post = nn.Parameter(torch.zeros(n * d, n))
        self.w_res = nn.Parameter(torch.zeros(n * d, b_res.numel()))  # one column per logit
        self.alpha_pre = nn.Parameter(torch.tensor(0.01))
        self.alpha_post = nn.Parameter(torch.tensor(0.01))
        self.alpha_res = nn.Parameter(torch.tensor(0.01))
        one_hot = F.one_hot(torch.tensor(sublayer % n), n).float()
        self.b_pre = nn.Parameter(PRE_INIT_LOGIT * (2 * one_hot - 1))
        self.b_post = nn.Parameter(torch.zeros(n))
        self.b_res = nn.Parameter(b_res)

    @staticmethod
    def res_bias(n: int) -> Tensor:
        """The init of b_res, the bias of the mixing logits: RES_INIT_LOGIT * I (n, n)."""
        return RES_INIT_LOGIT * torch.eye(n)

    def res_map(self, z_res: Tensor) -> Tensor:
        """H_res (B, T, n, n) from the mixing columns of the products, z_res (B, T, n*n)."""
        res_logits = self.alpha_res * z_res.unflatten(-1, (self.n, self.n))
        return sinkhorn(res_logits + self.b_res, self.iters)

    def maps(self, h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """H_pre (B, T, n), H_post (B, T, n), H_res (B, T, n, n) for the streams h."""
        flat = h.flatten(-2)  # (B, T, n*d)
        # RMSNorm(flat) @ W = (flat @ W) / rms(flat): the normalized stream, n times the width of
        # the residual, is never built. One product serves the three maps.
        rinv = torch.rsqrt(torch.linalg.vecdot(flat, flat) / flat.shape[-1] + self.eps)
        z = (flat @ torch.cat((self.w_pre, self.w_post, self.w_res), dim=1)) * rinv[..., None]
        z_pre, z_post, z_res = z.split((self.n, self.n, self.w_res.shape[1]), dim=-1)
        pre = torch.sigmoid(self.alpha_pre * z_pre + self.b_pre)
        post = 2 * torch.sigmoid(self.alpha_post * z_post + self.b_post)
        return pre, post, self.res_map(z_res)

    def forward(self, h: Tensor, branch: nn.Module) -> Tensor:
        pre, post, res = self.maps(h)
        probe.report("stream_read", self.index, lambda: pre)
        probe.report("stream_mix", self.index, lambda: res)
        x, mixed = read_and_mix(pre, res, h)  # H_pre X and H_res X
        return add_output(mixed, post, branch(x))  # H_res X + H_post^T f(H_pre X)


@RESIDUALS.register("mhc")
class MHC(MultiStream):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return MHCSite(cfg, sublayer)
