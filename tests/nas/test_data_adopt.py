"""``nas data adopt``: folders in the layouts other projects write (llm.c / modded-nanogpt shards
under both headers, nanoGPT's bare bins) become corpora the harness trains on, reading the same
tokens in place, with bits per byte from the tokenizer's own bytes; a folder that changes
afterwards is refused at load; bad or foreign files get one line, exit status 2, nothing written.

The folders are made here, each by the rules of the project that writes it: the test's own
token byte strings are the truth that bits per byte is checked against."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from nas.cli import main
from trainers.config import DataConfig
from trainers.corpus.shard import HEADER_INTS, U16, U32, write_shard
from trainers.data.source import SOURCES

# A vocabulary of byte strings: the 256 bytes, then 43 merges of two to four bytes, then the
# end-of-text token, which stands for no text.
PIECES = [bytes([i]) for i in range(256)] + [bytes([97 + i % 26]) * (2 + i % 3) for i in range(43)]
EOT = len(PIECES)
VOCAB = EOT + 1
TRUE_SIZES = np.array([len(p) for p in PIECES] + [0])


def _tokens(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, size=n)


def _llmc_tokenizer(path: Path, version: int = 2) -> None:
    """llm.c's tokenizer file: 256 int32 (magic, version, n, end-of-text id), then each token's
    length byte and bytes (its end-of-text entry spelled out, as tiktoken decodes it)."""
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:4] = (20240328, version, VOCAB, EOT)
    body = b"".join(bytes([len(p)]) + p for p in [*PIECES, b"<|endoftext|>"])
    path.write_bytes(header.tobytes() + body)


def llmc_folder(root: Path, layout: str = "u16", version: int = 2) -> Path:
    """FineWeb-style shards, two train and one validation, and llm.c's tokenizer file."""
    folder = root / "fineweb10B"
    folder.mkdir()
    kind = U16 if layout == "u16" else U32
    for i, (name, n) in enumerate(
        [
            ("fineweb_val_000000.bin", 300),
            ("fineweb_train_000001.bin", 500),
            ("fineweb_train_000002.bin", 400),
        ]
    ):
        write_shard(folder / name, _tokens(n, i), kind)
    if layout == "u16":
        _llmc_tokenizer(folder / "gpt2_tokenizer.bin", version)
    else:  # nanochat's token byte counts, as torch.save writes them
        torch.save(torch.tensor(TRUE_SIZES, dtype=torch.int32), folder / "token_bytes.pt")
    return folder


def nanogpt_folder(root: Path) -> Path:
    """nanoGPT's char-level layout: bare uint16 train.bin / val.bin and meta.pkl's tables."""
    folder = root / "shakespeare_char"
    folder.mkdir()
    chars = sorted(set("\n !$&',-.3:;?abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéü"))
    itos = dict(enumerate(chars))
    rng = np.random.default_rng(7)
    for name, n in (("train.bin", 900), ("val.bin", 300)):
        rng.integers(0, len(chars), size=n).astype(np.uint16).tofile(folder / name)
    meta = {"vocab_size": len(chars), "itos": itos, "stoi": {c: i for i, c in itos.items()}}
    (folder / "meta.pkl").write_bytes(pickle.dumps(meta))
    return folder


def _source(folder: Path):  # type: ignore[no-untyped-def]
    return SOURCES.get("shards")(DataConfig(source="shards", path=str(folder)))


def _one_line_exit_2(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    ("layout", "version"), [("u16", 2), ("u16", 1), ("u32", 2)], ids=["u16", "u16-v1", "u32"]
)
def test_llmc_shards_are_read_in_place_with_their_bytes(
    tmp_path: Path, layout: str, version: int
) -> None:
    """Both headers: the splits are the shards' own tokens in name order (train before val is
    not assumed), the vocabulary the tokenizer's, and bytes per validation token the true mean
    of the test's byte strings, the end-of-text token counting none, whether the tokenizer
    file names it (version 2) or only spells it out (version 1)."""
    folder = llmc_folder(tmp_path, layout, version)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert main(["data", "adopt", str(folder)]) == 0
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in before} == before
    assert {p.name for p in folder.iterdir()} - set(before) == {"manifest.json", "token_bytes.npy"}
    source = _source(folder)
    train = np.concatenate([_tokens(500, 1), _tokens(400, 2)])
    assert np.array_equal(source.train[0 : len(train)], train)  # type: ignore[attr-defined]
    assert np.array_equal(source.val[0:300], _tokens(300, 0))  # type: ignore[attr-defined]
    assert source.vocab_size == VOCAB
    assert source.bytes_per_token == pytest.approx(TRUE_SIZES[_tokens(300, 0)].mean())


