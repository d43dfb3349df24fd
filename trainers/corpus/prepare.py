"""``nas data prepare``: a folder of documents to token shards, ``token_bytes``, the tokenizer and
a manifest, written into a hidden folder beside ``out`` and renamed into place at the end (a
failure leaves nothing). Documents stream through: memory holds one shard's buffer per split
and a batch of documents, never the corpus."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trainers.corpus.documents import Split, documents, source_files, split_of
from trainers.corpus.manifest import TOKEN_BYTES, TOKENIZER, sha256_of, write_manifest
from trainers.corpus.shard import Layout, layout_for, write_shard
from trainers.corpus.tokenizer import (
    MIN_VOCAB,
    SEPARATOR,
    load_tokenizer,
    separator_id,
    token_bytes,
    train_bpe,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

BATCH_DOCS = 256  # documents encoded at once (tokenizers spreads a batch over its threads)


@dataclass(frozen=True, kw_only=True)
class PrepareConfig:
    """What ``nas data prepare`` was asked: one of ``vocab_size`` (train a BPE) or ``tokenizer``."""

    source: Path
    out: Path
    vocab_size: int | None = None
    tokenizer: Path | None = None
    separator: str = SEPARATOR
    val_fraction: float = 0.01
    shard_tokens: int = 100_000_000
    progress: bool = True

    def __post_init__(self) -> None:
        if (self.vocab_size is None) == (self.tokenizer is None):
            raise ValueError("give one of --vocab-size (train a BPE) or --tokenizer FILE")
        if self.vocab_size is not None and self.vocab_size < MIN_VOCAB:
            raise ValueError(
                f"--vocab-size: {self.vocab_size}; at least {MIN_VOCAB} (256 bytes and the separator)"
            )
        if self.tokenizer is not None and not self.tokenizer.is_file():
            raise ValueError(f"--tokenizer: {self.tokenizer} is not a file")
        if not 0 < self.val_fraction <= 0.5:
            raise ValueError(f"--val-fraction: {self.val_fraction}; in (0, 0.5]")
        if self.shard_tokens < 1:
            raise ValueError(f"--shard-tokens: {self.shard_tokens}; at least 1")
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            raise ValueError(f"--out: {self.out} exists and is not an empty folder; name a new one")


@dataclass
class SplitWriter:
    """One split's shards: a buffer of ``shard_tokens`` ids, written out whenever it fills."""

    folder: Path
    split: Split
    layout: Layout
    shard_tokens: int
    sizes: np.ndarray  # token_bytes
    shards: list[dict[str, Any]] = field(default_factory=list)
    documents: int = 0
    text_bytes: int = 0
    token_bytes: int = 0
    tokens: int = 0
    _buf: np.ndarray = field(init=False)
    _fill: int = 0

    def __post_init__(self) -> None:
        self._buf = np.empty(self.shard_tokens, dtype=self.layout.dtype)

    def add(self, ids: list[int], text: str) -> None:
        self.documents += 1
        self.text_bytes += len(text.encode("utf-8", errors="replace"))
        self.tokens += len(ids)
        self.token_bytes += int(self.sizes[ids].sum())
        array = np.asarray(ids, dtype=np.int64)
        if len(array) and int(array.max()) > np.iinfo(self.layout.dtype).max:
            raise ValueError(
                f"token id {int(array.max())} does not fit {self.layout.dtype.__name__}"
            )
        while len(array):
            take = min(len(array), self.shard_tokens - self._fill)
            self._buf[self._fill : self._fill + take] = array[:take]
            self._fill, array = self._fill + take, array[take:]
            if self._fill == self.shard_tokens:
                self.flush()

    def flush(self) -> None:
        if not self._fill:
            return
        path = self.folder / f"{self.split}_{len(self.shards):06d}.bin"
        write_shard(path, self._buf[: self._fill], self.layout)
        self.shards.append(
            {
                "file": path.name,
                "split": self.split,
                "tokens": self._fill,
                "sha256": sha256_of(path),
            }
        )
        self._fill = 0

    def totals(self) -> dict[str, int]:
        keys = ("documents", "tokens", "text_bytes", "token_bytes")
        return {k: int(getattr(self, k)) for k in keys}


