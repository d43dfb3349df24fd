"""The documents of a source file or folder, streamed one at a time (a corpus is never held):
each ``.txt`` file is one document; each line of a ``.jsonl`` or ``.jsonl.zst`` file is a JSON
object whose ``text`` field is one; each row of a ``.parquet`` file's ``text`` column is one.
Hidden files and other types are skipped. Every document goes to one split, by a hash of its text.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

Split = Literal["train", "val"]
TEXT_FIELD = "text"
SUFFIXES = (".txt", ".jsonl", ".jsonl.zst", ".parquet")


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    return next((s for s in sorted(SUFFIXES, key=len, reverse=True) if name.endswith(s)), None)


def source_files(source: Path) -> list[Path]:
    """The readable files of ``source`` (a file or a folder, walked in name order)."""
    if not source.exists():
        raise ValueError(f"{source} does not exist; give a file or a folder of text")
    if source.is_file():
        if _kind(source) is None:
            raise ValueError(f"{source}: not one of {', '.join(SUFFIXES)}")
        return [source]
    hidden = lambda p: any(part.startswith(".") for part in p.relative_to(source).parts)  # noqa: E731
    files = sorted(p for p in source.rglob("*") if p.is_file() and not hidden(p) and _kind(p))
    if not files:
        raise ValueError(f"{source} holds no {', '.join(SUFFIXES)} files; nothing to prepare")
    return files


def _txt(path: Path) -> Iterator[str]:
    yield path.read_text(encoding="utf-8", errors="replace")


def _jsonl_lines(path: Path, lines: io.TextIOBase | io.TextIOWrapper) -> Iterator[str]:
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not JSON ({err.msg})") from None
        text = record.get(TEXT_FIELD) if isinstance(record, dict) else None
        if not isinstance(text, str):
            raise ValueError(f"{path}:{number}: no {TEXT_FIELD!r} field holding a string")
        yield text


def _jsonl(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="replace") as f:
        yield from _jsonl_lines(path, f)


def _jsonl_zst(path: Path) -> Iterator[str]:
    try:
        import zstandard
    except ImportError:
        raise ValueError(
            f"{path}: reading .zst needs zstandard (pip install -e '.[data]')"
        ) from None
    with path.open("rb") as raw:
        stream = zstandard.ZstdDecompressor().stream_reader(raw)
        text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace")
        try:
            yield from _jsonl_lines(path, text)
        except zstandard.ZstdError as err:
            raise ValueError(f"{path}: not a zstandard stream ({err})") from None


def _parquet(path: Path) -> Iterator[str]:
    import pyarrow.parquet as pq  # a dependency of mlflow's

    try:
        file = pq.ParquetFile(path)
    except Exception as err:  # pyarrow's errors have no common base worth naming
        raise ValueError(f"{path}: not a parquet file ({str(err).splitlines()[0]})") from None
    if TEXT_FIELD not in file.schema_arrow.names:
        raise ValueError(f"{path}: no {TEXT_FIELD!r} column (it has {file.schema_arrow.names})")
    for batch in file.iter_batches(batch_size=1024, columns=[TEXT_FIELD]):
        yield from (t for t in batch.column(0).to_pylist() if t is not None)


READERS: dict[str, Callable[[Path], Iterator[str]]] = {
    ".txt": _txt,
    ".jsonl": _jsonl,
    ".jsonl.zst": _jsonl_zst,
    ".parquet": _parquet,
}


def documents(files: list[Path]) -> Iterator[str]:
    """Every document of ``files``, in order; empty documents are skipped."""
    for path in files:
        kind = _kind(path)
        assert kind is not None  # source_files keeps only known kinds
        yield from (doc for doc in READERS[kind](path) if doc)


def split_of(text: str, val_fraction: float) -> Split:
    """A document's split: stable for a document wherever it sits, so adding files moves none."""
    digest = hashlib.sha256(text.encode("utf-8", errors="replace")).digest()
    return "val" if int.from_bytes(digest[:8], "little") % 1000 < 1000 * val_fraction else "train"
