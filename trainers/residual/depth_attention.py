"""The depth-wise softmax shared by Full and Block AttnRes (Kimi Team 2026, arXiv 2603.15031).

At a mixing site with static pseudo-query w and key-norm gain g, over sources v_0..v_{S-1}:

    a_i = softmax_i( w . RMSNorm_g(v_i) ),    x = sum_i a_i v_i

No temperature. Values stay raw; only the keys are normalized. Because
``RMSNorm_g(v) . w = (v / rms(v)) . (g * w)``, the gain is folded into the query and each source's
``v / rms(v)`` is computed once, when the source is created, instead of at every later site.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def unit_rms(v: Tensor, eps: float) -> Tensor:
    """``v / rms(v)``: the key of a source before the per-site gain."""
    return F.rms_norm(v, (v.shape[-1],), eps=eps)


class DepthAttention(nn.Module):
    """One mixing site: a zero-init pseudo-query and a key-RMSNorm gain (2*d parameters)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        # Zero init makes the first weights uniform, so at init AttnRes computes what a
        # pre-norm residual computes (paper section 5).
        self.query = nn.Parameter(torch.zeros(d))
        self.key_norm_weight = nn.Parameter(torch.ones(d))

    def weights(self, keys: list[Tensor]) -> Tensor:
        """Softmax over sources: (B, T, S)."""
        k = torch.stack(keys, dim=-2)  # (B, T, S, d): token-first, so `@` batches cleanly
        return torch.softmax(k @ (self.query * self.key_norm_weight), dim=-1)

    def forward(self, values: list[Tensor], keys: list[Tensor]) -> Tensor:
        a = self.weights(keys)
        v = torch.stack(values, dim=-2)  # (B, T, S, d)
        return (a.unsqueeze(-2) @ v).squeeze(-2)  # (B, T, d)
