"""The default corpus: the running interpreter's standard-library source, as bytes.

Real text every machine has, so nothing is downloaded. Files are taken in a fixed pseudo-random
order (by CRC-32 of their relative path, so a ``max_bytes`` cap samples the whole library rather
than its alphabetical head) until ``max_bytes`` is reached; each goes to validation when
``crc32(path) % 1000 < 1000 * val_fraction`` (a split by document, stable when files are added). Both splits
are cached as uint8 files under the cache folder and memory-mapped.
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
import zlib
from pathlib import Path

import numpy as np

from trainers.config import DataConfig
from trainers.data.source import SOURCES, DataSource, TokenCorpus


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


SKIP_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})


def stdlib_files(root: Path) -> list[Path]:
    """Python sources under ``root``, third-party and bytecode folders excluded, in corpus order.
    The walk prunes the excluded folders instead of listing them (a populated site-packages
    made this the slowest part of a sweep trial's start)."""
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        files += [Path(folder, n) for n in names if n.endswith(".py")]
    return sorted((p for p in files if p.is_file()), key=lambda p: _order_key(root, p))


def _crc(root: Path, p: Path) -> int:
    return zlib.crc32(p.relative_to(root).as_posix().encode())


def _order_key(root: Path, p: Path) -> tuple[int, str]:
    # The split uses crc % 1000, the order crc // 1000: independent, so the cap does not
    # favour either split.
    return _crc(root, p) // 1000, p.relative_to(root).as_posix()


def cache_dir(cfg: DataConfig) -> Path:
    if cfg.cache_dir:
        return Path(cfg.cache_dir)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "deep-transformer-nas"


def _fingerprint(root: Path, files: list[Path], cfg: DataConfig) -> str:
    h = hashlib.sha256(f"{root}|{cfg.max_bytes}|{cfg.val_fraction}".encode())
    for p in files:
        st = p.stat()
        h.update(f"{p.relative_to(root).as_posix()}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def _split(root: Path, files: list[Path], cfg: DataConfig) -> tuple[bytes, bytes]:
    train, val, total = bytearray(), bytearray(), 0
    cut = round(1000 * cfg.val_fraction)
    for p in files:
        data = p.read_bytes()
        (val if _crc(root, p) % 1000 < cut else train).extend(data)
        total += len(data)
        if cfg.max_bytes and total >= cfg.max_bytes:
            break
    return bytes(train), bytes(val)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # readers never see a half-written cache file


@SOURCES.register("stdlib")
def load_stdlib(cfg: DataConfig) -> DataSource:
    root = stdlib_root()
    files = stdlib_files(root)
    if not files:
        raise ValueError(f"data.source: no Python sources found under {root}; use 'text'")
    key = _fingerprint(root, files, cfg)
    folder = cache_dir(cfg)
    paths = {s: folder / f"stdlib-{key}.{s}.bin" for s in ("train", "val")}
    if not all(p.exists() for p in paths.values()):
        train, val = _split(root, files, cfg)
        if not train or not val:
            raise ValueError(
                f"data.max_bytes: {cfg.max_bytes} is too small to put a file in both splits; "
                "raise it (0 means the whole library)"
            )
        folder.mkdir(parents=True, exist_ok=True)
        _write_atomic(paths["train"], train)
        _write_atomic(paths["val"], val)
    arrays = {s: np.memmap(p, dtype=np.uint8, mode="r") for s, p in paths.items()}
    return TokenCorpus("stdlib", arrays["train"], arrays["val"], 256, 1.0, str(root))
