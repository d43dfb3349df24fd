"""Residual wirings, one module each, registered in ``RESIDUALS`` by ``model.residual`` name.

Every module of this package and of its subpackages (the AttnRes family's, ``attnres``) is
imported here, so a new wiring's module registers itself with no line added here; what the wiring is
(placements, fields, FLOPs, label, paper) is its entry in ``trainers.catalogue``, and a test holds
the registry and the catalogue to the same names.
"""

import importlib
import pkgutil

from trainers.residual.base import RESIDUALS, Residual, Stream

# alphabetical, a subpackage's modules after it: the registration order
for _module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
    importlib.import_module(_module.name)

__all__ = ["RESIDUALS", "Residual", "Stream"]
