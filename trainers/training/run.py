"""Train one configuration end to end: the function ``nas train`` and each sweep trial call."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from record.schema import Metric
from trainers.budget import resolve_budget
from trainers.config import AUTO, RunConfig, TrainConfig, micro_batch_of
from trainers.data import DataSource

if TYPE_CHECKING:
    from torch import nn

    from trainers.measure.decode_cost import DecodeCost
    from trainers.measure.device_cost import Cost
    from trainers.training.divergence import DivergenceGuard, TimeLimit
    from trainers.training.paths import Paths


# How a run ended: trained to max_steps, or stopped early by trainers.training.divergence.
RunStatus = Literal["finished", "diverged", "timed_out"]


@dataclass(frozen=True)
class TrainResult:
    """Final validation metrics of one run. ``tokens_per_s`` counts the training tokens of this
    process's steps (``timed_steps``) over the wall time of its fit, validation included (NaN
    when it trained none).

    A run that ended early (``status`` "diverged" or "timed_out") ran no final validation: its
    ``val_loss`` and ``val_bpb`` are those of its last validation that came out finite (NaN and
    None if none did), ``steps`` = ``stop_step`` is the step it ended at, and ``reason`` says
    why in one line."""

    val_loss: float
    val_bpb: float | None
    steps: int
    params: int
    wall_s: float
    tokens_per_s: float
    step_s: float = 0.0  # of wall_s, the time inside training steps (this process's steps)
    first_step_s: float = 0.0  # of step_s, the first step's: a compiled run's compilation with it
    timed_steps: int = 0  # the steps this process trained: all of them unless resumed
    flops_per_token: int = 0  # training FLOPs per token (trainers.flops), the wiring's included
    train_flops: int = 0  # flops_per_token times the tokens of the ``steps`` trained
    cost: Cost | None = (
        None  # peak memory, MFU, devices (trainers.measure.device_cost); None: unmeasured
    )
    device: str = ""  # the torch device Lightning trained on (cpu, cuda:0, ...), as torch saw it
    dilution: dict[str, float] = field(default_factory=dict)  # the last profile's summaries
    status: RunStatus = "finished"
    reason: str = ""  # one line: why it diverged or timed out ("" when finished)
    # one line naming the depth-softmax sites that collapsed, and by which step
    # (stats.routing.RoutingAlarm, train.routing_alarm); "" when none did
    routing_alarm: str = ""
    stop_step: int | None = None  # the step it diverged or timed out at
    # greedy decoding with the KV cache after training (trainers.measure.decode_cost); None:
    # unmeasured
    decode: DecodeCost | None = None
    # compiled or eager, and which implementation mixed depth, with the kernel packages'
    # versions (trainers.training.paths); None: unrecorded
    paths: Paths | None = None
    # how each step ran: train.micro_batch and train.checkpointing as trained ('auto' resolved
    # for the device: trainers.measure.memory_fit.resolve_auto)
    micro_batch: int = 0
    checkpointing: str = "none"

    def to_json(self) -> str:
        """Strict JSON: NaN and infinities (a diverged run's values) as null."""
        return json.dumps(_jsonable(asdict(self)), indent=2, allow_nan=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def resolve_precision(t: TrainConfig) -> str:
    """bf16-mixed on a GPU, 32-bit on a CPU, unless the config names one."""
    if t.precision != "auto":
        return t.precision
    from trainers.measure.device_cost import training_device

    return "bf16-mixed" if training_device(t.accelerator) == "cuda" else "32-true"


def resolve_compile(t: TrainConfig) -> bool:
    """Whether training compiles the model: as ``train.compile`` says, and for 'auto' on a GPU
    only (a CPU trial rarely trains long enough to win back its compilation), unless the fused
    depth kernels are pinned (``train.depth_path=fused``), which run eagerly."""
    if t.compile != "auto":
        return t.compile == "true"
    from trainers.measure.device_cost import training_device

    return training_device(t.accelerator) == "cuda" and t.depth_path != "fused"


def fit_micro_batch(
    cfg: RunConfig, workers: int = 1, sharded: bool = False, device_bytes: int | None = None
) -> RunConfig:
    """``cfg`` with ``train.micro_batch=auto`` resolved on the device it trains on (its memory,
    or ``device_bytes`` where the caller states it; ``trainers.measure.device_memory``), over
    ``workers`` data-parallel workers; ValueError, one line, when nothing fits."""
    if cfg.train.micro_batch != AUTO:
        return cfg
    from trainers.measure.device_memory import device_memory
    from trainers.measure.memory_fit import resolve_auto

    memory, room, gpu = device_memory(cfg.train.accelerator, device_bytes)
    return resolve_auto(cfg, memory, room, workers, sharded, gpu)


def _dilution_callback(cfg: RunConfig, data: Any, out_dir: Path, sharded: bool = False) -> Any:
    """The profile callback on the first ``diagnostics_batch`` validation sequences (fixed, so
    profiles from every validation and every trial are comparable), or None when off. A
    sharded model is profiled on a full copy (``trainers.training.sharding.full_copy``)."""
    if not cfg.train.diagnostics_every:
        return None
    import torch

    from trainers.training.callbacks import DilutionCallback

    val = data.source.val_set(cfg.model.seq_len, cfg.train.diagnostics_batch)
    xs, ys = zip(*(val[i] for i in range(len(val))), strict=True)
    batch = (torch.stack(xs), torch.stack(ys))
    from stats.routing import RoutingAlarm

    t = cfg.train
    alarm = RoutingAlarm(t.routing_alarm)
    from trainers.training.sharding import full_copy

    folder = out_dir / "dilution"
    every, removal = t.diagnostics_every, t.diagnostics_removal
    gather = full_copy if sharded else None
    return DilutionCallback(
        batch, folder, every, removal, alarm, gather, importance=t.diagnostics_importance
    )


def train(
    cfg: RunConfig,
    out_dir: Path,
    source: DataSource | None = None,
    callbacks: Sequence[Any] = (),
    logger: Any = None,
    progress: bool = True,
    ckpt_path: Path | None = None,
    time_limit_s: float | None = None,
    peak_flops: float | None = None,
    strategy: Any = None,
    plugins: Sequence[Any] = (),
    workers: int = 1,
    device_bytes: int | None = None,
) -> tuple[TrainResult, nn.Module]:
    """Fit ``cfg``; return the final validation metrics and the trained ``DeepTransformer``.
    Writes Lightning's logs (CSV by default) under ``out_dir``; the caller owns everything else
    written there. The run ends early, without raising, when its training loss diverges
    (``train.divergence_factor``) or when ``time_limit_s`` seconds of the fit have passed; the
    result's ``status`` says so. ``peak_flops`` (FLOP/s) replaces the device's peak in the
    result's MFU (``trainers.measure.device_cost``).

    ``strategy`` and ``plugins`` (Lightning's) train data-parallel over the processes they
    name (``nas.trial.data_parallel`` passes Ray Train's DDP): ``train.batch_size`` stays the global
    batch, each rank taking an equal share of every step's sequences; the dilution profile
    runs on rank 0 only. ``workers`` counts them, for ``train.micro_batch=auto``, which is
    resolved on this device (``fit_micro_batch``; ``device_bytes``: the memory the caller plans
    one device with)."""
    if resolve_budget(cfg) != cfg:  # a budget trains its own length, never max_steps' default
        raise ValueError(
            "train: the configuration's budget is not resolved; build it with "
            "trainers.budget.resolve_budget (nas train and every sweep trial do)"
        )
    import lightning as L

    from trainers.data.module import LMDataModule
    from trainers.flops import flops_per_token, train_flops
    from trainers.measure.device_cost import CostMeter
    from trainers.model.transformer import num_params
    from trainers.training.callbacks import LastFiniteValidation
    from trainers.training.module import LanguageModelModule
    from trainers.training.paths import pin, taken, where
    from trainers.training.resume import current
    from trainers.training.sharding import ShardedModule
    from trainers.training.step_timer import StepTimer

    sharded = _sharded(strategy)
    cfg = fit_micro_batch(cfg, workers, sharded, device_bytes)
    t = cfg.train
    L.seed_everything(t.seed, workers=True, verbose=False)
    data = LMDataModule(cfg, source)
    module = (ShardedModule if sharded else LanguageModelModule)(cfg, data.source.bytes_per_token)
    device, dtype = where(t)
    # 'auto' leaves a sharded model eager: compiling before FSDP2 shards it is untried here
    compiled = resolve_compile(t) and not (sharded and t.compile == "auto")
    pin(module.model, cfg, device, dtype)  # before compiling: the graph keeps the path it traced
    if compiled:
        module.compile_model()
    stops = _early_stops(t, time_limit_s)
    last_val = LastFiniteValidation(Metric.VAL_LOSS)
    timer = StepTimer()
    meter = CostMeter(t.accelerator, resolve_precision(t), peak_flops)
    dilution = _dilution_callback(cfg, data, out_dir, sharded)
    # The run's own callbacks before the caller's: a caller's callback that checkpoints at a
    # validation (the sweep's) then saves their state as it is after that validation.
    every = [*stops, last_val, *callbacks, timer, meter.monitor]
    trainer = _trainer(cfg, out_dir, every, logger, progress, strategy, plugins)
    # measured once, on rank 0: every rank holds the same model (a sharded one is gathered from
    # every rank, which all take part)
    if dilution and (trainer.is_global_zero or sharded):
        trainer.callbacks.append(dilution)
    meter.start()
    start = time.perf_counter()
    # A resumed trial's checkpoint is loaded with weights_only: it holds tensors and plain data;
    # an old one is upgraded first, whichever strategy then loads it.
    resume = None if ckpt_path is None else current(ckpt_path, out_dir)
    try:
        trainer.fit(module, datamodule=data, ckpt_path=resume, weights_only=True)
    finally:
        if resume is not None and resume != ckpt_path:
            resume.unlink(missing_ok=True)
    stop = next((s.stop for s in stops if s.stop is not None), None)
    if stop is None and trainer.global_step % t.val_every:  # the last step was not a validation
        trainer.validate(module, datamodule=data, verbose=False)
    wall = time.perf_counter() - start
    # After the fit's clock: a few dozen decoded tokens, on the model as it ended. Rank 0 alone,
    # whose result is the record's (nas.trial.data_parallel): ranks timing at once on shared cores
    # would each measure the others' load.
    bf16 = resolve_precision(t).startswith("bf16")
    decode = _decode(module.model, trainer, bf16, sharded)
    per_token, seq = flops_per_token(cfg.model).total, cfg.model.seq_len
    per_rank = t.batch_size // trainer.world_size
    timed = len(timer.durations)  # the steps this process trained (and timed)
    metrics = last_val.metrics if stop else _floats(trainer.callback_metrics)
    result = TrainResult(
        val_loss=metrics.get(Metric.VAL_LOSS, math.nan),
        val_bpb=metrics.get(Metric.VAL_BPB),
        steps=trainer.global_step,
        params=num_params(module.model),
        wall_s=wall,
        # this process's steps: a resumed trial's global_step counts earlier attempts' too
        tokens_per_s=_rate(timed * t.batch_size * cfg.model.seq_len, wall, timed),
        timed_steps=timed,
        step_s=timer.total_s,
        first_step_s=timer.durations[0] if timer.durations else 0.0,
        device=str(trainer.strategy.root_device),
        flops_per_token=per_token,
        train_flops=train_flops(cfg.model, trainer.global_step, t.batch_size),
        dilution=dilution.last.summaries() if dilution and dilution.last else {},
        routing_alarm=dilution.alarm.message() if dilution and dilution.alarm else "",
        # the steps this process trained (a resumed run's global_step counts earlier ones), on
        # this rank's share of each batch
        cost=meter.finish(_rate(per_token * timed * per_rank * seq, wall, timed)),
        decode=decode,
        paths=taken(module.model, device, dtype, compiled),
        micro_batch=micro_batch_of(t) or t.batch_size // workers,
        checkpointing=t.checkpointing,
    )
    if stop is not None:
        result = replace(result, status=stop.status, reason=stop.reason, stop_step=stop.step)
    return result, module.model


def _sharded(strategy: Any) -> bool:
    """Whether ``strategy`` shards the model: Lightning's FSDP2 strategy shards in the module's
    ``configure_model`` hook, which the plain module lacks (Lightning refuses it)."""
    if strategy is None:
        return False
    from lightning.pytorch.strategies import ModelParallelStrategy

    return isinstance(strategy, ModelParallelStrategy)


def _decode(model: nn.Module, trainer: Any, bf16: bool, sharded: bool) -> DecodeCost | None:
    """Decode cost on rank 0 (None elsewhere); of a sharded model, on its full copy, which
    every rank helps gather; None if the copy does not fit on the device it trained on (a CPU
    figure would read as the device's)."""
    from trainers.measure.decode_cost import measure

    if sharded:
        from trainers.training.sharding import full_copy

        device = trainer.strategy.root_device
        copy = full_copy(model, device)
        on_device = copy is not None and next(copy.parameters()).device.type == device.type
        return measure(copy, bf16=bf16) if copy is not None and on_device else None
    return measure(model, bf16=bf16) if trainer.is_global_zero else None  # type: ignore[arg-type]


def _rate(amount: float, wall: float, timed: int) -> float:
    """``amount`` per second of the fit; NaN when this process trained no step (a trial
    resumed at its end): a rate over no training would read as a real, absurd figure."""
    return amount / wall if timed and wall > 0 else math.nan


def _early_stops(t: TrainConfig, time_limit_s: float | None) -> list[DivergenceGuard | TimeLimit]:
    """The divergence guard, always (a NaN loss ends any run), and the time limit if one is set."""
    from trainers.training.divergence import DivergenceGuard, TimeLimit

    stops: list[DivergenceGuard | TimeLimit] = [
        DivergenceGuard(t.divergence_factor, t.warmup_steps)
    ]
    if time_limit_s is not None:
        stops.append(TimeLimit(time_limit_s))
    return stops


def _trainer(
    cfg: RunConfig,
    out_dir: Path,
    callbacks: list[Any],
    logger: Any,
    progress: bool,
    strategy: Any = None,
    plugins: Sequence[Any] = (),
) -> Any:
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger

    t = cfg.train
    return L.Trainer(
        accelerator=t.accelerator,
        # one device, or whatever the data-parallel strategy's environment names
        devices=1 if strategy is None else "auto",
        **({} if strategy is None else _parallel(strategy, plugins)),
        precision=resolve_precision(t),  # type: ignore[arg-type]
        max_steps=t.max_steps,
        val_check_interval=min(t.val_every, t.max_steps),
        check_val_every_n_epoch=None,
        limit_val_batches=t.val_batches,
        num_sanity_val_steps=0,
        # no gradient_clip_val: the module steps by hand and clips its accumulated gradient
        log_every_n_steps=t.log_every,
        logger=logger if logger is not None else CSVLogger(out_dir, name="", version=""),
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=progress,
        enable_model_summary=False,
        default_root_dir=out_dir,
        # The closing trainer.validate() (a run whose last step is no validation step) must let
        # the dilution profile take gradients; Lightning's inference mode would forbid it, as
        # it does not inside fit (whose validations run under no_grad).
        inference_mode=False,
    )


def _parallel(strategy: Any, plugins: Sequence[Any]) -> dict[str, Any]:
    """The Trainer's data-parallel arguments. The data module splits the data over the ranks
    itself: Lightning's own distributed sampler would shuffle the training sequences."""
    return {"strategy": strategy, "plugins": list(plugins), "use_distributed_sampler": False}


def _floats(metrics: Any) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items()}
