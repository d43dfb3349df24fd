"""The Lightning side of a sweep trial: a logger that writes to the trial's MLflow run through
``nas.store.tracking``, and a callback that reports each validation with a checkpoint, to Ray Tune
(``TuneReporter``) or, in a data-parallel trial's workers, to Ray Train (``TrainReporter``);
in the calling process (``nas.trial.host.LocalHost``), without one (``ValidationReporter``)."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities import rank_zero_only

from nas.store.tracking import TrialRun
from nas.trial.checkpoints import CKPT_NAME, write_mark
from record.schema import PROFILE_FOLDER, Report, tune_key


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


def validation_report(trainer: L.Trainer, module: L.LightningModule, key: str) -> dict[str, Any]:
    """A validation's report under Tune's keys (ASHA and Optuna read the objectives'), with
    the step, the parameter count and the trial key.

    A non-finite value (weights can go NaN a step before the training loss shows it) is left
    out: ASHA and the searcher skip a report without their metric instead of ranking NaN; the
    trial's last report then carries its status."""
    metrics: dict[str, Any] = {
        tune_key(k): float(v)
        for k, v in trainer.callback_metrics.items()
        if math.isfinite(float(v))
    }
    metrics[Report.STEP] = trainer.global_step
    metrics[Report.PARAMS] = float(sum(p.numel() for p in module.parameters()))
    metrics[Report.KEY] = key
    return metrics


def save_marked(trainer: L.Trainer, folder: Path, key: str) -> None:
    """The Lightning checkpoint (every rank calls it; rank 0 writes), marked with the trial's
    key and step so a later invocation finds it (``nas.trial.checkpoints``)."""
    trainer.save_checkpoint(folder / CKPT_NAME, weights_only=False)
    if trainer.is_global_zero:
        write_mark(folder, key, trainer.global_step)


class TuneReporter(L.Callback):
    """After each validation: a marked checkpoint and the metrics to Tune."""

    def __init__(self, key: str) -> None:
        self.key = key

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        from ray import tune

        metrics = validation_report(trainer, pl_module, self.key)
        with tempfile.TemporaryDirectory() as tmp:
            save_marked(trainer, Path(tmp), self.key)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(tmp))


class ValidationReporter(L.Callback):
    """After each validation: its metrics to ``send``, with no checkpoint."""

    def __init__(self, key: str, send: Callable[[dict[str, Any]], None]) -> None:
        self.key, self.send = key, send

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.send(validation_report(trainer, pl_module, self.key))


class TrainReporter(L.Callback):
    """After each validation, every worker: the trial's marked checkpoint (a collective save
    that rank 0 writes) and the report a single-device trial gives Tune, to Ray Train, with
    rank 0's checkpoint (a report is a barrier: every rank reports as often as the others).
    Outside a sweep the key is empty."""

    def __init__(self, key: str = "") -> None:
        self.key = key

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        import ray.train

        metrics = validation_report(trainer, pl_module, self.key)
        with tempfile.TemporaryDirectory() as tmp:
            save_marked(trainer, Path(tmp), self.key)
            checkpoint = None
            if trainer.is_global_zero:
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report(metrics, checkpoint=checkpoint)
