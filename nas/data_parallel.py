"""One configuration trained data-parallel over N Ray Train workers (N GPUs, or N CPU processes
talking gloo): ``trainers.run.train`` in every worker under Lightning's DDP strategy for Ray,
each worker taking an equal share of every step's global batch (``train.batch_size``).

The workers' averaged gradients are the gradient of the global batch: the run trains what one
process would on the same batch, up to the order of float sums (``tests/nas/test_data_parallel``
pins the loss curves together). Rank 0 alone writes (Lightning's loggers are rank-zero) and
measures the dilution profile; its result, with the devices of every worker counted, is the
run's.

After each validation the workers report a Lightning checkpoint to Ray Train together (rank 0's
file); when a worker dies, Ray Train starts the group again (``max_failures`` times) and every
worker resumes from the newest one.
"""

from __future__ import annotations

import pickle
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning as L

from nas.checkpoints import CKPT_NAME
from trainers.config import RunConfig
from trainers.run import TrainResult

RESULT_NAME = "train-result.pkl"  # rank 0's TrainResult, in the run's one reported checkpoint


def check_split(cfg: RunConfig, workers: int) -> None:
    """ValueError unless ``workers`` is at least 1 and divides the global batch."""
    if workers < 1:
        raise ValueError(f"workers: {workers} must be at least 1")
    if cfg.train.batch_size % workers:
        raise ValueError(
            f"train.batch_size: {cfg.train.batch_size} does not split evenly over {workers} "
            "workers; data-parallel ranks each take an equal share of every batch"
        )


def train_data_parallel(
    cfg: RunConfig,
    out_dir: Path,
    workers: int,
    use_gpu: bool = False,
    time_limit_s: float | None = None,
    peak_flops: float | None = None,
    ckpt_path: Path | None = None,
    max_failures: int = 0,
) -> TrainResult:
    """Fit ``cfg`` over ``workers`` Ray Train workers of the Ray this process is connected to,
    from ``ckpt_path`` if given, starting the workers again from their newest checkpoint up to
    ``max_failures`` times when one fails. Rank 0's Lightning logs go under ``out_dir``, as do
    Ray Train's own files (``ray-train``); both paths must be on storage every worker's node
    reaches."""
    from ray.train import FailureConfig, ScalingConfig
    from ray.train import RunConfig as TrainRunConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    check_split(cfg, workers)
    loop_config = {
        "cfg": cfg,
        "out_dir": str(out_dir),
        "time_limit_s": time_limit_s,
        "peak_flops": peak_flops,
        "ckpt_path": None if ckpt_path is None else str(ckpt_path),
    }
    trainer = TorchTrainer(
        _worker,
        train_loop_config=loop_config,
        scaling_config=ScalingConfig(num_workers=workers, use_gpu=use_gpu),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        run_config=TrainRunConfig(
            name="train",
            storage_path=str(out_dir / "ray-train"),
            failure_config=FailureConfig(max_failures=max_failures),
        ),
    )
    outcome = trainer.fit()
    if outcome.checkpoint is None:
        raise RuntimeError("data-parallel training ended without rank 0's result")
    with outcome.checkpoint.as_directory() as folder:
        result: TrainResult = pickle.loads((Path(folder) / RESULT_NAME).read_bytes())
    if result.cost is not None:  # every worker held its devices for the whole fit
        result = replace(result, cost=replace(result.cost, devices=result.cost.devices * workers))
    return result


def _worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: the shared ``train`` under Ray's DDP; rank 0 hands its result back
    through the one checkpoint every rank reports together (a report is a barrier)."""
    import ray.train
    from ray.train.lightning import RayDDPStrategy, RayLightningEnvironment

    from trainers.run import train

    # find_unused_parameters: a wiring may hold parameters that a configuration leaves out of
    # the graph (DDP otherwise waits for their gradients and fails at the next step)
    strategy = RayDDPStrategy(find_unused_parameters=True)
    with tempfile.TemporaryDirectory() as resume:
        result, _ = train(
            config["cfg"],
            Path(config["out_dir"]),
            callbacks=[TrainReporter()],
            progress=False,
            ckpt_path=_resume_from(Path(resume), config["ckpt_path"]),
            time_limit_s=config["time_limit_s"],
            peak_flops=config["peak_flops"],
            strategy=strategy,
            plugins=[RayLightningEnvironment()],
        )
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = None
        if ray.train.get_context().get_world_rank() == 0:
            (Path(tmp) / RESULT_NAME).write_bytes(pickle.dumps(result))
            checkpoint = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report({"steps": result.steps}, checkpoint=checkpoint)


def _resume_from(dest: Path, given: str | None) -> Path | None:
    """Ray Train's newest reported checkpoint (the group was started again after a failure),
    copied into ``dest``; else the checkpoint the caller gave; else None (from scratch)."""
    import ray.train

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return None if given is None else Path(given)
    with checkpoint.as_directory() as folder:
        (dest / CKPT_NAME).write_bytes((Path(folder) / CKPT_NAME).read_bytes())
    return dest / CKPT_NAME


class TrainReporter(L.Callback):
    """After each validation, every worker: a Lightning checkpoint (a collective save that
    rank 0 writes) and one report to Ray Train with the metrics and rank 0's checkpoint (a
    report is a barrier: every rank reports as often as the others)."""

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        import ray.train

        metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
        metrics["step"] = trainer.global_step
        with tempfile.TemporaryDirectory() as tmp:
            trainer.save_checkpoint(Path(tmp) / CKPT_NAME, weights_only=False)
            checkpoint = None
            if trainer.is_global_zero:
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report(metrics, checkpoint=checkpoint)
