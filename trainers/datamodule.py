"""The Lightning data module: loaders over a ``DataSource`` sized from the run's config."""

from __future__ import annotations

import lightning as L
from torch.utils.data import DataLoader

from trainers.config import DataConfig, ModelConfig, RunConfig
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

    def train_dataloader(self) -> DataLoader:
        t = self.cfg.train
        n = t.max_steps * t.batch_size  # exactly one pass: one epoch = the whole run
        dataset = self.source.train_set(self.cfg.model.seq_len, n, t.seed)
        return DataLoader(dataset, batch_size=t.batch_size, shuffle=False)

    def val_dataloader(self) -> DataLoader:
        t = self.cfg.train
        dataset = self.source.val_set(self.cfg.model.seq_len, t.val_batches * t.batch_size)
        return DataLoader(dataset, batch_size=t.batch_size, shuffle=False)
