"""Pre-tokenized corpora in nanoGPT's format: ``train.bin`` and ``val.bin`` of uint16 tokens, and
the ``meta.pkl`` naming the vocabulary where nanoGPT's ``prepare.py`` wrote one."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trainers.config import DataConfig
from trainers.corpus.vocab import meta_vocab
from trainers.data.source import SOURCES, DataSource, TokenCorpus


def _open(path: Path) -> np.ndarray:
    size = path.stat().st_size
    if size == 0:
        raise ValueError(f"data.path: {path} is empty; it needs uint16 tokens")
    if size % 2:
        raise ValueError(f"data.path: {path} has an odd byte count; expected uint16 tokens")
    return np.memmap(path, dtype=np.uint16, mode="r")


@SOURCES.register("tokens")
def load_tokens(cfg: DataConfig) -> DataSource:
    folder = Path(cfg.path).expanduser()
    files = {s: folder / f"{s}.bin" for s in ("train", "val")}
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise ValueError(
            f"data.path: {', '.join(missing)} not found; 'tokens' needs a folder with "
            "train.bin and val.bin (uint16, nanoGPT format)"
        )
    train, val = _open(files["train"]), _open(files["val"])
    seen = int(max(train.max(), val.max())) + 1  # one pass over each memory-mapped file
    vocab = max(seen, meta_vocab(folder) or 0)  # the tokenizer's, where meta.pkl names it
    # No byte mapping is known for a user's tokenizer: bits per byte is not reported.
    return TokenCorpus("tokens", train, val, vocab, None, str(folder))
