"""LAuReL, the Learned Augmented Residual Layer (Menghani, Kumar & Kumar 2025, arXiv 2411.07501),
in its scalar and low-rank forms, one at every sublayer's residual connection:

* ``laurel_rw`` (LAuReL-RW, §2.1): x <- alpha * f(x) + beta * x, two learned scalars per sublayer;
* ``laurel_lr`` (LAuReL-LR, §2.2, eq. 3): x <- f(x) + B A x + x, with A: D x r and B: r x D
  (``model.laurel_rank`` = r), 2 r D parameters per sublayer; on row vectors, x A B.

What the paper fixes: B = 0 at init and, for its LLMs, A "column orthogonal",
A[i, j] = 1/sqrt(r D) if i mod r = j, else 0 (§3.3 and its footnote; Xavier for its ResNet), so
LAuReL-LR starts as the plain residual. Choices it leaves open, one line each here:

* RW's normalization: "we cannot let alpha and beta grow unbounded, and using a normalization
  function such as softmax or sigmoid helps" (§2.1). Here (alpha, beta) = 2 softmax(a, b), with
  a = b = 0 at init (``rw_weights``): alpha = beta = 1, the plain residual exactly, and
  alpha + beta = 2 after. A plain softmax would start at (x + f(x)) / 2, which is not the plain
  residual's function even under pre-norm: each older output would be halved once more per
  sublayer.
* What B A reads: the raw stream x, the paper's x_i (eq. 3), not the branch's normed input
  (Gemma 3n's LAuReL block reads the normed input): ``LowRankSite.forward``.
* Where LAuReL sits: every residual connection, attention and MLP alike (2L per model). The
  paper's 1B LLM count, 2N scalars for N layers, suggests one per Transformer layer there; one
  per sublayer is the reading of "replace the regular residual connection" that fits this
  project's sites (``Laurel*.site``).
* Weight decay: A and B are matrices and decay like any weight (toward B A = 0, the plain
  residual); alpha and beta, a vector, do not.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.residual.base import RESIDUALS, Residual

RW_SCALE = 2.0  # alpha + beta; 2 makes the init (alpha = beta = 1) the plain residual


def rw_weights(logits: Tensor) -> Tensor:
    """(alpha, beta) from the two learned logits: a scaled softmax, bounded in (0, RW_SCALE)."""
    return RW_SCALE * torch.softmax(logits, dim=0)


def column_orthogonal(d: int, rank: int) -> Tensor:
    """The paper's LLM init of A (D x r): 1/sqrt(r D) where i mod r = j, 0 elsewhere; its columns
    have disjoint supports, so they are orthogonal."""
    a = torch.zeros(d, rank)
    rows = torch.arange(d)
    a[rows, rows % rank] = 1.0 / math.sqrt(rank * d)
    return a


class ResidualWeightsSite(nn.Module):
    """LAuReL-RW: x <- post_norm(alpha * f(x) + beta * x)."""

    def __init__(self, post_norm: nn.Module) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(2))  # (a, b): alpha = beta = 1 at init
        self.post_norm = post_norm  # empty for LAuReL's placement (pre)

    def forward(self, x: Tensor, branch: nn.Module) -> Tensor:
        alpha, beta = rw_weights(self.logits)
        return self.post_norm(alpha * branch(x) + beta * x)


class LowRankSite(nn.Module):
    """LAuReL-LR: x <- post_norm(x + f(x) + x A B), row vectors: the paper's B A x."""

    def __init__(self, d: int, rank: int, post_norm: nn.Module) -> None:
        super().__init__()
        self.down = nn.Parameter(column_orthogonal(d, rank))  # the paper's A: (D, r)
        self.up = nn.Parameter(torch.zeros(rank, d))  # the paper's B: (r, D), zero at init
        self.post_norm = post_norm

    def low_rank(self, x: Tensor) -> Tensor:
        """The learned linear part beyond the identity: (.., D) -> (.., D), rank at most r."""
        return (x @ self.down) @ self.up

    def forward(self, x: Tensor, branch: nn.Module) -> Tensor:
        return self.post_norm(x + branch(x) + self.low_rank(x))  # B A reads the raw stream


@RESIDUALS.register("laurel_rw")
class LaurelRW(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return ResidualWeightsSite(post_norm)


@RESIDUALS.register("laurel_lr")
class LaurelLR(Residual):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        return LowRankSite(cfg.d_model, cfg.laurel_rank, post_norm)
