"""``nas data adopt``: a folder of tokens another project wrote becomes a corpus the harness
trains on (``data.source=shards``) without copying a token. What is written beside the files is
``manifest.json`` and, where the tokenizer is known, ``token_bytes.npy``; nothing else changes.

The layouts it reads:

- **llm.c / modded-nanogpt shards**: ``*.bin`` files under llm.c's 256-int32 header (magic
  20240520 for uint16 tokens, 20240801 for uint32: ``trainers.corpus.shard``), such as FineWeb's
  ``fineweb_train_000001.bin`` and ``fineweb_val_000000.bin``; a file's split is in its name
  (``val`` or ``train``).
- **nanoGPT**: ``train.bin`` and ``val.bin`` of bare uint16 tokens, and ``meta.pkl`` where its
  ``prepare.py`` wrote one.

Bits per byte needs the bytes each token stands for. They are read, as data, from the tokenizer
where the folder holds one or ``--tokenizer`` names it: llm.c's tokenizer file (magic 20240328,
each token's bytes; its end-of-text token counts 0 bytes, as the harness's separator does),
nanoGPT's ``meta.pkl`` (``itos``, each token's UTF-8 bytes), a Hugging Face ``tokenizer.json``,
or nanochat's ``token_bytes.pt`` (a tensor of each token's byte count, loaded with
``weights_only=True``). Without one the corpus trains and reports its loss, not bits per byte.

nanochat's own data is text (parquet shards with a ``text`` column), not tokens, and its
``tokenizer.pkl`` is a pickle of code: ``nas data prepare`` tokenizes the text instead.

Adopting reads every token once: each file's SHA-256 (the corpus's identity, in the manifest),
its largest id, and each split's bytes. A folder whose files change afterwards is refused when
it is trained on: a file of another size by its token count, one rewritten in place by the
digest of its first and last 64 KiB (``ends``), checked at every load.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainers.corpus.documents import Split
from trainers.corpus.manifest import MANIFEST, TOKEN_BYTES, sha256_of, write_manifest
from trainers.corpus.shard import HEADER_BYTES, LAYOUTS
from trainers.corpus.tables import LLMC_TOKENIZER_MAGIC, llmc_table, meta_table
from trainers.corpus.vocab import META, NOT_A_PICKLE, PlainData

ENDS = 1 << 16  # bytes at each end of a file that ``ends`` digests
BLOCK = 1 << 26  # bytes read at once while scanning (a multiple of every token size)
NANOGPT = ("train.bin", "val.bin")


@dataclass(frozen=True)
class TokenFile:
    """One file of tokens: where its tokens start, their type and count, and its split."""

    path: Path
    split: Split
    offset: int
    dtype: np.dtype[Any]
    tokens: int


@dataclass(frozen=True)
class TokenBytes:
    """Each id's byte count, and the file it was read from."""

    sizes: np.ndarray
    kind: str
    path: Path


# ---- what the folder holds ----------------------------------------------------------------------


def _magic(path: Path) -> tuple[int, int]:
    header = np.fromfile(path, dtype="<i4", count=2)
    return (int(header[0]), int(header[1])) if len(header) == 2 else (-1, -1)


def _split_of(path: Path) -> Split:
    words = set(re.split(r"[^a-z]+", path.stem.lower()))
    if "val" in words or "valid" in words or "validation" in words:
        return "val"
    if "train" in words:
        return "train"
    raise ValueError(
        f"{path}: its split is not in its name; name llm.c shards *train* or *val* "
        "(fineweb_train_000001.bin, fineweb_val_000000.bin)"
    )


def _llmc_file(path: Path) -> TokenFile:
    found = _magic(path)
    layout = next(lay for lay in LAYOUTS if (lay.magic, lay.version) == found)
    dtype = np.dtype(layout.dtype).newbyteorder("<")
    count = int(np.fromfile(path, dtype="<i4", count=3)[2])
    if path.stat().st_size != HEADER_BYTES + count * dtype.itemsize:
        raise ValueError(
            f"{path}: the header says {count} tokens but the file has {path.stat().st_size} "
            "bytes; it is truncated or corrupt"
        )
    return TokenFile(path, _split_of(path), HEADER_BYTES, dtype, count)


