"""The Lightning data module: loaders over a ``DataSource`` sized from the run's config."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sized
from typing import cast

import lightning as L
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler, SequentialSampler

from trainers.config import DataConfig, ModelConfig, RunConfig, micro_steps
from trainers.corpus.vocab import check_fits
from trainers.data import SOURCES, DataSource
from trainers.data.source import Sample
from trainers.targets import IGNORE


def load_source(data: DataConfig, model: ModelConfig) -> DataSource:
    """Open the configured source and check that it fits the model; every problem is a
    ValueError naming the key, raised before anything is trained or written."""
    source = SOURCES.get(data.source)(data)
    source.check(model.seq_len)
    check_fits(model.vocab_size, data.source, source.vocab_size)
    return source


class Resumed(Sampler[int]):
    """``order`` without its first ``skip`` indices, whose length stays ``order``'s. Lightning
    counts a resumed epoch's batches on from the restored step and ends the epoch when the
    count reaches the loader's length: a loader as short as what is left would end it early
    and start it again from its top, training those batches twice."""

    def __init__(self, order: Sampler[int], skip: int) -> None:
        self.order, self.skip = order, skip

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(iter(self.order), self.skip, None)

    def __len__(self) -> int:
        return len(self.order)  # type: ignore[arg-type]


class IgnoredPadding(Dataset[Sample]):
    """``data`` followed by sequences that count no target, ``length`` in all: a validation set
    that deals into equal shares over the ranks without repeating a sequence. (A
    ``DistributedSampler`` evens the shares with repeats of the first sequences, which the loss
    would then count twice; these count nothing, and every rank still runs as many batches, so
    no rank waits at a collective another never reaches.)"""

    def __init__(self, data: Dataset[Sample], length: int) -> None:
        self.data, self.n, self.length = data, len(cast(Sized, data)), length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> Sample:
        if i < self.n:
            return self.data[i]
        x, y = self.data[0]
        return torch.zeros_like(x), torch.full_like(y, IGNORE)


class LMDataModule(L.LightningDataModule):
    def __init__(self, cfg: RunConfig, source: DataSource | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.source = source or load_source(cfg.data, cfg.model)

    def _loader(self, dataset: Dataset, skip_steps: int = 0) -> DataLoader:
        """Batches of ``train.batch_size`` in order; data-parallel, each rank's share of every
        batch: sequence i goes to rank i mod N (no shuffling, so step k's shares together are
        exactly the sequences one process batches at step k). The first ``skip_steps`` batches
        are left out (a resumed run's)."""
        t, ranks = self.cfg.train, self.trainer.world_size if self.trainer else 1
        order: Sampler[int] = SequentialSampler(cast(Sized, dataset))  # every source's set is sized
        if ranks > 1:
            micro_steps(t, ranks)  # ValueError unless the shares are equal whole micro-batches
            rank = self.trainer.global_rank if self.trainer else 0
            order = DistributedSampler(dataset, num_replicas=ranks, rank=rank, shuffle=False)
        share = t.batch_size // ranks
        return DataLoader(dataset, batch_size=share, sampler=Resumed(order, skip_steps * share))

    def train_dataloader(self) -> DataLoader:
        """The run's sequences, from the first one its steps have not consumed: a run resumed
        at step k (Lightning has restored ``global_step`` before it asks for the loader) goes on
        with step k's batch, as the uninterrupted run does, instead of seeing batch 0 again."""
        t = self.cfg.train
        n = t.max_steps * t.batch_size  # exactly one pass: one epoch = the whole run
        sequences = self.source.train_set(self.cfg.model.seq_len, n, t.seed)
        return self._loader(sequences, self.trainer.global_step if self.trainer else 0)

    def val_dataloader(self) -> DataLoader:
        """``train.val_batches`` batches of fixed sequences, or as many as a short validation
        split holds; data-parallel, padded to a whole number of shares with sequences that
        count no target."""
        t = self.cfg.train
        n = t.val_batches * t.batch_size
        sequences = self.source.val_set(self.cfg.model.seq_len, n)
        ranks = self.trainer.world_size if self.trainer else 1
        held = len(cast(Sized, sequences))
        if held % ranks:
            sequences = IgnoredPadding(sequences, -(-held // ranks) * ranks)
        return self._loader(sequences)
