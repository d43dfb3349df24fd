"""A corpus ``nas data prepare`` wrote or ``nas data adopt`` adopted (``trainers.corpus``): token
files per split, memory-mapped and read as one array each, with bits per byte from
``token_bytes`` whatever the tokenizer (where an adopted corpus's tokenizer is known)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainers.config import DataConfig
from trainers.corpus.adopt import ends_digest
from trainers.corpus.manifest import Stored, check_manifest, read_manifest
from trainers.corpus.shard import open_shard
from trainers.data.source import SOURCES, DataSource, TokenCorpus


class Concatenated:
    """Several memory-mapped shards read as one 1-D array: the length and the slices the
    windows (``trainers.data.windows``) take, a slice across a boundary joined from both."""

    def __init__(self, parts: list[np.ndarray]) -> None:
        self.parts = parts
        self.ends = np.cumsum([len(p) for p in parts])

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, key: slice) -> np.ndarray:
        start, stop, _ = key.indices(len(self))
        pieces, at = [], start
        while at < stop:
            i = int(np.searchsorted(self.ends, at, side="right"))
            begin = int(self.ends[i]) - len(self.parts[i])
            take = min(stop, int(self.ends[i])) - at
            pieces.append(self.parts[i][at - begin : at - begin + take])
            at += take
        return np.concatenate(pieces) if pieces else self.parts[0][:0]


def _open(path: Path, stored: Stored | None) -> np.ndarray:
    """A file's tokens, memory-mapped: a prepared shard through its header; an adopted file where
    its manifest says they start, once its two ends are still those it was adopted with."""
    if stored is None:
        return open_shard(path)
    if not path.is_file() or ends_digest(path) != stored.ends:
        raise ValueError(
            f"data.path: {path} changed since the folder was adopted (or is gone); adopt the "
            "folder again (nas data adopt) to train on what is there now"
        )
    dtype = np.dtype(stored.dtype).newbyteorder("<")
    count = (path.stat().st_size - stored.offset) // dtype.itemsize
    return np.memmap(path, dtype=dtype, mode="r", offset=stored.offset, shape=(count,))


def _split(
    folder: Path, files: list[tuple[str, int]], split: str, stored: dict[str, Stored]
) -> np.ndarray | Concatenated:
    if not files:
        raise ValueError(f"data.path: {folder} has no {split} shard in its manifest")
    parts = []
    for name, count in files:
        tokens = _open(folder / name, stored.get(name))
        if len(tokens) != count:
            raise ValueError(
                f"data.path: {folder / name} holds {len(tokens)} tokens; its manifest says {count}"
            )
        parts.append(tokens)
    return parts[0] if len(parts) == 1 else Concatenated(parts)


@SOURCES.register("shards")
def load_shards(cfg: DataConfig) -> DataSource:
    folder = Path(cfg.path).expanduser()
    check_manifest(folder, cfg.manifest, "it was prepared again since this configuration was built")
    m = read_manifest(folder)
    train, val = (_split(folder, m.shards[s], s, m.stored) for s in ("train", "val"))
    # The mean of token_bytes over the validation tokens: bits per byte is then the validation
    # loss over ln 2 times it (trainers.training.module.bits_per_byte; docs/data.md). None for an
    # adopted corpus whose tokenizer is unknown: no bits per byte.
    return TokenCorpus("shards", train, val, m.vocab_size, m.val_bytes_per_token, str(folder))
