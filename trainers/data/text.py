"""Any text file or folder of files, byte-level; the last ``val_fraction`` is held out."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainers.config import DataConfig
from trainers.data.source import SOURCES, DataSource, TokenCorpus


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    hidden = lambda p: any(part.startswith(".") for part in p.relative_to(path).parts)  # noqa: E731
    return sorted(p for p in path.rglob("*") if p.is_file() and not hidden(p))


@SOURCES.register("text")
def load_text(cfg: DataConfig) -> DataSource:
    path = Path(cfg.path).expanduser()
    if not path.exists():
        raise ValueError(f"data.path: {path} does not exist; give a text file or a folder")
    data = b"".join(p.read_bytes() for p in _files(path))
    if not data:
        raise ValueError(f"data.path: {path} is empty; it needs text to train on")
    tokens = np.frombuffer(data, dtype=np.uint8)
    cut = len(tokens) - max(1, round(cfg.val_fraction * len(tokens)))
    return TokenCorpus("text", tokens[:cut], tokens[cut:], 256, 1.0, str(path))
