"""The token tables other projects' tokenizer files hold, read as data, never run: llm.c's
tokenizer file (each id's bytes) and nanoGPT's ``meta.pkl`` (each id's string, ``itos``).
``nas data adopt`` counts their bytes for bits per byte; ``nas generate`` reads and writes text
through them (``trainers.corpus.codec``).

llm.c's file (``train_gpt2.py``'s ``write_tokenizer``, read by ``llmc/tokenizer.h``): a header of
256 little-endian int32 (magic 20240328, version, the vocabulary's size, and from version 2 the
end-of-text id), then for each id in order one uint8 length and that many bytes. Version 1 names
no end-of-text id (llm.c assumes GPT-2's, 50256) and spells it out as tiktoken decodes it,
``<|endoftext|>``: read as text, each document boundary would count 13 bytes that are not in the
corpus, so the id whose bytes are that spelling is taken as the end-of-text token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from trainers.corpus.shard import HEADER_BYTES, HEADER_INTS
from trainers.corpus.vocab import NOT_A_PICKLE, PlainData

LLMC_TOKENIZER_MAGIC = 20240328
END_OF_TEXT = b"<|endoftext|>"  # GPT-2's end-of-text token as tiktoken spells it


@dataclass(frozen=True)
class LlmcTable:
    """llm.c's tokenizer file: each id's bytes, and the end-of-text id where the file names it."""

    pieces: tuple[bytes, ...]
    eot: int | None


def llmc_table(path: Path) -> LlmcTable:
    """The table of llm.c's tokenizer file at ``path``; ValueError, one line, for any other
    file, or one truncated or longer than its count says."""
    data = path.read_bytes()
    header = np.frombuffer(data[: min(len(data), HEADER_BYTES) // 4 * 4], dtype="<i4")
    if len(header) < HEADER_INTS or header[0] != LLMC_TOKENIZER_MAGIC or header[1] not in (1, 2):
        raise ValueError(f"{path}: not llm.c's tokenizer file (magic {LLMC_TOKENIZER_MAGIC})")
    n, at, pieces = int(header[2]), HEADER_BYTES, []
    for _ in range(n):
        if at >= len(data):
            raise ValueError(f"{path}: ends before its {n} tokens; it is truncated")
        length = data[at]
        pieces.append(data[at + 1 : at + 1 + length])
        at += 1 + length
    if at != len(data):
        raise ValueError(f"{path}: {len(data) - at} bytes past its {n} tokens")
    if header[1] == 2:
        return LlmcTable(tuple(pieces), int(header[3]))
    return LlmcTable(tuple(pieces), pieces.index(END_OF_TEXT) if END_OF_TEXT in pieces else None)


def meta_table(path: Path) -> tuple[str, ...]:
    """nanoGPT's ``meta.pkl`` ``itos``: each id's string, ids 0..n-1 in order; unpickled as plain
    data only (``PlainData``). ValueError, one line, for a file that is not such a table."""
    try:
        with path.open("rb") as f:
            meta = PlainData(f).load()
        itos = meta["itos"]
        table = tuple(itos[i] for i in range(len(itos)))
        if not all(isinstance(s, str) for s in table):
            raise TypeError("an itos entry is not a string")
    except (*NOT_A_PICKLE, AttributeError) as err:
        raise ValueError(f"{path}: not nanoGPT's meta.pkl with an itos table ({err})") from None
    return table
