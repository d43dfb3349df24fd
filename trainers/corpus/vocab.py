"""The vocabulary a corpus names for itself, and the one rule that makes it the model's: a
``model.vocab_size`` the user did not set (no ``--set``, config file, recorded run, or space's base
gave it) is the data's; one given below what the data needs is refused.

A corpus names its vocabulary where a tokenizer made it: a ``shards`` folder's manifest (the
tokenizer ``nas data prepare`` trained or copied), a nanoGPT ``tokens`` folder's ``meta.pkl``
(which nanoGPT's ``prepare.py`` writes for its character-level sets). The byte-level sources'
vocabulary is the default, 256; ``synthetic`` and a ``tokens`` folder without ``meta.pkl`` name
none, so they keep the default, and a model too small for them is refused when the source is
opened, as before. Torch-free: ``nas train`` and the sweep planner resolve a configuration with it.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from trainers.config import DataConfig, RunConfig
from trainers.corpus.manifest import read_manifest

KEY = "model.vocab_size"
META = "meta.pkl"
# What unpickling a file that is not a pickle of plain data raises (garbage can raise EOFError,
# IndexError, KeyError or ValueError besides UnpicklingError; the imports behind pickle's
# AttributeError and ImportError are refused first); TypeError: no int vocab_size in it.
NOT_A_PICKLE = (pickle.UnpicklingError, TypeError, EOFError, IndexError, KeyError, ValueError)


class PlainData(pickle.Unpickler):
    """Unpickles plain data only (dicts, lists, strings, numbers): a ``meta.pkl`` that names a
    class or function is refused instead of run."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"names {module}.{name}; expected plain data")


def meta_vocab(folder: Path) -> int | None:
    """The ``vocab_size`` of nanoGPT's ``meta.pkl`` in ``folder``; None without the file.
    ValueError, one line naming the file, when it is not a plain mapping with an int there."""
    path = folder / META
    if not path.is_file():
        return None
    try:
        with path.open("rb") as f:
            meta = PlainData(f).load()
        vocab = meta.get("vocab_size") if isinstance(meta, dict) else None
        if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 2:
            raise TypeError(f"vocab_size {vocab!r}; expected an int >= 2")
    except NOT_A_PICKLE as err:
        raise ValueError(f"data.path: {path} is not nanoGPT's meta.pkl ({err})") from None
    return vocab


def named_vocab(data: DataConfig) -> int | None:
    """The vocabulary ``data``'s own files name (see the module's docstring); None where they
    name none."""
    folder = Path(data.path).expanduser()
    if data.source == "shards":
        return read_manifest(folder).vocab_size
    if data.source == "tokens":
        return meta_vocab(folder)
    return None


def check_fits(vocab_size: int, source: str, need: int) -> None:
    """ValueError, one line, when a model of ``vocab_size`` ids cannot take ``source``'s tokens
    (``need``: the smallest vocabulary that fits them)."""
    if need > vocab_size:
        raise ValueError(
            f"{KEY}: {vocab_size} is too small for data.source {source!r}, whose tokens need "
            f"at least {need}"
        )


def vocab_from_data(cfg: RunConfig, given: Collection[str]) -> RunConfig:
    """``cfg`` with ``model.vocab_size`` the vocabulary its data names, unless ``given`` (the
    dotted keys the user set) holds it; a given one is checked against the data instead.
    Data that names no vocabulary leaves ``cfg`` as it is."""
    if KEY in given:
        check_vocab(cfg)
        return cfg
    vocab = named_vocab(cfg.data)
    return cfg if vocab is None else replace(cfg, model=replace(cfg.model, vocab_size=vocab))


def check_vocab(cfg: RunConfig) -> None:
    """ValueError, one line, when ``cfg``'s model is too small for the vocabulary its data
    names (a sweep's plan checks every cell before launch, as ``nas train`` checks its one)."""
    vocab = named_vocab(cfg.data)
    if vocab is not None:
        check_fits(cfg.model.vocab_size, cfg.data.source, vocab)
