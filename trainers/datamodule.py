"""The Lightning data module: loaders over a ``DataSource`` sized from the run's config."""

from __future__ import annotations

from typing import Any

import lightning as L
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from trainers.config import DataConfig, ModelConfig, RunConfig, micro_steps
from trainers.data import SOURCES, DataSource


def load_source(data: DataConfig, model: ModelConfig) -> DataSource:
    """Open the configured source and check that it fits the model; every problem is a
    ValueError naming the key, raised before anything is trained or written."""
    source = SOURCES.get(data.source)(data)
    source.check(model.seq_len)
    if source.vocab_size > model.vocab_size:
        raise ValueError(
            f"model.vocab_size: {model.vocab_size} is too small for data.source "
            f"{data.source!r}, whose tokens need at least {source.vocab_size}"
        )
    return source


class LMDataModule(L.LightningDataModule):
    def __init__(self, cfg: RunConfig, source: DataSource | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.source = source or load_source(cfg.data, cfg.model)

    def _loader(self, dataset: Dataset) -> DataLoader:
        """Batches of ``train.batch_size`` in order; data-parallel, each rank's share of every
        batch: sequence i goes to rank i mod N (no shuffling, so step k's shares together are
        exactly the sequences one process batches at step k)."""
        t, ranks = self.cfg.train, self.trainer.world_size if self.trainer else 1
        if ranks == 1:
            return DataLoader(dataset, batch_size=t.batch_size, shuffle=False)
        micro_steps(t, ranks)  # ValueError unless the shares are equal whole micro-batches
        rank = self.trainer.global_rank if self.trainer else 0
        share = DistributedSampler[Any](dataset, num_replicas=ranks, rank=rank, shuffle=False)
        return DataLoader(dataset, batch_size=t.batch_size // ranks, sampler=share)

    def train_dataloader(self) -> DataLoader:
        t = self.cfg.train
        n = t.max_steps * t.batch_size  # exactly one pass: one epoch = the whole run
        return self._loader(self.source.train_set(self.cfg.model.seq_len, n, t.seed))

    def val_dataloader(self) -> DataLoader:
        t = self.cfg.train
        n = t.val_batches * t.batch_size
        return self._loader(self.source.val_set(self.cfg.model.seq_len, n))
