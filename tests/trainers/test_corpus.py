"""A corpus of one's own (``trainers.corpus``, ``data.source=shards``): a BPE trained on a few
kilobytes round-trips text; shards read back with their header, dtype and count; a uint16
overflow is refused; token_bytes make bits per byte exact for any tokenizer; the manifest hash
names the data in every configuration that trains on it."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from trainers.config import DataConfig, RunConfig
from trainers.corpus.manifest import manifest_hash, pinned, read_manifest
from trainers.corpus.prepare import PrepareConfig, prepare
from trainers.corpus.shard import (
    HEADER_BYTES,
    U16,
    U32,
    Layout,
    layout_for,
    open_shard,
    read_header,
    write_shard,
)
from trainers.corpus.tokenizer import SEPARATOR, token_bytes, train_bpe
from trainers.data import SOURCES
from trainers.data.shards import Concatenated
from trainers.training.module import bits_per_byte

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "ünïcødé",
    "€",
]


def _texts(n: int = 60) -> list[str]:
    rng = np.random.default_rng(0)
    return [" ".join(rng.choice(WORDS, size=12)) + f" #{i}\n" for i in range(n)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few kilobytes of .txt documents, prepared with a trained BPE into small shards."""
    root = tmp_path_factory.mktemp("corpus")
    (root / "src").mkdir()
    for i, text in enumerate(_texts()):
        (root / "src" / f"doc{i:02d}.txt").write_text(text)
    cfg = PrepareConfig(
        source=root / "src",
        out=root / "out",
        vocab_size=300,
        val_fraction=0.3,
        shard_tokens=200,
        progress=False,
    )
    prepare(cfg)
    return root / "out"


def test_bpe_round_trips_text() -> None:
    """A byte-level BPE trained on a few kilobytes decodes its encoding back to the text, the
    separator is id 0, and token_bytes count each id's UTF-8 bytes (1 for each byte, 0 for the
    separator)."""
    texts = _texts()
    tok = train_bpe(iter(texts), 300, SEPARATOR, progress=False)
    sizes = token_bytes(tok)
    assert tok.token_to_id(SEPARATOR) == 0 and sizes[0] == 0
    assert (sizes[1:257] == 1).all() and sizes.max() > 1
    for text in [*texts[:5], "unseen: ☃ 𝄞 tabs\tand\nnewlines"]:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids) == text
        assert int(sizes[ids].sum()) == len(text.encode())


@pytest.mark.parametrize("layout,top", [(U16, 65_535), (U32, 70_000)])
def test_shard_header_dtype_and_count_read_back(tmp_path: Path, layout: Layout, top: int) -> None:
    """A written shard's header (magic, version, count), dtype and tokens read back."""
    tokens = np.array([0, 1, top, 7], dtype=np.int64)
    path = tmp_path / "s.bin"
    write_shard(path, tokens, layout)
    header = np.fromfile(path, dtype="<i4", count=3)
    assert tuple(header) == (layout.magic, layout.version, 4)
    assert read_header(path) == (layout, 4)
    back = open_shard(path)
    assert back.dtype == np.dtype(layout.dtype) and list(back) == list(tokens)
    assert path.stat().st_size == HEADER_BYTES + 4 * np.dtype(layout.dtype).itemsize


def test_uint16_overflow_is_refused(tmp_path: Path) -> None:
    """An id past 65,535 is refused in a uint16 shard (never wrapped); a vocabulary past 65,536
    gets the uint32 layout."""
    with pytest.raises(ValueError, match="does not fit uint16"):
        write_shard(tmp_path / "s.bin", np.array([70_000]), U16)
    assert not (tmp_path / "s.bin").exists()
    assert layout_for(65_536) is U16 and layout_for(65_537) is U32


@pytest.mark.parametrize("damage", ["truncate", "magic", "short"])
def test_damaged_shard_is_one_line(tmp_path: Path, damage: str) -> None:
    """A truncated shard, a wrong magic or a file shorter than the header: one line naming it."""
    path = tmp_path / "s.bin"
    write_shard(path, np.arange(100), U16)
    data = path.read_bytes()
    damaged = {
        "truncate": data[:-10],
        "magic": b"\x00" * 4 + data[4:],
        "short": data[:100],
    }[damage]
    path.write_bytes(damaged)
    with pytest.raises(ValueError, match="s.bin") as err:
        read_header(path)
    assert "\n" not in str(err.value)


