"""One configuration trained data-parallel over N Ray Train workers (N GPUs, or N CPU processes
talking gloo): ``trainers.training.run.train`` in every worker under Lightning's DDP strategy for
Ray, each worker taking an equal share of every step's global batch (``train.batch_size``).

The workers' averaged gradients are the gradient of the global batch: the run trains what one
process would on the same batch, up to the order of float sums (``tests/nas/test_data_parallel``
pins the loss curves together). Rank 0 alone writes (Lightning's loggers are rank-zero) and
measures the dilution profile; its result, with the devices of every worker counted, is the
run's.

After each validation the workers report a Lightning checkpoint to Ray Train together (rank 0's
file). A worker that dies fails the fit (Ray Train does not restart the group itself): the
caller starts it again from the newest checkpoint, as a sweep's trial does through Tune's retry
(``nas.trial.run``), so that one mechanism, the same as a single-device trial's, resumes both.

With ``Workers(strategy="fsdp")`` the model is sharded instead of replicated (FSDP2, each
Transformer block one unit: ``trainers.training.sharding``, ``nas.trial.fsdp_strategy``), for a model
larger than one device's memory: the same math, record and checkpoints (gathered whole by rank 0).

In a sweep (``nas sweep --workers-per-trial N``) the fit is tied to its trial (``TrialLink``):
rank 0 writes the MLflow run the trial process opened and will end, the checkpoints carry the
trial's key and lie where ``nas.trial.checkpoints`` looks for them, and every validation reaches
Tune (ASHA, the searcher, the time budget) through Ray Train's ``TuneReportCallback``.
"""

from __future__ import annotations

import pickle
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from nas.store.tracking import SweepRecord, TrialRun
from nas.trial.checkpoints import CKPT_NAME
from trainers.config import AUTO, RunConfig, micro_steps
from trainers.measure.memory_fit import whole_share

if TYPE_CHECKING:  # torch: not for the driver, which imports this for the plan's checks
    from trainers.training.run import TrainResult

RESULT_NAME = "train-result.pkl"  # rank 0's TrainResult, in the run's one reported checkpoint

# ddp: every worker holds the whole model; fsdp: each holds a 1/N shard of every block
Strategy = Literal["ddp", "fsdp"]
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)


@dataclass(frozen=True)
class Workers:
    """A data-parallel group: how many workers, what each one reserves, and whether they
    replicate the model or shard it. ValueError for an unknown strategy, or sharding over
    fewer than two workers (nothing to shard over)."""

    count: int
    cpus: float = 1.0
    gpus: float = 0.0  # > 0: each worker trains on a GPU (fractions share one)
    strategy: Strategy = "ddp"

    def __post_init__(self) -> None:
        check_strategy(self.strategy, self.count)