def test_nanogpt_bins_get_bits_per_byte_from_meta(tmp_path: Path) -> None:
    """nanoGPT's train.bin / val.bin: the same arrays the 'tokens' source reads, now with each
    character's UTF-8 bytes (é and ü are two)."""
    folder = nanogpt_folder(tmp_path)
    assert main(["data", "adopt", str(folder)]) == 0
    adopted, plain = (
        _source(folder),
        SOURCES.get("tokens")(DataConfig(source="tokens", path=str(folder))),
    )
    for split in ("train", "val"):
        a, b = getattr(adopted, split), getattr(plain, split)
        assert np.array_equal(a[0 : len(b)], b[0 : len(b)])
    meta = pickle.loads((folder / "meta.pkl").read_bytes())
    val = np.fromfile(folder / "val.bin", dtype=np.uint16)
    utf8 = np.array([len(meta["itos"][i].encode()) for i in range(meta["vocab_size"])])
    assert adopted.bytes_per_token == pytest.approx(utf8[val].mean())
    assert adopted.bytes_per_token > 1.0  # the two-byte characters count twice
    assert adopted.vocab_size == plain.vocab_size == meta["vocab_size"]


def test_without_a_tokenizer_the_loss_trains_and_bits_per_byte_is_not_claimed(
    tmp_path: Path,
) -> None:
    folder = llmc_folder(tmp_path)
    (folder / "gpt2_tokenizer.bin").unlink()
    assert main(["data", "adopt", str(folder)]) == 0
    source = _source(folder)
    assert source.bytes_per_token is None
    assert (
        source.vocab_size
        == int(np.concatenate([_tokens(n, i) for i, n in enumerate((300, 500, 400))]).max()) + 1
    )
    assert not (folder / "token_bytes.npy").exists()


TINY = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.seq_len=8",
    "train.batch_size=4",
    "train.max_steps=2",
    "train.val_every=2",
    "train.val_batches=2",
    "train.warmup_steps=1",
]


