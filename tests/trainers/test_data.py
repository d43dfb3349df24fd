"""Data sources: offline, deterministic, and every bad path rejected with a clear message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from trainers.config import DataConfig, ModelConfig
from trainers.data import SOURCES
from trainers.data.module import load_source
from trainers.data.stdlib import stdlib_files, stdlib_root
from trainers.data.synthetic import IGNORE, PointerLayout, pointer_sample


def _stdlib(tmp_path: Path) -> DataConfig:
    return DataConfig(cache_dir=str(tmp_path), max_bytes=1_000_000)


def test_stdlib_corpus_is_deterministic_and_cached(tmp_path: Path) -> None:
    """Two loads give identical bytes; the second reuses the cache files untouched."""
    a = SOURCES.get("stdlib")(_stdlib(tmp_path))
    files = sorted(tmp_path.iterdir())
    stamps = [f.stat().st_mtime_ns for f in files]
    b = SOURCES.get("stdlib")(_stdlib(tmp_path))
    assert [f.stat().st_mtime_ns for f in sorted(tmp_path.iterdir())] == stamps
    assert np.array_equal(a.train, b.train) and np.array_equal(a.val, b.val)  # type: ignore[attr-defined]
    assert a.vocab_size == 256 and a.bytes_per_token == 1.0


def test_stdlib_split_is_by_file_and_near_the_fraction(tmp_path: Path) -> None:
    """Validation is about val_fraction (0.1) of the bytes, and starts with whole source files."""
    src = SOURCES.get("stdlib")(DataConfig(cache_dir=str(tmp_path), max_bytes=3_000_000))
    n_train, n_val = len(src.train), len(src.val)  # type: ignore[attr-defined]
    assert n_train + n_val >= 3_000_000
    assert 0.03 < n_val / (n_train + n_val) < 0.3
    assert bytes(src.val[:200]).isascii()  # type: ignore[attr-defined]


def test_stdlib_cap_too_small(tmp_path: Path) -> None:
    """A cap that leaves a split empty is named, and no cache file is written."""
    with pytest.raises(ValueError, match="data.max_bytes"):
        SOURCES.get("stdlib")(DataConfig(cache_dir=str(tmp_path / "c"), max_bytes=1))
    assert not (tmp_path / "c").exists()


def test_stdlib_files_are_sorted_and_exclude_third_party() -> None:
    """Deterministic order; no site-packages, so the corpus is the same on every venv."""
    root = stdlib_root()
    rel = [f.relative_to(root).as_posix() for f in stdlib_files(root)]
    assert rel == [f.relative_to(root).as_posix() for f in stdlib_files(root)]
    assert len(rel) == len(set(rel)) > 100
    assert not any("site-packages" in r for r in rel)


def test_text_folder_and_tail_split(tmp_path: Path) -> None:
    """A folder is read in sorted order; the last val_fraction of the bytes is held out."""
    (tmp_path / "b.txt").write_bytes(b"B" * 500)
    (tmp_path / "a.txt").write_bytes(b"A" * 500)
    src = SOURCES.get("text")(DataConfig(source="text", path=str(tmp_path), val_fraction=0.1))
    assert bytes(src.train[:500]) == b"A" * 500  # type: ignore[attr-defined]
    assert len(src.val) == 100 and bytes(src.val) == b"B" * 100  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "setup,match",
    [
        (lambda p: None, "does not exist"),
        (lambda p: p.write_bytes(b""), "is empty"),
        (lambda p: p.write_bytes(b"x" * 40), "has 4 tokens; one sequence needs"),
    ],
)
def test_text_errors(tmp_path: Path, setup: object, match: str) -> None:
    """Missing, empty and too-short text files each get their own message naming data.path."""
    path = tmp_path / "corpus.txt"
    setup(path)  # type: ignore[operator]
    cfg = DataConfig(source="text", path=str(path))
    with pytest.raises(ValueError, match=match):
        load_source(cfg, ModelConfig(seq_len=16))


def test_tokens_source(tmp_path: Path) -> None:
    """nanoGPT uint16 files are memory-mapped; the vocabulary is the largest token plus one."""
    np.arange(1000, dtype=np.uint16).tofile(tmp_path / "train.bin")
    (np.arange(300, dtype=np.uint16) + 2000).tofile(tmp_path / "val.bin")
    cfg = DataConfig(source="tokens", path=str(tmp_path))
    src = load_source(cfg, ModelConfig(vocab_size=4096, seq_len=16))
    assert src.vocab_size == 2300 and src.bytes_per_token is None
    x, y = src.train_set(16, 4, seed=0)[0]
    assert torch.equal(x[1:], y[:-1]) and int(y[0]) == int(x[0]) + 1
    with pytest.raises(ValueError, match="model.vocab_size: 256 is too small"):
        load_source(cfg, ModelConfig(seq_len=16))


def test_tokens_errors(tmp_path: Path) -> None:
    """A missing file, an empty file and an odd byte count are each named."""
    cfg = DataConfig(source="tokens", path=str(tmp_path))
    with pytest.raises(ValueError, match="train.bin.*not found"):
        load_source(cfg, ModelConfig())
    (tmp_path / "train.bin").write_bytes(b"\x01\x00" * 10)
    (tmp_path / "val.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="val.bin is empty"):
        load_source(cfg, ModelConfig())
    (tmp_path / "val.bin").write_bytes(b"\x01\x00\x02")
    with pytest.raises(ValueError, match="odd byte count"):
        load_source(cfg, ModelConfig())


def test_windows_are_shifted_by_one_and_seeded(tmp_path: Path) -> None:
    """Targets are the inputs shifted by one token; the same seed gives the same windows."""
    src = SOURCES.get("stdlib")(_stdlib(tmp_path))
    a, b = src.train_set(32, 8, seed=3), src.train_set(32, 8, seed=3)
    for i in range(8):
        x, y = a[i]
        assert torch.equal(x[1:], y[:-1])
        assert torch.equal(x, b[i][0])
    assert not torch.equal(a[0][0], src.train_set(32, 8, seed=4)[0][0])


def _decode(x: torch.Tensor, y: torch.Tensor, layout: PointerLayout) -> None:
    """Rebuild f from the listing and check each answer is f^k of its query."""
    m = layout.pairs
    f = dict(zip(x[0 : 2 * m : 2].tolist(), x[1 : 2 * m : 2].tolist(), strict=True))
    assert len(f) == m and set(f.values()) == set(f)  # a permutation of the m symbols
    answered = (y != IGNORE).nonzero().flatten().tolist()
    assert len(answered) == layout.queries
    for pos in answered:
        node = int(x[pos])
        for _ in range(layout.hops):
            node = f[node]
        assert int(y[pos]) == node


@pytest.mark.parametrize("hops,seq_len", [(1, 32), (3, 64), (5, 127)])
def test_pointer_chasing_answers_are_k_hops(hops: int, seq_len: int) -> None:
    """Every scored target is f^k(query) for the map the sequence lists; nothing else scores."""
    layout = PointerLayout(n_symbols=40, hops=hops, seq_len=seq_len)
    for i in range(20):
        x, y = pointer_sample(layout, seed=7, index=i)
        assert x.shape == y.shape == (seq_len,)
        _decode(x, y, layout)


def test_pointer_chasing_is_seeded_and_val_differs() -> None:
    """Samples are a function of (seed, index); validation uses sequences training never sees."""
    src = load_source(DataConfig(source="synthetic", hops=2), ModelConfig(seq_len=32))
    assert src.vocab_size == 33
    train, again = src.train_set(32, 4, seed=0), src.train_set(32, 4, seed=0)
    assert torch.equal(train[2][0], again[2][0])
    assert not torch.equal(train[0][0], src.val_set(32, 4)[0][0])


def test_pointer_chasing_needs_room() -> None:
    """A sequence too short to hold a listing and a query is rejected."""
    with pytest.raises(ValueError, match="seq_len >= 7"):
        load_source(DataConfig(source="synthetic"), ModelConfig(seq_len=6, n_heads=2))
