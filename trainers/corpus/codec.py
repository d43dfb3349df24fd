"""How a trained model's token ids read as text, for ``nas generate``: UTF-8 bytes for the byte
corpora (``stdlib``, ``text``), and for a prepared corpus (``shards``) the tokenizer that
``nas data prepare`` saved beside its shards. The other sources name no text their ids stand
for (``tokens`` ships ids without their tokenizer; ``synthetic`` is not text)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trainers.corpus.manifest import TOKENIZER, check_manifest
from trainers.corpus.tokenizer import load_tokenizer

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from trainers.config import DataConfig

BYTE_SOURCES = ("stdlib", "text")  # one token a byte
TEXT_SOURCES = (*BYTE_SOURCES, "shards")


class Codec(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


class ByteCodec:
    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        # A sampled run of bytes can stop inside a character, or be no UTF-8 at all: U+FFFD.
        return bytes(ids).decode("utf-8", errors="replace")


@dataclass(frozen=True)
class TokenizerCodec:
    tokenizer: Tokenizer

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        # The separator stays in the text: it shows where the model ended one document.
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))


def codec_of(data: DataConfig) -> Codec:
    """The codec of the corpus ``data`` names; ValueError, one line, where its ids are no text,
    or where its corpus folder is gone or was prepared again (another tokenizer, perhaps)."""
    if data.source in BYTE_SOURCES:
        return ByteCodec()
    if data.source != "shards":
        raise ValueError(
            f"data.source {data.source!r}: its token ids name no text here; text is read and "
            f"written for {', '.join(TEXT_SOURCES)} only"
        )
    folder = Path(data.path).expanduser()
    check_manifest(
        folder, data.manifest, "its tokenizer may not be the one this model was trained with"
    )
    path = folder / TOKENIZER
    if not path.is_file():
        raise ValueError(f"data.path: {folder} has no {TOKENIZER} (nas data prepare writes it)")
    return TokenizerCodec(load_tokenizer(path, "data.path's"))
