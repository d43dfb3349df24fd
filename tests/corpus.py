"""A corpus ``nas data prepare`` wrote, for the tests that train or sweep on one: ``n``
one-line documents, a BPE of 300 ids (the ``model.vocab_size`` to train with), 30% held out."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

VOCAB = 300


def prepared_corpus(root: Path, document: Callable[[int], str], n: int = 40) -> Path:
    """``root/corpus``, prepared from ``root/src``'s ``n`` documents, ``document(i)`` each."""
    from trainers.corpus.prepare import PrepareConfig, prepare

    src, corpus = root / "src", root / "corpus"
    src.mkdir(exist_ok=True)
    for i in range(n):
        (src / f"d{i}.txt").write_text(document(i))
    prepare(
        PrepareConfig(source=src, out=corpus, vocab_size=VOCAB, val_fraction=0.3, progress=False)
    )
    return corpus
