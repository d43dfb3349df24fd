"""Attention variants, one module each, registered in ``ATTENTIONS`` by ``model.attention`` name.

Every module of this package is imported here (a new variant's module registers itself); what a
variant is is its entry in ``trainers.catalogue``, and a test holds the two to the same names.
"""

import importlib
import pkgutil

from trainers.attention.base import ATTENTIONS, AttentionVariant, LayerMemory

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["ATTENTIONS", "AttentionVariant", "LayerMemory"]
