"""The corpus's tokenizer: a byte-level BPE trained offline with Hugging Face ``tokenizers``, or a
given ``tokenizer.json``; and ``token_bytes``, the UTF-8 bytes each token id stands for, which
makes bits per byte computable for any tokenizer (special tokens stand for none)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Tokenizer

SEPARATOR = "<|endoftext|>"  # GPT-2's document separator, and llm.c's and modded-nanogpt's
MIN_VOCAB = 257  # the 256 bytes and the separator


def _tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise ValueError(
            "tokenizers is not installed (nas data prepare and a prepared corpus's text need it): "
            "pip install -e '.[data]'"
        ) from None
    return tokenizers


def train_bpe(
    texts: Iterator[str], vocab_size: int, separator: str, progress: bool = True
) -> Tokenizer:
    """A byte-level BPE (GPT-2's pre-tokenizer and byte alphabet) of at most ``vocab_size`` ids:
    the separator is id 0, the 256 bytes follow, then the merges. Streams ``texts``."""
    tk = _tokenizers()
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[separator],
        initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
        show_progress=progress,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_tokenizer(path: Path, name: str = "--tokenizer") -> Tokenizer:
    """The tokenizer saved at ``path``; ValueError, one line naming it as ``name``, for any file
    that is not one."""
    tk = _tokenizers()
    try:
        return tk.Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises its own Exception subclass
        first = (str(err).splitlines() or [""])[0]
        raise ValueError(f"{name} {path}: not a tokenizer.json ({first})") from None


def separator_id(tok: Tokenizer, separator: str) -> int:
    found = tok.token_to_id(separator)
    if found is None:
        raise ValueError(
            f"--separator {separator!r} is not a token of the tokenizer; name one it has"
        )
    return int(found)


@cache
def _byte_of_char() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: the printable character a byte-level vocabulary
    writes for each byte, back to the byte."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = {b: b for b in printable}, 0
    for b in range(256):
        if b not in chars:
            chars[b], extra = 256 + extra, extra + 1
    return {chr(c): b for b, c in chars.items()}


def _is_byte_level(tok: Tokenizer) -> bool:
    decoder = json.loads(tok.to_str()).get("decoder") or {}
    parts = decoder.get("decoders") or [decoder]
    return any(p.get("type") == "ByteLevel" for p in parts if isinstance(p, dict))


def _bytes_of(tok: Tokenizer, token_id: int, byte_level: bool) -> int:
    piece = tok.id_to_token(token_id) or ""
    if byte_level and all(c in _byte_of_char() for c in piece):
        return len(piece)  # one character per byte
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        return 1  # SentencePiece's byte fallback
    # Otherwise the decoded text's length: exact for whole characters; a piece that is part of a
    # character decodes to U+FFFD and counts 3 bytes (tokenizers with neither byte scheme only).
    return len(tok.decode([token_id], skip_special_tokens=False).encode("utf-8"))


def token_bytes(tok: Tokenizer) -> np.ndarray:
    """int32[vocab]: the bytes each id stands for; 0 for special tokens (the separator among
    them), which stand for no text."""
    special = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    byte_level = _is_byte_level(tok)
    sizes = [
        0 if i in special else _bytes_of(tok, i, byte_level) for i in range(tok.get_vocab_size())
    ]
    return np.asarray(sizes, dtype=np.int32)
