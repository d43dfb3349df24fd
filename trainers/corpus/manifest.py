"""``manifest.json``: what ``nas data prepare`` wrote (the tokenizer's and every shard's SHA-256,
token counts, the layout, the split rule), and its hash, the corpus's identity: a trial records it
as ``data.manifest``, so two trials on different data are never compared as one context."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainers.config import RunConfig

MANIFEST = "manifest.json"
TOKENIZER = "tokenizer.json"
TOKEN_BYTES = "token_bytes.npy"
FORMAT = "deep-transformer-nas shards"
FORMAT_VERSION = 1


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_hash(folder: Path) -> str:
    """The corpus's identity: the first 16 hex digits of the manifest file's SHA-256 (which holds
    every shard's and the tokenizer's), so re-preparing other text or another tokenizer changes it."""
    return sha256_of(_manifest_path(folder))[:16]


def _manifest_path(folder: Path) -> Path:
    path = folder / MANIFEST
    if not path.is_file():
        raise ValueError(
            f"data.path: {folder} has no {MANIFEST}; 'shards' reads a folder written by "
            "nas data prepare or nas data adopt"
        )
    return path


def check_manifest(folder: Path, expected: str, why: str) -> None:
    """ValueError, one line ending in ``why``, when a configuration's ``data.manifest``
    (``expected``; '' checks nothing) is no longer the manifest of the folder it names."""
    if expected and (found := manifest_hash(folder)) != expected:
        raise ValueError(f"data.manifest: {folder} now has manifest {found}, not {expected}; {why}")


@dataclass(frozen=True)
class Stored:
    """How an adopted file holds its tokens (``trainers.corpus.adopt``): where they start,
    their type, and the digest of the file's two ends that each load checks. A prepared
    corpus's shards have none: they are llm.c shards, read through their header."""

    offset: int
    dtype: str
    ends: str


@dataclass(frozen=True)
class Manifest:
    """The parts of a manifest a reader needs; ``raw`` keeps the whole."""

    vocab_size: int
    shards: dict[str, list[tuple[str, int]]]  # split -> [(file, tokens)], in order
    # sum of token_bytes over the validation tokens / their count; None when the tokenizer of an
    # adopted corpus is unknown (no bits per byte)
    val_bytes_per_token: float | None
    raw: dict[str, Any]
    stored: dict[str, Stored]  # file -> its layout, for adopted files


def read_manifest(folder: Path) -> Manifest:
    path = _manifest_path(folder)
    try:
        raw = json.loads(path.read_text())
        shards: dict[str, list[tuple[str, int]]] = {"train": [], "val": []}
        stored: dict[str, Stored] = {}
        for s in raw["shards"]:
            shards[s["split"]].append((str(s["file"]), int(s["tokens"])))
            if "offset" in s:
                stored[str(s["file"])] = Stored(int(s["offset"]), str(s["dtype"]), str(s["ends"]))
        val = raw["splits"]["val"]
        per_token = (
            None
            if val["token_bytes"] is None
            else float(val["token_bytes"]) / max(1, int(val["tokens"]))
        )
        return Manifest(int(raw["tokenizer"]["vocab_size"]), shards, per_token, raw, stored)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"{path}: not a manifest nas data prepare or nas data adopt wrote ({err!r})"
        ) from None


def write_manifest(folder: Path, content: dict[str, Any]) -> str:
    """Write the manifest (sorted keys: the same corpus gives the same bytes); its hash."""
    text = json.dumps(
        {"format": FORMAT, "version": FORMAT_VERSION, **content}, indent=2, sort_keys=True
    )
    tmp = folder / f".{MANIFEST}.tmp{os.getpid()}"  # a reader never sees half a manifest
    try:
        tmp.write_text(text + "\n")
        os.replace(tmp, folder / MANIFEST)
    finally:
        tmp.unlink(missing_ok=True)
    return manifest_hash(folder)


def pinned(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``data.manifest`` filled in from its shards folder, so that what a run records
    names its data (other sources unchanged). A manifest already set must be the folder's: a
    corpus prepared again under the same path is refused, not silently trained on."""
    data = cfg.data
    if data.source != "shards":
        return cfg
    found = manifest_hash(Path(data.path).expanduser())
    if data.manifest and data.manifest != found:
        raise ValueError(
            f"data.manifest: {data.path} has manifest {found}, not {data.manifest}; it was "
            "prepared again (set data.manifest={found} to train on what is there now)"
        )
    return replace(cfg, data=replace(data, manifest=found))
