"""Token shards in llm.c / modded-nanogpt's format: a header of 256 little-endian int32, then the
tokens. ``header[0]`` is the magic, ``header[1]`` the version, ``header[2]`` the token count.

- magic 20240520, version 1: uint16 tokens (GPT-2's shards; what modded-nanogpt reads);
- magic 20240801, version 7: uint32 tokens, llm.c's own layout for vocabularies past 65,535
  (its Llama 3 shards), which the version-1 header cannot say.

The rest of the header is zero. A shard whose size disagrees with its count is refused (a
truncated or corrupt file), with one line naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4


@dataclass(frozen=True)
class Layout:
    """One header's identity: its magic and version, and the token type it announces."""

    magic: int
    version: int
    dtype: type[np.unsignedinteger]


U16 = Layout(20240520, 1, np.uint16)
U32 = Layout(20240801, 7, np.uint32)
LAYOUTS = (U16, U32)
U16_LIMIT = 1 << 16  # token ids below this fit the version-1 header


def layout_for(vocab_size: int) -> Layout:
    """uint16 shards where every id fits, uint32 otherwise."""
    return U16 if vocab_size <= U16_LIMIT else U32


def write_shard(path: Path, tokens: np.ndarray, layout: Layout) -> None:
    """``tokens`` under a header, atomically (a reader never sees half a shard). Refuses ids the
    layout cannot hold: a uint16 shard silently wrapping an id would train on other tokens."""
    if len(tokens) and int(tokens.max()) > np.iinfo(layout.dtype).max:
        raise ValueError(
            f"{path.name}: token id {int(tokens.max())} does not fit {np.dtype(layout.dtype).name} "
            f"shards (version {layout.version}); use the uint32 layout (version {U32.version})"
        )
    if len(tokens) >= 1 << 31:
        raise ValueError(f"{path.name}: {len(tokens)} tokens exceed the header's int32 count")
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = (layout.magic, layout.version, len(tokens))
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with tmp.open("wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.dtype(layout.dtype).newbyteorder("<"), copy=False).tobytes())
    os.replace(tmp, path)


def read_header(path: Path) -> tuple[Layout, int]:
    """(layout, token count) of a shard, checked against the file's size."""
    if not path.is_file():
        raise ValueError(f"{path}: no such shard")
    size = path.stat().st_size
    if size < HEADER_BYTES:
        raise ValueError(f"{path}: {size} bytes, shorter than the {HEADER_BYTES}-byte header")
    header = np.fromfile(path, dtype="<i4", count=HEADER_INTS)
    found = (int(header[0]), int(header[1]))
    layout = next((lay for lay in LAYOUTS if (lay.magic, lay.version) == found), None)
    if layout is None:
        known = ", ".join(f"{lay.magic} v{lay.version}" for lay in LAYOUTS)
        raise ValueError(f"{path}: magic {found[0]} version {found[1]} is not a shard ({known})")
    count = int(header[2])
    expected = HEADER_BYTES + count * np.dtype(layout.dtype).itemsize
    if count < 0 or size != expected:
        raise ValueError(
            f"{path}: the header says {count} tokens ({expected} bytes) but the file has "
            f"{size} bytes; it is truncated or corrupt"
        )
    return layout, count


def open_shard(path: Path) -> np.ndarray:
    """A shard's tokens, memory-mapped (never read whole)."""
    layout, count = read_header(path)
    dtype = np.dtype(layout.dtype).newbyteorder("<")
    if count == 0:  # numpy cannot map zero bytes
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=HEADER_BYTES, shape=(count,))
