"""The extension point for attention-level variants, and their registry.

An attention variant changes what happens inside every attention sublayer, orthogonally to the
residual wiring (``model.residual``) and the norm placement. It does so through one slot that
``trainers.model.layers.Attention`` fills at construction: ``values``, a module the per-head values
``v`` (B, nh, T, hd) pass through just before the attention-weighted sum. The default fills it
with ``nn.Identity``, so the standard attention computes exactly what it computed before the slot
existed.

Variants that read across layers share a ``LayerMemory``: one per model, made by the model and
handed to every block's attention at construction. Which attention variant a model uses is
``model.attention``.
"""

from __future__ import annotations

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.registry import Registry


class LayerMemory:
    """What one forward pass carries from an early attention to later ones (ResFormer: the first
    layer's values). A plain object, not a module: it holds activations, never parameters, and
    stays out of the state dict. The writer runs first in every forward (block 0), so a read
    always sees the current forward's tensor; nothing is cleared after the last read, which keeps
    a recomputation (activation checkpointing) of any later block reading the same tensor."""

    def __init__(self) -> None:
        self.first_values: Tensor | None = None


class AttentionVariant:
    """A registry entry: builds the ``values`` slot of the attention in block ``block``."""

    @staticmethod
    def values(cfg: ModelConfig, block: int, memory: LayerMemory) -> nn.Module:
        return nn.Identity()


ATTENTIONS: Registry[type[AttentionVariant]] = Registry("model.attention")

# Scaled dot-product attention over the layer's own queries, keys and values.
ATTENTIONS.register("standard")(AttentionVariant)