@pytest.mark.parametrize("make", [llmc_folder, nanogpt_folder], ids=["llm.c", "nanoGPT"])
def test_an_adopted_folder_trains_with_bits_per_byte(
    tmp_path: Path, make: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nas train` on the adopted folder, vocabulary from its manifest: it reports val/bpb, the
    validation loss over ln 2 and the corpus's bytes per token."""
    folder = make(tmp_path)  # type: ignore[operator]
    assert main(["data", "adopt", str(folder)]) == 0
    sets = [*TINY, "data.source=shards", f"data.path={folder}"]
    out = tmp_path / "run"
    argv = ["train", *(a for s in sets for a in ("--set", s)), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    capsys.readouterr()
    bpt = _source(folder).bytes_per_token
    assert bpt is not None
    found = _final_metrics(out)
    assert found["val/bpb"] == pytest.approx(found["val/loss"] / (math.log(2) * bpt), rel=1e-5)


def _final_metrics(out: Path) -> dict[str, float]:
    """The last logged value of each metric of a `nas train` run (Lightning's CSV log)."""
    import csv

    rows = list(csv.DictReader((next(out.rglob("metrics.csv"))).open()))
    last: dict[str, float] = {}
    for row in rows:
        last |= {k: float(v) for k, v in row.items() if v not in ("", None)}
    return last


def test_a_shard_rewritten_in_place_is_refused_at_load(tmp_path: Path) -> None:
    """Same size, other tokens: the manifest's count still agrees, its ends digest does not."""
    folder = llmc_folder(tmp_path)
    assert main(["data", "adopt", str(folder)]) == 0
    shard = folder / "fineweb_train_000002.bin"
    write_shard(shard, _tokens(400, 99), U16)
    with pytest.raises(ValueError, match="fineweb_train_000002.bin changed since"):
        _source(folder)


def test_a_truncated_or_adopted_again_folder_is_refused(tmp_path: Path) -> None:
    """A shard cut short is refused by its header; adopting again after a change gives another
    manifest, which a configuration pinned to the first refuses (``pinned``, as for a corpus
    prepared again)."""
    from dataclasses import replace

    from trainers.config import RunConfig
    from trainers.corpus.manifest import manifest_hash, pinned

    folder = llmc_folder(tmp_path)
    assert main(["data", "adopt", str(folder)]) == 0
    cfg = pinned(RunConfig(data=DataConfig(source="shards", path=str(folder))))
    shard = folder / "fineweb_val_000000.bin"
    shard.write_bytes(shard.read_bytes()[:-6])
    with pytest.raises(ValueError, match="fineweb_val_000000.bin"):
        _source(folder)
    write_shard(shard, _tokens(250, 5), U16)
    (folder / "manifest.json").unlink()
    (folder / "token_bytes.npy").unlink()
    assert main(["data", "adopt", str(folder)]) == 0
    assert manifest_hash(folder) != cfg.data.manifest
    with pytest.raises(ValueError, match="prepared again"):
        pinned(replace(cfg))


def _foreign_bin(folder: Path) -> None:
    np.array([12345, 1, 0] + [0] * 253, dtype="<i4").tofile(folder / "hellaswag_val.bin")


def _no_val(folder: Path) -> None:
    (folder / "fineweb_val_000000.bin").unlink()


def _unnamed(folder: Path) -> None:
    (folder / "fineweb_val_000000.bin").rename(folder / "fineweb_000000.bin")


def _two_tokenizers(folder: Path) -> None:
    torch.save(torch.tensor(TRUE_SIZES), folder / "token_bytes.pt")


def _outside(folder: Path) -> None:
    write_shard(folder / "fineweb_train_000003.bin", np.array([VOCAB + 5]), U16)


def _code_meta(folder: Path) -> None:
    for p in list(folder.iterdir()):
        p.unlink()
    np.zeros(10, dtype=np.uint16).tofile(folder / "train.bin")
    np.zeros(10, dtype=np.uint16).tofile(folder / "val.bin")
    (folder / "meta.pkl").write_bytes(pickle.dumps({"itos": Path("x")}))


def _parquet(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for p in list(folder.iterdir()):
        p.unlink()
    (folder / "base_data").mkdir()
    pq.write_table(
        pa.table({"text": ["one document", "another"]}),
        folder / "base_data" / "shard_00000.parquet",
    )
    (folder / "tokenizer").mkdir()
    (folder / "tokenizer" / "tokenizer.pkl").write_bytes(pickle.dumps({"not": "loaded"}))


def _adopted(folder: Path) -> None:
    (folder / "manifest.json").write_text("{}")


@pytest.mark.parametrize(
    "damage,match",
    [
        (_foreign_bin, "hellaswag_val.bin: magic 12345"),
        (_no_val, "no val tokens"),
        (_unnamed, "its split is not in its name"),
        (_two_tokenizers, "several tokenizers (gpt2_tokenizer.bin, token_bytes.pt)"),
        (_outside, "outside the tokenizer's 300 ids"),
        (_code_meta, "not nanoGPT's meta.pkl"),
        (_parquet, "nas data prepare"),
        (_adopted, "already has a manifest.json"),
    ],
    ids=[
        "foreign",
        "no val",
        "unnamed split",
        "two tokenizers",
        "not its ids",
        "code in meta",
        "nanochat parquet",
        "adopted",
    ],
)
def test_bad_or_foreign_folders_are_one_line_and_nothing_is_written(
    tmp_path: Path, damage: object, match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = llmc_folder(tmp_path)
    damage(folder)  # type: ignore[operator]
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    _one_line_exit_2(["data", "adopt", str(folder)], match, capsys)
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before


@pytest.mark.parametrize(
    "argv,match",
    [
        (["data", "adopt", "/no/such/folder"], "not a folder"),
        (["data", "adopt", "{folder}", "--tokenizer", "/no/such.bin"], "--tokenizer"),
    ],
)
def test_bad_arguments(
    tmp_path: Path, argv: list[str], match: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = llmc_folder(tmp_path)
    _one_line_exit_2([a.format(folder=folder) for a in argv], match, capsys)
    assert not (folder / "manifest.json").exists()


def test_nanochat_text_is_prepared_instead(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """nanochat's base_data parquet shards hold text: `nas data prepare` reads them as they are
    into a corpus with bits per byte (its own tokenizer; nanochat's pickle is never loaded)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "base_data"
    data.mkdir()
    docs = [f"document {i}: words and more words, {i * 7}" for i in range(40)]
    for k in range(2):
        pq.write_table(pa.table({"text": docs[k::2]}), data / f"shard_{k:05d}.parquet")
    out = tmp_path / "corpus"
    argv = [
        "data",
        "prepare",
        str(data),
        "--out",
        str(out),
        "--vocab-size",
        "300",
        "--val-fraction",
        "0.3",
        "--no-progress",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    source = _source(out)
    assert source.bytes_per_token is not None and source.bytes_per_token > 1.0