def test_prepare_writes_shards_token_bytes_and_manifest(corpus: Path) -> None:
    """Every shard the manifest names exists with its count and hash; the splits' counts add
    up; token_bytes summed over a split's tokens is its text's UTF-8 size."""
    m = read_manifest(corpus)
    raw = m.raw
    sizes = np.load(corpus / "token_bytes.npy")
    assert raw["shard_layout"] == {"magic": 20240520, "version": 1, "dtype": "uint16"}
    for split in ("train", "val"):
        files = m.shards[split]
        assert files and sum(n for _, n in files) == raw["splits"][split]["tokens"]
        tokens = np.concatenate([open_shard(corpus / f) for f, _ in files])
        assert int(sizes[tokens].sum()) == raw["splits"][split]["text_bytes"]
        assert (tokens == 0).sum() == raw["splits"][split]["documents"]  # one separator each
    assert len(m.shards["train"]) > 1  # small shards: several
    assert manifest_hash(corpus) == manifest_hash(corpus) and len(manifest_hash(corpus)) == 16


def test_shards_source_reads_the_corpus(corpus: Path) -> None:
    """data.source=shards: the splits as one array each (slices across shard boundaries
    joined), the tokenizer's vocabulary, and bytes per token from token_bytes."""
    source = SOURCES.get("shards")(DataConfig(source="shards", path=str(corpus)))
    m = read_manifest(corpus)
    whole = np.concatenate([open_shard(corpus / f) for f, _ in m.shards["train"]])
    train = source.train  # type: ignore[attr-defined]
    assert isinstance(train, Concatenated) and len(train) == len(whole)
    for start in (0, 150, 190, len(whole) - 30):
        assert np.array_equal(train[start : start + 30], whole[start : start + 30])
    assert source.vocab_size == 300
    val = m.raw["splits"]["val"]
    assert source.bytes_per_token == pytest.approx(val["token_bytes"] / val["tokens"])
    x, y = source.train_set(16, 4, seed=0)[3]
    assert x.shape == y.shape == (16,)


def test_bits_per_byte_is_exact_and_byte_level_unchanged(corpus: Path) -> None:
    """The corpus-level bytes per token turns the mean validation loss into sum(loss) /
    (ln 2 * sum(bytes)) over the validation tokens; byte-level text keeps 1.0 byte per token,
    today's figure."""
    source = SOURCES.get("shards")(DataConfig(source="shards", path=str(corpus)))
    m = read_manifest(corpus)
    tokens = np.concatenate([open_shard(corpus / f) for f, _ in m.shards["val"]])
    sizes = np.load(corpus / "token_bytes.npy")[tokens]
    losses = np.random.default_rng(1).uniform(0.5, 5.0, size=len(tokens))
    exact = losses.sum() / (math.log(2) * sizes.sum())
    import torch

    mean = torch.tensor(losses.mean())
    assert source.bytes_per_token is not None
    assert float(bits_per_byte(mean, source.bytes_per_token)) == pytest.approx(exact)
    text = corpus.parent / "src"
    assert SOURCES.get("text")(DataConfig(source="text", path=str(text))).bytes_per_token == 1.0


def test_manifest_is_pinned_in_the_configuration(corpus: Path, tmp_path: Path) -> None:
    """A shards configuration is built with the folder's manifest hash (what a trial records as
    data.manifest); a folder prepared again since is refused, at build time and at load."""
    from search_spaces.space import apply_point
    from trainers.config import flatten

    base = RunConfig(data=DataConfig(source="shards", path=str(corpus)))
    cfg = apply_point(base, {"model.n_layers": 2})
    assert flatten(cfg)["data.manifest"] == manifest_hash(corpus)
    assert pinned(RunConfig()).data.manifest == ""  # other sources have none
    stale = replace(cfg, data=replace(cfg.data, manifest="0" * 16))
    with pytest.raises(ValueError, match="data.manifest: .* prepared again"):
        pinned(stale)
    with pytest.raises(ValueError, match="data.manifest"):
        SOURCES.get("shards")(stale.data)


