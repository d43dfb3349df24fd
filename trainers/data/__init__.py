"""Data sources by ``data.source`` name, and the Lightning data module over them."""

from trainers.data import shards, stdlib, synthetic, text, tokens  # noqa: F401  (registration)
from trainers.data.source import SOURCES, DataSource, Sample

__all__ = ["SOURCES", "DataSource", "Sample"]
