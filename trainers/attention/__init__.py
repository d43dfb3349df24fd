"""Attention variants, one module each, registered in ``ATTENTIONS`` by ``model.attention`` name."""

from trainers.attention import value_residual  # noqa: F401  (registration)
from trainers.attention.base import ATTENTIONS, AttentionVariant, LayerMemory

__all__ = ["ATTENTIONS", "AttentionVariant", "LayerMemory"]
