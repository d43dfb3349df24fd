"""Orchestration: the `nas` command-line interface, sweeps on Ray Tune, the MLflow writer."""

from __future__ import annotations


def package_version() -> str:
    """The installed version of deep-transformer-nas (recorded on every run)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("deep-transformer-nas")
    except PackageNotFoundError:
        return "unknown"