def _bare_file(path: Path, split: Split) -> TokenFile:
    size = path.stat().st_size
    if size == 0 or size % 2:
        raise ValueError(f"{path}: {size} bytes; nanoGPT's {path.name} holds uint16 tokens")
    return TokenFile(path, split, 0, np.dtype("<u2"), size // 2)


def token_files(folder: Path) -> tuple[str, list[TokenFile]]:
    """The layout (``llm.c`` or ``nanoGPT``) and its token files, train first, in name order.
    ValueError, one line, for a folder in neither layout or holding a file neither reads."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: not a folder")
    if any(folder.rglob("*.parquet")):
        raise ValueError(
            f"{folder} holds parquet shards of text (nanochat's layout), not tokens; tokenize "
            f"them with: nas data prepare {folder} --out DIR --vocab-size N (or --tokenizer a "
            "tokenizer.json; nanochat's tokenizer.pkl is a pickle of code, never loaded)"
        )
    bins = sorted(p for p in folder.glob("*.bin") if p.is_file())
    shard_magics = {(lay.magic, lay.version) for lay in LAYOUTS}
    shards = [p for p in bins if _magic(p) in shard_magics]
    if shards:
        foreign = [p for p in bins if p not in shards and _magic(p)[0] != LLMC_TOKENIZER_MAGIC]
        if foreign:
            raise ValueError(
                f"{foreign[0]}: magic {_magic(foreign[0])[0]} is neither an llm.c token shard "
                "(20240520, 20240801) nor its tokenizer (20240328); move it out of the folder"
            )
        files = sorted((_llmc_file(p) for p in shards), key=lambda f: (f.split != "train", f.path))
        layout = "llm.c"
    elif all((folder / name).is_file() for name in NANOGPT):
        files = [_bare_file(folder / n, "train" if n == "train.bin" else "val") for n in NANOGPT]
        layout = "nanoGPT"
    else:
        raise ValueError(
            f"{folder} holds neither llm.c / modded-nanogpt token shards (*.bin under a 20240520 "
            "or 20240801 header) nor nanoGPT's train.bin and val.bin"
        )
    for split in ("train", "val"):
        if not any(f.split == split for f in files):
            raise ValueError(f"{folder}: no {split} tokens among {', '.join(p.name for p in bins)}")
    return layout, files


# ---- the bytes each token stands for ------------------------------------------------------------


def _llmc_tokenizer(path: Path) -> np.ndarray:
    table = llmc_table(path)
    out = np.asarray([len(p) for p in table.pieces], dtype=np.int32)
    if table.eot is not None:  # the end-of-text token stands for no text
        out[table.eot] = 0
    return out


def _meta_itos(path: Path) -> np.ndarray:
    return np.asarray([len(s.encode("utf-8")) for s in meta_table(path)], dtype=np.int32)


def _torch_sizes(path: Path) -> np.ndarray:
    import torch

    try:
        sizes = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError) as err:
        raise ValueError(f"{path}: not a tensor of token byte counts ({err})") from None
    if not isinstance(sizes, torch.Tensor) or sizes.ndim != 1 or sizes.is_floating_point():
        raise ValueError(f"{path}: not a 1-D integer tensor of token byte counts")
    return sizes.numpy().astype(np.int32)


def _hf_sizes(path: Path) -> np.ndarray:
    from trainers.corpus.tokenizer import load_tokenizer, token_bytes

    return token_bytes(load_tokenizer(path))


def _kind(path: Path) -> str | None:
    """Which tokenizer file ``path`` is, by name and content; None if none."""
    if path.suffix == ".bin" and _magic(path)[0] == LLMC_TOKENIZER_MAGIC:
        return "llm.c tokenizer"
    if path.name == META:
        return "nanoGPT meta.pkl"
    if path.suffix == ".json":
        return "Hugging Face tokenizer"
    if path.suffix == ".pt":
        return "token byte counts"
    return None


READERS = {
    "llm.c tokenizer": _llmc_tokenizer,
    "nanoGPT meta.pkl": _meta_itos,
    "Hugging Face tokenizer": _hf_sizes,
    "token byte counts": _torch_sizes,
}


def token_bytes_of(folder: Path, given: Path | None) -> TokenBytes | None:
    """The bytes of each id from ``given``, or from the one tokenizer file the folder holds
    (``tokenizer.json``, ``token_bytes.pt``, ``meta.pkl`` with ``itos``, an llm.c tokenizer
    ``.bin``); None where it holds none. Several: refused, naming them (say which)."""
    if given is not None:
        if not given.is_file() or (kind := _kind(given)) is None:
            raise ValueError(
                f"--tokenizer: {given} is not an llm.c tokenizer .bin, a meta.pkl, a "
                "tokenizer.json or a token_bytes.pt"
            )
        return TokenBytes(READERS[kind](given), kind, given)
    candidates = [
        p
        for p in sorted(folder.iterdir())
        if p.is_file()
        and (p.name in (META, "tokenizer.json", "token_bytes.pt") or p.suffix == ".bin")
        and _kind(p)
    ]
    if META in {p.name for p in candidates} and not _has_itos(folder / META):
        candidates = [p for p in candidates if p.name != META]  # nanoGPT's BPE meta: no table
    if len(candidates) > 1:
        names = ", ".join(p.name for p in candidates)
        raise ValueError(f"{folder} holds several tokenizers ({names}); name one with --tokenizer")
    if not candidates:
        return None
    kind = _kind(candidates[0])
    assert kind is not None
    return TokenBytes(READERS[kind](candidates[0]), kind, candidates[0])


def _has_itos(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            meta = PlainData(f).load()
    except NOT_A_PICKLE:
        return True  # let the reader say what is wrong with it
    return isinstance(meta, dict) and "itos" in meta


# ---- reading every token once --------------------------------------------------------------------


@dataclass(frozen=True)
class Scan:
    sha256: str
    ends: str
    top: int  # the largest id, -1 when empty
    token_bytes: int | None


def ends_digest(path: Path) -> str:
    """SHA-256 of a file's first and last ``ENDS`` bytes: cheap enough to check at every load,
    and a file rewritten in place almost never keeps both ends."""
    h = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as f:
        h.update(f.read(ENDS))
        f.seek(max(0, size - ENDS))
        h.update(f.read(ENDS))
    return h.hexdigest()


def scan(f: TokenFile, sizes: np.ndarray | None) -> Scan:
    h, top, total = hashlib.sha256(), -1, 0
    with f.path.open("rb") as stream:
        h.update(stream.read(f.offset))
        while block := stream.read(BLOCK):
            h.update(block)
            ids = np.frombuffer(block, dtype=f.dtype)
            if len(ids):
                top = max(top, int(ids.max()))
                if sizes is not None and top < len(sizes):
                    total += int(sizes[ids].sum())
    if sizes is not None and top >= len(sizes):
        raise ValueError(
            f"{f.path}: token id {top} is outside the tokenizer's {len(sizes)} ids; these are "
            "not its tokens (name the right one with --tokenizer)"
        )
    return Scan(h.hexdigest(), ends_digest(f.path), top, total if sizes is not None else None)


# ---- the manifest ----------------------------------------------------------------------------------


def _content(
    layout: str, files: list[TokenFile], scans: list[Scan], tb: TokenBytes | None, folder: Path
) -> dict[str, Any]:
    vocab = len(tb.sizes) if tb is not None else max(s.top for s in scans) + 1
    splits: dict[str, dict[str, Any]] = {}
    for split in ("train", "val"):
        mine = [(f, s) for f, s in zip(files, scans, strict=True) if f.split == split]
        splits[split] = {
            "tokens": sum(f.tokens for f, _ in mine),
            "token_bytes": None if tb is None else sum(s.token_bytes or 0 for _, s in mine),
        }
    tokenizer: dict[str, Any] = {"vocab_size": vocab}
    if tb is not None:
        where = tb.path.name if tb.path.parent == folder else str(tb.path)
        tokenizer |= {"kind": tb.kind, "file": where, "sha256": sha256_of(tb.path)}
    return {
        "adopted": {"layout": layout},
        "tokenizer": tokenizer,
        "token_bytes": None
        if tb is None
        else {"file": TOKEN_BYTES, "sha256": _npy_sha256(tb.sizes), "dtype": "int32"},
        "shards": [
            {
                "file": f.path.name,
                "split": f.split,
                "tokens": f.tokens,
                "sha256": s.sha256,
                "offset": f.offset,
                "dtype": f.dtype.name,
                "ends": s.ends,
            }
            for f, s in zip(files, scans, strict=True)
        ],
        "splits": splits,
    }


def _npy(sizes: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, sizes.astype(np.int32))
    return buf.getvalue()


def _npy_sha256(sizes: np.ndarray) -> str:
    return hashlib.sha256(_npy(sizes)).hexdigest()


def adopt(folder: Path, tokenizer: Path | None = None) -> str:
    """Write ``folder``'s manifest (and ``token_bytes.npy`` where the tokenizer is known); its
    hash. Everything is read and checked first: a refused folder gets nothing written."""
    for name in (MANIFEST, TOKEN_BYTES):
        if (folder / name).exists():
            raise ValueError(
                f"{folder} already has a {name}; it is a corpus already, or adopting it would "
                "overwrite that file (remove it to adopt the folder again: trials recorded on it "
                "are then refused as changed data)"
            )
    layout, files = token_files(folder)
    tb = token_bytes_of(folder, tokenizer)
    scans = [scan(f, None if tb is None else tb.sizes) for f in files]
    content = _content(layout, files, scans, tb, folder)
    written: list[Path] = []
    try:
        if tb is not None:
            tmp = folder / f".{TOKEN_BYTES}.tmp{os.getpid()}"
            tmp.write_bytes(_npy(tb.sizes))
            os.replace(tmp, folder / TOKEN_BYTES)
            written.append(folder / TOKEN_BYTES)
        return write_manifest(folder, content)
    except BaseException as err:
        for path in written:
            path.unlink(missing_ok=True)
        if isinstance(err, OSError):  # a read-only dataset folder, a full disk
            raise ValueError(
                f"{folder}: cannot write the manifest beside its files ({err.strerror}); adopt "
                "needs write access to the folder (nothing was written)"
            ) from None
        raise