def check_strategy(strategy: str, workers: int, name: str = "strategy") -> None:
    """ValueError, naming the choices, unless ``strategy`` is one and fits ``workers``;
    ``name`` is what the message calls it (the CLI's flag)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"{name} {strategy}: unknown; choose from {', '.join(STRATEGIES)}")
    if strategy == "fsdp" and workers < 2:
        raise ValueError(
            f"{name} fsdp: shards the model over the workers, so needs at least 2 (not {workers})"
        )


@dataclass(frozen=True)
class TrialLink:
    """What ties a data-parallel fit to its sweep trial (plain data: it travels to workers)."""

    record: SweepRecord
    run_id: str  # the trial's run, opened by the trial process; rank 0 logs into it
    key: str  # the trial key: checkpoints are marked with it
    journal: str | None = None  # the trial's metric journal (``nas.store.outbox``)


def check_split(cfg: RunConfig, workers: int) -> None:
    """ValueError unless ``workers`` is at least 1 and splits the global batch into equal
    shares, each a whole number of micro-batches ('auto' picks a divisor of the share on the
    trial's device: only the split is checked)."""
    if workers < 1:
        raise ValueError(f"workers: {workers} must be at least 1")
    micro_steps((whole_share(cfg) if cfg.train.micro_batch == AUTO else cfg).train, workers)


def train_data_parallel(
    cfg: RunConfig,
    out_dir: Path,
    workers: Workers,
    time_limit_s: float | None = None,
    peak_flops: float | None = None,
    device_bytes: int | None = None,
    ckpt_path: Path | None = None,
    link: TrialLink | None = None,
    storage: Path | None = None,
) -> TrainResult:
    """Fit ``cfg`` over ``workers`` Ray Train workers of the Ray this process is connected to,
    from ``ckpt_path`` if given. Rank 0's Lightning logs go under ``out_dir``; Ray
    Train's own files and checkpoints under ``storage`` (default ``out_dir/ray-train/train``).
    Every worker must reach ``storage`` and ``ckpt_path``. With ``link``, the fit is a sweep
    trial's (this process is its Tune trial)."""
    from ray.train import FailureConfig, ScalingConfig
    from ray.train import RunConfig as TrainRunConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    check_split(cfg, workers.count)
    storage = storage or out_dir / "ray-train" / "train"
    loop_config = {
        "cfg": cfg,
        "out_dir": str(out_dir),
        "time_limit_s": time_limit_s,
        "peak_flops": peak_flops,
        "device_bytes": device_bytes,
        "ckpt_path": None if ckpt_path is None else str(ckpt_path),
        "link": link,
        "strategy": workers.strategy,
        "workers": workers.count,
    }
    use_gpu = workers.gpus > 0
    per_worker = {"CPU": workers.cpus, **({"GPU": workers.gpus} if use_gpu else {})}
    trainer = TorchTrainer(
        _worker,
        train_loop_config=loop_config,
        scaling_config=ScalingConfig(
            num_workers=workers.count, use_gpu=use_gpu, resources_per_worker=per_worker
        ),
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        run_config=TrainRunConfig(
            name=storage.name,
            storage_path=str(storage.parent),
            failure_config=FailureConfig(max_failures=0),
            callbacks=[] if link is None else _to_tune(),
        ),
    )
    outcome = trainer.fit()
    if outcome.checkpoint is None:
        raise RuntimeError("data-parallel training ended without rank 0's result")
    with outcome.checkpoint.as_directory() as folder:
        result: TrainResult = pickle.loads((Path(folder) / RESULT_NAME).read_bytes())
    if result.cost is not None:  # every worker held its devices for the whole fit
        result = replace(
            result, cost=replace(result.cost, devices=result.cost.devices * workers.count)
        )
    return result


def _to_tune() -> list[Any]:
    """Ray Train's callback that hands rank 0's reports to the Tune trial running this fit."""
    from ray.tune.integration.ray_train import TuneReportCallback

    return [TuneReportCallback()]


def _worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: the shared ``train`` under Ray's DDP or FSDP2; rank 0 hands its
    result back through the one checkpoint every rank reports together (a report is a
    barrier)."""
    import ray.train
    from ray.train.lightning import RayLightningEnvironment

    from nas.trial.lightning_hooks import TrainReporter, TrialLogger
    from trainers.training.run import train

    link: TrialLink | None = config["link"]
    rank = ray.train.get_context().get_world_rank()
    run = None
    if link is not None and rank == 0:  # MLflow is written from rank 0 only
        journal = None if link.journal is None else Path(link.journal)
        run = TrialRun.attach(link.record, link.run_id, journal)
    strategy = _strategy(config["strategy"], config["workers"])
    with tempfile.TemporaryDirectory() as resume:
        result, _ = train(
            config["cfg"],
            Path(config["out_dir"]),
            logger=None if run is None else TrialLogger(run),
            callbacks=[TrainReporter("" if link is None else link.key)],
            progress=False,
            ckpt_path=_resume_from(Path(resume), config["ckpt_path"]),
            time_limit_s=config["time_limit_s"],
            peak_flops=config["peak_flops"],
            strategy=strategy,
            workers=config["workers"],
            device_bytes=config["device_bytes"],
            plugins=[RayLightningEnvironment()],
        )
    if run is not None:
        run.flush()  # every step in the store before the trial process records the outcome
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = None
        if rank == 0:
            (Path(tmp) / RESULT_NAME).write_bytes(pickle.dumps(result))
            checkpoint = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report({"steps": result.steps}, checkpoint=checkpoint)


def _strategy(name: Strategy, workers: int) -> Any:
    """Lightning's strategy for ``name`` under Ray Train."""
    if name == "fsdp":
        from nas.trial.fsdp_strategy import RayFSDP2Strategy

        return RayFSDP2Strategy(workers)
    from ray.train.lightning import RayDDPStrategy

    # find_unused_parameters: a wiring may hold parameters that a configuration leaves out of
    # the graph (DDP otherwise waits for their gradients and fails at the next step)
    return RayDDPStrategy(find_unused_parameters=True)


def _resume_from(dest: Path, given: str | None) -> Path | None:
    """Ray Train's newest registered checkpoint of this run, copied into ``dest``: a run
    started again over the storage folder of an earlier attempt (a sweep trial's retry) finds
    that attempt's there. Else the checkpoint the caller gave; else None (from scratch)."""
    import ray.train

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return None if given is None else Path(given)
    with checkpoint.as_directory() as folder:
        (dest / CKPT_NAME).write_bytes((Path(folder) / CKPT_NAME).read_bytes())
    return dest / CKPT_NAME