def _progress(items: Iterator[str], on: bool, what: str) -> Iterator[str]:
    if not on:
        return items
    from tqdm import tqdm

    return iter(tqdm(items, desc=what, unit=" docs", mininterval=1.0))


def _tokenizer(cfg: PrepareConfig, files: list[Path]) -> Tokenizer:
    if cfg.tokenizer is not None:
        return load_tokenizer(cfg.tokenizer)
    assert cfg.vocab_size is not None
    train_docs = (d for d in documents(files) if split_of(d, cfg.val_fraction) == "train")
    return train_bpe(train_docs, cfg.vocab_size, cfg.separator, cfg.progress)


def _write_splits(
    cfg: PrepareConfig, files: list[Path], tok: Tokenizer, folder: Path, sizes: np.ndarray
) -> dict[Split, SplitWriter]:
    """Encode every document after the separator into its split's shards."""
    sep = separator_id(tok, cfg.separator)
    layout = layout_for(tok.get_vocab_size())
    writers: dict[Split, SplitWriter] = {
        s: SplitWriter(folder, s, layout, cfg.shard_tokens, sizes) for s in ("train", "val")
    }
    docs = _progress(documents(files), cfg.progress, "tokenizing")
    while batch := list(itertools.islice(docs, BATCH_DOCS)):
        encoded = tok.encode_batch(batch, add_special_tokens=False)
        for text, enc in zip(batch, encoded, strict=True):
            writers[split_of(text, cfg.val_fraction)].add([sep, *enc.ids], text)
    for w in writers.values():
        w.flush()
    return writers


def _content(
    cfg: PrepareConfig, tok: Tokenizer, folder: Path, writers: dict[Split, SplitWriter]
) -> dict[str, Any]:
    layout = writers["train"].layout
    origin = (
        {"trained_vocab_size": cfg.vocab_size}
        if cfg.tokenizer is None
        else {"given": cfg.tokenizer.name}
    )
    return {
        "tokenizer": {
            "file": TOKENIZER,
            "sha256": sha256_of(folder / TOKENIZER),
            "vocab_size": tok.get_vocab_size(),
            **origin,
        },
        "separator": {
            "token": cfg.separator,
            "id": separator_id(tok, cfg.separator),
            "where": "before each document",
        },
        "token_bytes": {
            "file": TOKEN_BYTES,
            "sha256": sha256_of(folder / TOKEN_BYTES),
            "dtype": "int32",
        },
        "shard_layout": {
            "magic": layout.magic,
            "version": layout.version,
            "dtype": np.dtype(layout.dtype).name,
        },
        "split": {
            "rule": "sha256(utf-8 text)[:8] little-endian % 1000 < 1000 * val_fraction",
            "val_fraction": cfg.val_fraction,
        },
        "shards": [s for w in writers.values() for s in w.shards],
        "splits": {s: w.totals() for s, w in writers.items()},
    }


def _check_splits(writers: dict[Split, SplitWriter], cfg: PrepareConfig) -> None:
    for split, w in writers.items():
        if not w.documents:
            raise ValueError(
                f"{cfg.source}: no document fell in the {split} split ({writers['train'].documents + writers['val'].documents} "
                "documents in all); add documents or change --val-fraction"
            )


def prepare(cfg: PrepareConfig) -> str:
    """Write the corpus at ``cfg.out``; its manifest hash."""
    files = source_files(cfg.source)
    tmp = cfg.out.parent / f".{cfg.out.name}.tmp{os.getpid()}"
    tmp.mkdir(parents=True)
    try:
        tok = _tokenizer(cfg, files)
        tok.save(str(tmp / TOKENIZER))
        sizes = token_bytes(tok)
        np.save(tmp / TOKEN_BYTES, sizes)
        writers = _write_splits(cfg, files, tok, tmp, sizes)
        _check_splits(writers, cfg)
        digest = write_manifest(tmp, _content(cfg, tok, tmp, writers))
        if cfg.out.exists():
            cfg.out.rmdir()  # empty (PrepareConfig refused anything else)
        os.replace(tmp, cfg.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return digest
