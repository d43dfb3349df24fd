"""The vocabulary from the data (``trainers.corpus.vocab``): a ``model.vocab_size`` nobody set is
the one the corpus names (a shards manifest, a nanoGPT ``meta.pkl``), a given one is kept or,
when too small, refused in one line; the byte-level and synthetic sources keep 256."""

from __future__ import annotations

import collections
import pickle
from pathlib import Path

import numpy as np
import pytest

from trainers.config_io import build_config
from trainers.corpus.manifest import read_manifest
from trainers.data import SOURCES


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.corpus import prepared_corpus

    root = tmp_path_factory.mktemp("vocab")
    return prepared_corpus(root, lambda i: f"document {i}: words and more words, {i} times\n")


def _nanogpt(folder: Path, meta: object | None, top: int = 40) -> Path:
    """A nanoGPT folder: train.bin and val.bin of uint16 ids below ``top``, and ``meta`` as
    meta.pkl where given (pickled, or bytes as they are)."""
    folder.mkdir()
    ids = np.arange(200, dtype=np.uint16) % top
    ids.tofile(folder / "train.bin")
    ids[:80].tofile(folder / "val.bin")
    if meta is not None:
        raw = meta if isinstance(meta, bytes) else pickle.dumps(meta)
        (folder / "meta.pkl").write_bytes(raw)
    return folder


def _vocab(*sets: str, config: str | None = None) -> int:
    return build_config(config, list(sets)).model.vocab_size


def test_an_unset_vocabulary_is_the_datas(shards: Path, tmp_path: Path) -> None:
    """Unset, ``model.vocab_size`` is the manifest's for shards and meta.pkl's for a nanoGPT
    folder; the default corpus, text, synthetic and a folder without meta.pkl keep 256."""
    named = read_manifest(shards).vocab_size
    assert named > 256
    assert _vocab("data.source=shards", f"data.path={shards}") == named
    char = _nanogpt(tmp_path / "char", {"vocab_size": 65, "itos": {0: "a"}, "stoi": {"a": 0}})
    assert _vocab("data.source=tokens", f"data.path={char}") == 65
    plain = _nanogpt(tmp_path / "plain", None)
    (tmp_path / "a.txt").write_text("some text\n")
    assert _vocab() == 256
    assert _vocab("data.source=text", f"data.path={tmp_path / 'a.txt'}") == 256
    assert _vocab("data.source=synthetic", "data.n_symbols=32") == 256
    assert _vocab("data.source=tokens", f"data.path={plain}") == 256


def test_a_given_vocabulary_is_kept_or_refused(shards: Path, tmp_path: Path) -> None:
    """A size given by --set or a config file is kept when the corpus fits it; below the
    corpus's vocabulary it is refused with the one line the data module words."""
    named = read_manifest(shards).vocab_size
    data = ("data.source=shards", f"data.path={shards}")
    assert _vocab(*data, f"model.vocab_size={named + 64}") == named + 64
    assert _vocab(*data, f"model.vocab_size={named}") == named
    config = tmp_path / "run.yaml"
    config.write_text(f"model: {{vocab_size: {named + 8}}}\n")
    assert _vocab(*data, config=str(config)) == named + 8
    with pytest.raises(ValueError) as refused:
        _vocab(*data, "model.vocab_size=256")
    assert str(refused.value) == (
        f"model.vocab_size: 256 is too small for data.source 'shards', whose tokens need at "
        f"least {named}"
    )


def test_meta_pkl_names_the_tokens_vocabulary(tmp_path: Path) -> None:
    """meta.pkl's vocab_size is the tokens source's even above the ids the files hold, so a
    smaller given size is refused by the configuration and by the source alike."""
    char = _nanogpt(tmp_path / "char", {"vocab_size": 65}, top=40)
    data = ("data.source=tokens", f"data.path={char}")
    assert SOURCES.get("tokens")(build_config(None, list(data)).data).vocab_size == 65
    with pytest.raises(ValueError, match="50 is too small for data.source 'tokens'.* 65$"):
        _vocab(*data, "model.vocab_size=50")


@pytest.mark.parametrize(
    "meta",
    [
        {"vocab_size": 65, "x": collections.OrderedDict()},
        {"itos": {}},
        {"vocab_size": "65"},
        b"not a pickle",
    ],
    ids=["names a class", "no vocab_size", "not an int", "not a pickle"],
)
def test_a_bad_meta_pkl_is_refused(meta: object, tmp_path: Path) -> None:
    """A meta.pkl that names a class (never run), holds no int vocab_size or is no pickle is
    one line naming the file."""
    folder = _nanogpt(tmp_path / "bad", meta)
    with pytest.raises(ValueError, match=r"meta\.pkl is not nanoGPT's meta\.pkl") as err:
        _vocab("data.source=tokens", f"data.path={folder}")
    assert "\n" not in str(err.value)
