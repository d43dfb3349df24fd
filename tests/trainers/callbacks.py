"""Lightning callbacks the trainer tests share."""

from __future__ import annotations

from pathlib import Path

import lightning as L


class SaveAtStep(L.Callback):
    """Checkpoints at the validation of ``step``, as the sweep's reporter does."""

    def __init__(self, step: int, path: Path) -> None:
        self.step, self.path = step, path

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path, weights_only=False)
