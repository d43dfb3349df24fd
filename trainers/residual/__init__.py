"""Residual wirings, one module each, registered in ``RESIDUALS`` by ``model.residual`` name."""

from trainers.residual import (  # noqa: F401  (registration, in the order of the config Literal)
    attnres,
    block_attnres,
    deepnorm,
    denseformer,
    hyper,
    laurel,
    mhc,
    mhc_lite,
    mudd,
    rezero,
    standard,
)
from trainers.residual.base import RESIDUALS, Residual, Stream

__all__ = ["RESIDUALS", "Residual", "Stream"]
