"""What every data source provides: fixed train/validation datasets and their vocabulary."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils.data import Dataset

from trainers.config import DataConfig
from trainers.data.windows import EvenWindows, RandomWindows, Tokens
from trainers.registry import Registry

Sample = tuple[torch.Tensor, torch.Tensor]  # (inputs[T], targets[T]); target IGNORE = no loss


class DataSource:
    """A corpus or task. ``vocab_size`` is the smallest model vocabulary that fits it;
    ``bytes_per_token`` is set where tokens map to bytes (for bits per byte), else None."""

    name: str
    vocab_size: int
    bytes_per_token: float | None

    def check(self, seq_len: int) -> None:
        """Raise ValueError when the data cannot fill one sequence of ``seq_len``."""

    def train_set(self, seq_len: int, n: int, seed: int) -> Dataset[Sample]:
        raise NotImplementedError

    def val_set(self, seq_len: int, n: int) -> Dataset[Sample]:
        raise NotImplementedError


@dataclass
class TokenCorpus(DataSource):
    """Two 1-D token arrays (memory-mapped where they come from files)."""

    name: str
    train: Tokens
    val: Tokens
    vocab_size: int
    bytes_per_token: float | None
    origin: str  # what to name in errors: the file or folder

    def check(self, seq_len: int) -> None:
        for split, arr in (("train", self.train), ("validation", self.val)):
            if len(arr) < seq_len + 1:
                raise ValueError(
                    f"data.path: the {split} split of {self.origin} has {len(arr)} tokens; "
                    f"one sequence needs model.seq_len + 1 = {seq_len + 1}"
                )

    def train_set(self, seq_len: int, n: int, seed: int) -> Dataset[Sample]:
        return RandomWindows(self.train, seq_len, n, seed)

    def val_set(self, seq_len: int, n: int) -> Dataset[Sample]:
        return EvenWindows(self.val, seq_len, n)


SOURCES: Registry[Callable[[DataConfig], DataSource]] = Registry("data.source")
