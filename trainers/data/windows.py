"""Map-style datasets of next-token windows over a 1-D token array."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch.utils.data import Dataset


class Tokens(Protocol):
    """What a window reads: a length and contiguous slices. A NumPy array (memory-mapped or
    not), or several shards read as one (``trainers.data.shards.Concatenated``)."""

    def __len__(self) -> int: ...

    def __getitem__(self, key: slice, /) -> np.ndarray: ...


def _window(tokens: Tokens, start: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    chunk = torch.from_numpy(tokens[start : start + seq_len + 1].astype(np.int64))
    return chunk[:-1], chunk[1:]


class RandomWindows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n`` windows at seeded random offsets: deterministic, so a resumed run sees the same
    sample at the same index, and no shuffling is needed."""

    def __init__(self, tokens: Tokens, seq_len: int, n: int, seed: int) -> None:
        self.tokens, self.seq_len = tokens, seq_len
        high = len(tokens) - seq_len  # the last start that leaves seq_len + 1 tokens
        self.starts = np.random.default_rng(seed).integers(0, high, size=n)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return _window(self.tokens, int(self.starts[i]), self.seq_len)


class EvenWindows(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Up to ``n`` windows spread evenly over the array: a fixed validation set."""

    def __init__(self, tokens: Tokens, seq_len: int, n: int) -> None:
        self.tokens, self.seq_len = tokens, seq_len
        high = len(tokens) - seq_len - 1
        count = max(1, min(n, high // seq_len + 1))
        self.starts = np.linspace(0, high, num=count).astype(np.int64)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return _window(self.tokens, int(self.starts[i]), self.seq_len)
