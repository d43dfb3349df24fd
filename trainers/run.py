"""Train one configuration end to end: the function ``nas train`` and each sweep trial call."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainers.config import RunConfig, TrainConfig
from trainers.data import DataSource

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True)
class TrainResult:
    """Final validation metrics of one run. ``tokens_per_s`` counts training tokens over the
    wall time of the whole fit, validation included."""

    val_loss: float
    val_bpb: float | None
    steps: int
    params: int
    wall_s: float
    tokens_per_s: float
    step_s: float = 0.0  # of wall_s, the time inside training steps (this process's steps)
    dilution: dict[str, float] = field(default_factory=dict)  # the last profile's summaries

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def resolve_precision(t: TrainConfig) -> str:
    """bf16-mixed on a GPU, 32-bit on a CPU, unless the config names one."""
    if t.precision != "auto":
        return t.precision
    import torch

    gpu = torch.cuda.is_available() and t.accelerator in ("auto", "gpu", "cuda")
    return "bf16-mixed" if gpu else "32-true"


def _dilution_callback(cfg: RunConfig, data: Any, out_dir: Path) -> Any:
    """The profile callback on the first ``diagnostics_batch`` validation sequences (fixed, so
    profiles from every validation and every trial are comparable), or None when off."""
    if not cfg.train.diagnostics_every:
        return None
    import torch

    from trainers.callbacks import DilutionCallback

    val = data.source.val_set(cfg.model.seq_len, cfg.train.diagnostics_batch)
    xs, ys = zip(*(val[i] for i in range(len(val))), strict=True)
    batch = (torch.stack(xs), torch.stack(ys))
    t = cfg.train
    return DilutionCallback(batch, out_dir / "dilution", t.diagnostics_every, t.diagnostics_removal)


def train(
    cfg: RunConfig,
    out_dir: Path,
    source: DataSource | None = None,
    callbacks: Sequence[Any] = (),
    logger: Any = None,
    progress: bool = True,
    ckpt_path: Path | None = None,
) -> tuple[TrainResult, nn.Module]:
    """Fit ``cfg``; return the final validation metrics and the trained ``DeepTransformer``. Writes Lightning's logs (CSV by
    default) under ``out_dir``; the caller owns everything else written there."""
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    from trainers.datamodule import LMDataModule
    from trainers.model import num_params
    from trainers.module import LanguageModelModule
    from trainers.step_timer import StepTimer

    t = cfg.train
    L.seed_everything(t.seed, workers=True, verbose=False)
    data = LMDataModule(cfg, source)
    module = LanguageModelModule(cfg, data.source.bytes_per_token)
    if t.compile:
        module.model.compile()  # nn.Module.compile: in place, so checkpoints keep their keys
    timer = StepTimer()
    callbacks = [*callbacks, timer]
    dilution = _dilution_callback(cfg, data, out_dir)
    if dilution is not None:
        callbacks.append(dilution)
    trainer = L.Trainer(
        accelerator=t.accelerator,
        devices=1,
        precision=resolve_precision(t),  # type: ignore[arg-type]
        max_steps=t.max_steps,
        val_check_interval=min(t.val_every, t.max_steps),
        check_val_every_n_epoch=None,
        limit_val_batches=t.val_batches,
        num_sanity_val_steps=0,
        gradient_clip_val=t.grad_clip or None,
        log_every_n_steps=t.log_every,
        logger=logger if logger is not None else CSVLogger(out_dir, name="", version=""),
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=progress,
        enable_model_summary=False,
        default_root_dir=out_dir,
    )
    start = time.perf_counter()
    # A resumed trial's checkpoint is loaded with weights_only: it holds tensors and plain data.
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path, weights_only=True)
    if trainer.global_step % t.val_every:  # the last step was not a validation step
        trainer.validate(module, datamodule=data, verbose=False)
    wall = time.perf_counter() - start
    metrics = trainer.callback_metrics
    bpb = metrics.get("val/bpb")
    result = TrainResult(
        val_loss=float(metrics["val/loss"]),
        val_bpb=None if bpb is None else float(bpb),
        steps=trainer.global_step,
        params=num_params(module.model),
        wall_s=wall,
        tokens_per_s=trainer.global_step * t.batch_size * cfg.model.seq_len / wall,
        step_s=timer.total_s,
        dilution=dilution.last.summaries() if dilution and dilution.last else {},
    )
    return result, module.model