def test_given_tokenizer_and_jsonl(corpus: Path, tmp_path: Path) -> None:
    """--tokenizer reuses a tokenizer.json (the same ids as the corpus it came from) on .jsonl
    documents; a separator the tokenizer lacks is refused."""
    src = tmp_path / "src"
    src.mkdir()
    lines = [json.dumps({"text": t}) for t in _texts(40)]
    (src / "a.jsonl").write_text("\n".join(lines) + "\n")
    given = corpus / "tokenizer.json"
    out = tmp_path / "out"
    prepare(PrepareConfig(source=src, out=out, tokenizer=given, val_fraction=0.3, progress=False))
    assert (
        read_manifest(out).raw["tokenizer"]["sha256"]
        == read_manifest(corpus).raw["tokenizer"]["sha256"]
    )
    with pytest.raises(ValueError, match="--separator"):
        prepare(
            PrepareConfig(
                source=src, out=tmp_path / "o2", tokenizer=given, separator="<s>", progress=False
            )
        )
    assert not (tmp_path / "o2").exists()


def test_every_reader_yields_documents(tmp_path: Path) -> None:
    """.txt (the file), .jsonl.zst (each line's text) and .parquet (each row's text column) are
    read in name order; other files are ignored."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    from trainers.corpus.documents import documents, source_files

    (tmp_path / "a.txt").write_text("one whole file")
    lines = "".join(json.dumps({"text": t}) + "\n" for t in ("zst 1", "zst 2"))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines.encode()))
    pq.write_table(pa.table({"text": ["pq 1", "pq 2"], "id": [1, 2]}), tmp_path / "c.parquet")
    (tmp_path / "d.csv").write_text("ignored")
    files = source_files(tmp_path)
    assert [f.name for f in files] == ["a.txt", "b.jsonl.zst", "c.parquet"]
    assert list(documents(files)) == ["one whole file", "zst 1", "zst 2", "pq 1", "pq 2"]
    pq.write_table(pa.table({"body": ["x"]}), tmp_path / "e.parquet")
    with pytest.raises(ValueError, match="e.parquet: no 'text' column"):
        list(documents([tmp_path / "e.parquet"]))


def test_codec_reads_text_as_the_corpus_tokenized_it(corpus: Path) -> None:
    """nas generate's codec: bytes for the byte corpora; for shards, the prepared corpus's own
    tokenizer (the ids the shards hold), round-tripping any text and keeping the separator;
    sources whose ids name no text, and a folder prepared again, are refused in one line."""
    from trainers.corpus.codec import ByteCodec, codec_of

    text = "alpha beta ☃ 𝄞\n" + SEPARATOR + "gamma"
    assert isinstance(codec_of(DataConfig(source="stdlib")), ByteCodec)
    assert ByteCodec().encode("é") == [0xC3, 0xA9]
    assert ByteCodec().decode([0xC3]) == "\ufffd"  # a character cut short
    shards = DataConfig(source="shards", path=str(corpus), manifest=manifest_hash(corpus))
    codec = codec_of(shards)
    ids = codec.encode(text)
    assert codec.decode(ids) == text and ids.count(0) == 1  # the separator is id 0
    first = open_shard(corpus / read_manifest(corpus).shards["train"][0][0])[:40].tolist()
    assert codec.encode(codec.decode(first)) == first  # the shards' ids, as prepare wrote them
    with pytest.raises(ValueError, match="data.source 'synthetic': its token ids name no"):
        codec_of(DataConfig(source="synthetic", path=str(corpus)))
    # a nanoGPT tokens folder reads as text through its meta.pkl only, which this one lacks
    with pytest.raises(ValueError, match="has no meta.pkl; a 'tokens' folder's ids read as text"):
        codec_of(DataConfig(source="tokens", path=str(corpus)))
    with pytest.raises(ValueError, match="data.manifest: .* tokenizer may not be"):
        codec_of(replace(shards, manifest="0" * 16))
