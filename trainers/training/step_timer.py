"""Wall time spent inside training steps, so that a run can say how much of its time reached the
model (everything else: start-up, data, validation, diagnostics, checkpoints, logging)."""

from __future__ import annotations

import time
from typing import Any

import lightning as L


class StepTimer(L.Callback):
    """Sums the wall time from each training batch's start to its end (forward, backward,
    optimizer step). On a GPU the clock does not wait for queued kernels, so single steps read
    short, but the sum over a run is close: the queue is bounded."""

    def __init__(self) -> None:
        self.durations: list[float] = []  # one per step, in order
        self._start: float | None = None

    @property
    def total_s(self) -> float:
        return sum(self.durations)

    def on_train_batch_start(self, trainer: L.Trainer, *args: Any) -> None:
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self._start is not None:
            self.durations.append(time.perf_counter() - self._start)
            self._start = None
