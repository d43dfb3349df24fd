"""How a trained model's token ids read as text, for ``nas generate``: UTF-8 bytes for the byte
corpora (``stdlib``, ``text``); for a ``shards`` corpus its ``tokenizer.json`` (which ``nas data
prepare`` saves beside its shards), else the tokenizer file ``nas data adopt`` recorded in its
manifest (llm.c's tokenizer file, nanoGPT's ``meta.pkl``, a ``tokenizer.json`` elsewhere); for a
nanoGPT ``tokens`` folder its ``meta.pkl``. The rest name no text their ids stand for (a
``tokens`` folder without ``meta.pkl``, nanochat's byte counts, ``synthetic``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from trainers.corpus.manifest import TOKENIZER, check_manifest, read_manifest, sha256_of
from trainers.corpus.tables import llmc_table, meta_table
from trainers.corpus.tokenizer import load_tokenizer
from trainers.corpus.vocab import META

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from trainers.config import DataConfig

BYTE_SOURCES = ("stdlib", "text")  # one token a byte
TEXT_SOURCES = (*BYTE_SOURCES, "shards", "tokens")


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


class TableCodec:
    """Ids as the byte strings a table gives each: llm.c's tokenizer file, nanoGPT's ``meta.pkl``
    (each character's UTF-8). Decoding joins them; an id past the table reads U+FFFD. Encoding is
    greedy longest match over the table: exact for a character table, but not the BPE that
    tokenized a GPT-2 corpus (llm.c's file holds no merges), so a prompt's ids may differ from
    those training saw for the same text; ``nas generate --prompt-ids`` gives them exactly."""

    def __init__(self, pieces: Sequence[bytes], source: str) -> None:
        self.pieces, self.source = tuple(pieces), source
        self._ids: dict[bytes, int] = {}
        for i, piece in enumerate(self.pieces):
            self._ids.setdefault(piece, i)  # a piece written twice encodes as its first id
        self._longest = max(map(len, self.pieces), default=0)

    def encode(self, text: str) -> list[int]:
        data, at, ids = text.encode("utf-8"), 0, []
        while at < len(data):
            n, found = self._match(data, at)
            if found is None:
                char = data[at:].decode("utf-8", errors="replace")[0]
                raise ValueError(
                    f"--prompt: {char!r} is no token of {self.source}; the model never saw it"
                )
            ids.append(found)
            at += n
        return ids

    def _match(self, data: bytes, at: int) -> tuple[int, int | None]:
        """(length, id) of the longest piece at ``data[at:]``; (0, None) where none is."""
        for n in range(min(self._longest, len(data) - at), 0, -1):
            if (found := self._ids.get(data[at : at + n])) is not None:
                return n, found
        return 0, None

    def decode(self, ids: list[int]) -> str:
        unknown = "\ufffd".encode()
        joined = b"".join(self.pieces[i] if 0 <= i < len(self.pieces) else unknown for i in ids)
        # Byte-level pieces can split a character, and a sampled run can stop inside one: U+FFFD.
        return joined.decode("utf-8", errors="replace")


DECODES = "a tokenizer.json, llm.c's tokenizer .bin or nanoGPT's meta.pkl with itos"


def codec_of(data: DataConfig) -> Codec:
    """The codec of the corpus ``data`` names; ValueError, one line, where its ids are no text,
    or where its corpus folder is gone or was prepared or adopted again (another tokenizer,
    perhaps), or its tokenizer file changed since it was recorded."""
    if data.source in BYTE_SOURCES:
        return ByteCodec()
    folder = Path(data.path).expanduser()
    if data.source == "tokens":
        return _nanogpt_codec(folder)
    if data.source != "shards":
        raise ValueError(
            f"data.source {data.source!r}: its token ids name no text here; text is read and "
            f"written for {', '.join(TEXT_SOURCES)} only"
        )
    check_manifest(
        folder, data.manifest, "its tokenizer may not be the one this model was trained with"
    )
    path = folder / TOKENIZER
    if path.is_file():
        return TokenizerCodec(load_tokenizer(path, "data.path's"))
    return _recorded_codec(folder)


def _nanogpt_codec(folder: Path) -> Codec:
    path = folder / META
    if not path.is_file():
        raise ValueError(
            f"data.path: {folder} has no {META}; a 'tokens' folder's ids read as text through "
            "nanoGPT's meta.pkl (itos) only"
        )
    return TableCodec([s.encode("utf-8") for s in meta_table(path)], str(path))


def _recorded_codec(folder: Path) -> Codec:
    """The codec of the tokenizer file an adopted corpus's manifest records, once its SHA-256
    is checked: a file changed since adoption may give the ids other text."""
    recorded = read_manifest(folder).raw["tokenizer"]
    kind = recorded.get("kind")
    if recorded.get("file") == TOKENIZER and kind is None:  # nas data prepare's, removed
        raise ValueError(f"data.path: {folder} has no {TOKENIZER} (nas data prepare writes it)")
    if kind not in ("llm.c tokenizer", "nanoGPT meta.pkl", "Hugging Face tokenizer"):
        what = f"only {kind}" if kind else "no tokenizer"
        raise ValueError(
            f"data.path: {folder} records {what}, nothing that decodes its ids; nas generate "
            f"reads {DECODES} (nas data adopt records the one in the folder or its --tokenizer)"
        )
    path = folder / str(recorded["file"])  # the folder's own file, or an absolute path
    if not path.is_file() or sha256_of(path) != recorded.get("sha256"):
        raise ValueError(
            f"data.path: {path}, the tokenizer {folder} was adopted with, is gone or changed "
            "since; its ids may not be the ones this model was trained with"
        )
    if kind == "Hugging Face tokenizer":
        return TokenizerCodec(load_tokenizer(path, "data.path's"))
    if kind == "llm.c tokenizer":
        return TableCodec(llmc_table(path).pieces, str(path))
    return TableCodec([s.encode("utf-8") for s in meta_table(path)], str(path))
