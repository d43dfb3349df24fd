"""The Lightning side of a sweep trial: a logger that writes to the trial's MLflow run through
``nas.tracking``, and a callback that reports each validation to Ray Tune with a checkpoint."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities import rank_zero_only

from nas.checkpoints import CKPT_NAME, write_mark
from nas.tracking import TrialRun
from reports.schema import PROFILE_FOLDER, Report, tune_key


class TrialLogger(Logger):
    """Metrics with their steps to the trial's run; params were logged once when the run was
    opened, so a resumed trial never re-logs them."""

    def __init__(self, run: TrialRun) -> None:
        super().__init__()
        self.run = run

    @property
    def name(self) -> str:
        return "nas"

    @property
    def version(self) -> str:
        return self.run.run_id

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self.run.log_metrics({k: float(v) for k, v in metrics.items() if k != "epoch"}, step or 0)

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_files(self, files: Sequence[Path]) -> None:
        """Artifacts, used by the dilution callback."""
        self.run.log_files(files, PROFILE_FOLDER)


class TuneReporter(L.Callback):
    """After each validation: a Lightning checkpoint, marked with the trial's key and step so a
    later invocation finds it (``nas.checkpoints``), and the metrics to Tune (ASHA and Optuna
    read the objectives' Tune keys)."""

    def __init__(self, key: str) -> None:
        self.key = key

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        from ray import tune

        # A non-finite value (weights can go NaN a step before the training loss shows it) is
        # left out: ASHA and the searcher skip a report without their metric instead of
        # ranking NaN; the trial's last report then carries its status.
        metrics = {
            tune_key(k): float(v)
            for k, v in trainer.callback_metrics.items()
            if math.isfinite(float(v))
        }
        metrics[Report.STEP] = trainer.global_step
        metrics[Report.PARAMS] = float(sum(p.numel() for p in pl_module.parameters()))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            trainer.save_checkpoint(folder / CKPT_NAME, weights_only=False)
            write_mark(folder, self.key, trainer.global_step)
            checkpoint = tune.Checkpoint.from_directory(tmp)
            tune.report({**metrics, Report.KEY: self.key}, checkpoint=checkpoint)
