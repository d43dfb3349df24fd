"""k-hop pointer chasing: a seeded synthetic task whose difficulty is the depth it needs.

Each sequence lists a random cyclic map f over m symbols as pairs ``a f(a)`` in random order, a
separator, then queries ``s f^k(s)``. Only the answers f^k(s) carry loss; answering needs k
chained look-ups, so the hop count k sets how much depth the task needs. A model that ignores
the listing scores log(m) nats per answer; one that follows the pointers scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from trainers.config import DataConfig
from trainers.data.source import SOURCES, DataSource, Sample
from trainers.targets import IGNORE


@dataclass(frozen=True)
class PointerLayout:
    """How a sequence of ``seq_len + 1`` tokens is laid out."""

    n_symbols: int
    hops: int
    seq_len: int

    @property
    def sep(self) -> int:
        return self.n_symbols

    @property
    def pairs(self) -> int:  # m: the listing takes about half the sequence
        return min(self.n_symbols, (self.seq_len + 1) // 4)

    @property
    def queries(self) -> int:
        return (self.seq_len + 1 - 2 * self.pairs - 1) // 2


def pointer_sample(layout: PointerLayout, seed: int, index: int) -> Sample:
    rng = np.random.default_rng([seed, index])
    m = layout.pairs
    symbols = rng.choice(layout.n_symbols, size=m, replace=False)
    cycle = symbols[rng.permutation(m)]
    succ = dict(zip(cycle.tolist(), np.roll(cycle, -1).tolist(), strict=True))  # one m-cycle
    tokens = np.full(layout.seq_len + 1, layout.sep, dtype=np.int64)
    listing = rng.permutation(symbols)
    tokens[0 : 2 * m : 2], tokens[1 : 2 * m : 2] = listing, [succ[a] for a in listing.tolist()]
    starts = rng.choice(symbols, size=layout.queries)
    answers = starts.copy()
    for _ in range(layout.hops):
        answers = np.array([succ[a] for a in answers.tolist()])
    q0 = 2 * m + 1
    tokens[q0 : q0 + 2 * layout.queries : 2] = starts
    tokens[q0 + 1 : q0 + 2 * layout.queries : 2] = answers
    x, y = torch.from_numpy(tokens[:-1]), torch.from_numpy(tokens[1:]).clone()
    mask = torch.full_like(y, IGNORE)
    answer_at = torch.arange(q0, q0 + 2 * layout.queries, 2)  # target index of each answer
    mask[answer_at] = y[answer_at]
    return x, mask


class PointerChasing(Dataset[Sample]):
    def __init__(self, layout: PointerLayout, n: int, seed: int) -> None:
        self.layout, self.n, self.seed = layout, n, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Sample:
        return pointer_sample(self.layout, self.seed, i)


class PointerSource(DataSource):
    name = "synthetic"
    bytes_per_token = None
    VAL_SEED = 1_000_003  # validation sequences never coincide with training ones

    def __init__(self, cfg: DataConfig) -> None:
        self.n_symbols, self.hops = cfg.n_symbols, cfg.hops
        self.vocab_size = cfg.n_symbols + 1  # symbols + separator

    def layout(self, seq_len: int) -> PointerLayout:
        return PointerLayout(self.n_symbols, self.hops, seq_len)

    def check(self, seq_len: int) -> None:
        if self.layout(seq_len).queries < 1 or self.layout(seq_len).pairs < 2:
            raise ValueError(
                f"data.source: 'synthetic' needs model.seq_len >= 7 to hold a listing and a "
                f"query; got {seq_len}"
            )

    def train_set(self, seq_len: int, n: int, seed: int) -> Dataset[Sample]:
        return PointerChasing(self.layout(seq_len), n, seed)

    def val_set(self, seq_len: int, n: int) -> Dataset[Sample]:
        return PointerChasing(self.layout(seq_len), n, self.VAL_SEED)


@SOURCES.register("synthetic")
def load_synthetic(cfg: DataConfig) -> DataSource:
    return PointerSource(cfg)
