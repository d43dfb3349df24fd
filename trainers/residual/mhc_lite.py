"""mHC-lite: mHC with H_res built exactly doubly stochastic, as a convex combination of the n!
permutation matrices with per-token weights, H_res = sum_k a_k P_k, a = softmax(alpha_res *
(x W_res) + b_res) from the same RMS-normalized, flattened n*d stream as H_pre and H_post; no
Sinkhorn-Knopp (Yang & Gao 2026, arXiv 2601.05732; the "mHC" column of AttnRes's Table 2).

Every P_k has one 1 in each row and column, so each row and column of H_res sums to sum_k a_k = 1
to rounding, whatever the parameters (Birkhoff-von Neumann: these mixtures are exactly the
doubly-stochastic matrices). H_pre, H_post, their maps and their init are this project's mHC's
(``trainers/residual/mhc.py``), so ``mhc`` and ``mhc_lite`` differ only in H_res.

Init of the mixing weights, as in the paper's code (github.com/FFTYYY/mhc-lite): W_res = 0,
alpha_res = 0.01, b_res = 0 on the identity permutation and -8 on the others; for n = 4,
H_res = 0.994 on the diagonal and 0.002 off it. The code's H_pre and H_post biases are not taken
(b_pre = +-1 where mHC's is +-4; b_post = +-1, which would make the copies differ at init, where
b_post = 0 keeps them equal so that the model computes pre-norm's function; tested).
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from trainers.config import ModelConfig
from trainers.residual.base import RESIDUALS
from trainers.residual.hyper import MultiStream
from trainers.residual.mhc import MHCSite

# The logit of every permutation but the identity, relative to the identity's 0 (the paper's code).
OTHER_PERMUTATION_LOGIT = -8.0


def permutation_matrices(n: int) -> Tensor:
    """The n! permutation matrices, flattened: (n!, n*n), the identity first."""
    eye = torch.eye(n)
    return torch.stack([eye[list(p)].flatten() for p in itertools.permutations(range(n))])


class MHCLiteSite(MHCSite):
    """An mHC site whose mixing logits are one per permutation (n!) instead of one per entry."""

    perms: Tensor  # (n!, n*n), a buffer

    def __init__(self, cfg: ModelConfig, sublayer: int) -> None:
        super().__init__(cfg, sublayer)
        # A constant of n: not saved, rebuilt with the model; ``.double()`` converts it.
        self.register_buffer("perms", permutation_matrices(self.n), persistent=False)

    @staticmethod
    def res_bias(n: int) -> Tensor:
        """b_res (n!): 0 on the identity permutation, OTHER_PERMUTATION_LOGIT elsewhere."""
        bias = torch.full((math.factorial(n),), OTHER_PERMUTATION_LOGIT)
        bias[0] = 0.0
        return bias

    def res_map(self, z_res: Tensor) -> Tensor:
        """H_res (B, T, n, n) = sum_k a_k P_k with a = softmax(alpha_res z_res + b_res), z_res
        (B, T, n!)."""
        weights = torch.softmax(self.alpha_res * z_res + self.b_res, dim=-1)
        return (weights @ self.perms).unflatten(-1, (self.n, self.n))


@RESIDUALS.register("mhc_lite")
class MHCLite(MultiStream):
    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: torch.nn.Module) -> torch.nn.Module:
        return MHCLiteSite(cfg, sublayer)
