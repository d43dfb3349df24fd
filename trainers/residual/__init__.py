"""Residual wirings, one module each, registered in ``RESIDUALS`` by ``model.residual`` name."""

from trainers.residual import attnres, block_attnres, standard  # noqa: F401  (registration)
from trainers.residual.base import RESIDUALS, Residual, Stream

__all__ = ["RESIDUALS", "Residual", "Stream"]
