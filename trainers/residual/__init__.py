"""Residual wirings, one module each, registered in ``RESIDUALS`` by ``model.residual`` name.

Every module of this package is imported here, so a new wiring's module registers itself with no
line added here; what the wiring is (placements, fields, FLOPs, label, paper) is its entry in
``trainers.catalogue``, and a test holds the registry and the catalogue to the same names.
"""

import importlib
import pkgutil

from trainers.residual.base import RESIDUALS, Residual, Stream

for _module in pkgutil.iter_modules(__path__):  # alphabetical: the registration order
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["RESIDUALS", "Residual", "Stream"]
