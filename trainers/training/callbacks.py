"""Lightning callbacks: the dilution profile on a fixed held-out batch at validation time, and
the metrics of the last validation that came out finite."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import lightning as L
import torch
from torch import Tensor, nn

from stats.routing import RoutingAlarm
from trainers.config import ROUTING_ALARM
from trainers.measure.diagnostics import DilutionProfile, dilution_profile
from trainers.measure.dilution_plot import save_profile
from trainers.model.transformer import DeepTransformer


class DilutionCallback(L.Callback):
    """Every ``every``-th validation and the last: profile the model on ``batch``, log the
    summaries as metrics at the current step, and save the per-layer profile under ``folder``
    (JSON every time; the PNG figure for the last profile only, since drawing it costs about as
    much as the profile itself), also through the logger when it takes files (in a sweep: as
    artifacts of the trial's MLflow run). Each profile is also shown to ``alarm``, which keeps
    the first step each depth-softmax site collapsed at (``stats.routing``).

    ``gather`` (a sharded model's, ``trainers.training.sharding.full_copy``): the model to profile
    made from the trained one and the device, on every rank (a collective), None on all but the one
    that profiles; by default the trained model itself. ``importance``: the last profile also
    measures each depth-mixing source's causal importance (``train.diagnostics_importance``)."""

    def __init__(
        self,
        batch: tuple[Tensor, Tensor],
        folder: Path,
        every: int = 1,
        removal: bool = False,
        alarm: RoutingAlarm | None = None,
        gather: Callable[[nn.Module, torch.device], DeepTransformer | None] | None = None,
        importance: bool = False,
    ) -> None:
        self.batch, self.folder, self.every, self.removal = batch, folder, every, removal
        self.alarm, self.gather, self.importance = alarm, gather, importance
        self.validations = 0
        self.last: DilutionProfile | None = None
        self.last_files: list[Path] = []

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self.validations += 1
        final = trainer.global_step >= (trainer.max_steps or 0) > 0
        if (self.validations - 1) % self.every and not final:
            return
        model = self._profiled(pl_module)
        if model is None:  # a rank that helped gather a sharded model's copy
            return
        if any(p.dtype != torch.float32 for p in model.parameters()):
            model = copy.deepcopy(model).float()  # the profile is computed in float32
        device = next(model.parameters()).device
        idx, targets = (t.to(device) for t in self.batch)
        importance = self.importance and final
        threshold = self.alarm.threshold if self.alarm is not None else ROUTING_ALARM
        last = dilution_profile(model, idx, targets, self.removal, importance, threshold)
        self.last = last
        if self.alarm is not None:
            # the spread and the collapsed share are NaN but for a softmax: free weights are
            # not watched
            self.alarm.observe(
                last.routing_top1,
                last.routing_spread,
                last.depth_weights,
                trainer.global_step,
                last.routing_collapsed,
            )
        # A model gone non-finite gives NaN summaries: the JSON keeps them (as null), the metric
        # record stays finite.
        pl_module.log_dict({k: v for k, v in self.last.summaries().items() if math.isfinite(v)})
        stem = f"step-{trainer.global_step:06d}"
        title = f"{model.cfg.residual}/{model.cfg.placement}, step {trainer.global_step}"
        self.last_files = save_profile(self.last, self.folder, stem, title, figure=final)
        _log_artifacts(trainer.logger, self.last_files)

    def _profiled(self, pl_module: L.LightningModule) -> DeepTransformer | None:
        if self.gather is None:
            return cast(DeepTransformer, pl_module.model)
        return self.gather(cast(nn.Module, pl_module.model), pl_module.device)

    # Kept in checkpoints: a resumed run still counts its validations from the start (the
    # profile cadence) and still names the sites that collapsed before the checkpoint.
    def state_dict(self) -> dict[str, Any]:
        alarm = [] if self.alarm is None else self.alarm.rows()
        return {"validations": self.validations, "alarm": alarm}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.validations = int(state_dict["validations"])
        if self.alarm is not None:
            self.alarm.restore(state_dict["alarm"])


class LastFiniteValidation(L.Callback):
    """The callback metrics (floats) after the last validation whose ``key`` came out finite:
    what a run that ends early reports, since its latest validation may have measured a model
    already gone NaN. Kept in checkpoints, so a resumed run that diverges before its next
    validation still reports the one before the checkpoint."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.metrics: dict[str, float] = {}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.key)
        if value is not None and math.isfinite(float(value)):
            self.metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"metrics": dict(self.metrics)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.metrics = dict(state_dict["metrics"])


def _log_artifacts(logger: Any, files: list[Path]) -> None:
    """Hand the files to the logger if it takes files (the sweep's MLflow logger does)."""
    log_files = getattr(logger, "log_files", None)
    if callable(log_files):
        log_files(files)
