"""ResFormer's value residual learning: every attention after the first mixes the first layer's
values into its own before the attention-weighted sum,
U_n = A_n (lambda_1 V_1 + lambda_2 V_n) for n >= 2, where A_n is layer n's own attention
(Zhou et al. 2024, "Value Residual Learning", arXiv 2410.17897).

Two registry entries: ``value_residual`` is the paper's main form, lambda_1 = lambda_2 = 1/2
fixed (also its official code); ``value_residual_learned`` its learnable variant, one pair of
scalars per layer initialized at that fixed form. V_1 is the first attention's values after its
value projection, before any mixing; V_1 keeps its gradient (the official code does not detach
it). Rotary embedding touches only queries and keys, so where the mix sits relative to it does
not matter.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from trainers.attention.base import ATTENTIONS, AttentionVariant, LayerMemory
from trainers.config import ModelConfig

# (lambda_1 on V_1, lambda_2 on V_n): the paper's main ResFormer and the learnable variant's init.
LAMBDAS = (0.5, 0.5)


class StoreFirstValues(nn.Module):
    """Block 0: its values pass unchanged and are kept for the later blocks of this forward."""

    def __init__(self, memory: LayerMemory) -> None:
        super().__init__()
        self.memory = memory

    def forward(self, v: Tensor) -> Tensor:  # (B, nh, T, hd)
        self.memory.first_values = v
        return v


class MixFirstValues(nn.Module):
    """Blocks n >= 1 (0-based): lambda_1 * V_1 + lambda_2 * V_n, lambdas fixed or learned."""

    lambdas: Tensor

    def __init__(self, memory: LayerMemory, learned: bool) -> None:
        super().__init__()
        self.memory = memory
        lambdas = torch.tensor(LAMBDAS)
        if learned:
            self.lambdas = nn.Parameter(lambdas)
        else:  # a constant: not in the state dict, but moved and cast with the model
            self.register_buffer("lambdas", lambdas, persistent=False)

    def forward(self, v: Tensor) -> Tensor:  # (B, nh, T, hd)
        first = self.memory.first_values
        assert first is not None, "block 0's attention stores V_1 before any later block runs"
        return self.lambdas[0] * first + self.lambdas[1] * v


def _values(cfg: ModelConfig, block: int, memory: LayerMemory, learned: bool) -> nn.Module:
    if block == 0:
        return StoreFirstValues(memory) if cfg.n_layers > 1 else nn.Identity()
    return MixFirstValues(memory, learned)


@ATTENTIONS.register("value_residual")
class ValueResidual(AttentionVariant):
    @staticmethod
    def values(cfg: ModelConfig, block: int, memory: LayerMemory) -> nn.Module:
        return _values(cfg, block, memory, learned=False)


@ATTENTIONS.register("value_residual_learned")
class LearnedValueResidual(AttentionVariant):
    @staticmethod
    def values(cfg: ModelConfig, block: int, memory: LayerMemory) -> nn.Module:
        return _values(cfg, block, memory, learned=True)
