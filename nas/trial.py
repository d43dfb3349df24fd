"""One sweep trial inside a Ray Tune worker: build the configuration, find or open its MLflow run,
train with Lightning (resuming from Tune's checkpoint after a failure), and report every
validation to Tune with a checkpoint."""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nas.tracking import SweepRecord, TrialRun

CKPT_NAME = "last.ckpt"


@dataclass(frozen=True)
class SweepContext:
    """What every trial needs besides its own point; plain data, so it pickles to workers."""

    record: SweepRecord
    base: dict[str, dict[str, Any]]  # the base RunConfig as nested dicts
    cells: list[dict[str, Any]] = field(default_factory=list)  # grid: cell -> point (+ seed)
    arms: list[str] = field(default_factory=list)  # grid: cell -> arm label
    seed: int = 0  # search trials: the seed they run with
    tags: dict[str, str] = field(default_factory=dict)
    # searches: each objective's worst value, reported for an infeasible proposal
    worst: dict[str, float] = field(default_factory=lambda: {"val_loss": math.inf})


def _point(config: dict[str, Any], ctx: SweepContext) -> tuple[str, str, dict[str, Any]]:
    """(trial key, arm label, dotted point) for this trial. Grid cells have stable keys, so a
    resumed sweep finds each cell's run again; a search trial is keyed by Tune's trial id."""
    from ray import tune

    if "cell" in config:
        i = int(config["cell"])
        return f"cell-{i:05d}", ctx.arms[i], ctx.cells[i]
    point = {**config, "train.seed": ctx.seed}
    return tune.get_context().get_trial_id(), "search", point


def run_trial(config: dict[str, Any], ctx: SweepContext) -> None:
    """The function trainable."""
    from ray import tune

    from search_spaces.space import apply_point
    from trainers.config import flatten
    from trainers.config_io import from_dict

    start = time.perf_counter()
    key, arm, point = _point(config, ctx)
    tags = {
        "nas.trial_id": tune.get_context().get_trial_id(),
        "nas.arm": arm,
        "nas.node": _node_id(),
        **ctx.tags,
    }
    try:
        cfg = apply_point(from_dict(ctx.base), point)
    except ValueError as err:  # a sampler proposed an invalid combination: no training spent
        _infeasible(ctx, key, point, tags, str(err))
        return
    tags["nas.seed"] = str(cfg.train.seed)
    tags["nas.hardware"] = _hardware()
    run = TrialRun(ctx.record, key, flatten(cfg), tags)
    out = Path(tune.get_context().get_trial_dir())
    try:
        result = _fit(cfg, out, run)
    except BaseException:
        run.end("FAILED")
        raise
    final = {
        "final/val_loss": result.val_loss,
        "final/wall_s": result.wall_s,  # the fit
        "final/step_s": result.step_s,  # inside training steps
        "final/trial_s": time.perf_counter() - start,  # the whole trial function
        "final/tokens_per_s": result.tokens_per_s,
        "final/params": float(result.params),
    }
    run.log_metrics(final, result.steps)
    run.end("FINISHED")  # before the last report: Ray may end the worker right after it
    report = {"val_loss": result.val_loss, "params": float(result.params), "step": result.steps}
    if result.val_bpb is not None:
        report["val_bpb"] = result.val_bpb
    tune.report({**report, "nas_complete": 1.0})  # the searcher reads its objectives here


def _hardware() -> str:
    """What this trial trains on, in words (the report's provenance)."""
    import os
    import platform

    import torch

    if torch.cuda.is_available():
        return f"GPU {torch.cuda.get_device_name(0)}"
    return f"CPU {platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} threads"


def _node_id() -> str:
    """The Ray node the trial runs on (the cluster test checks trials spread over nodes)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def _infeasible(
    ctx: SweepContext, key: str, point: dict[str, Any], tags: dict[str, str], reason: str
) -> None:
    """Record the proposal with its reason and tell the searcher at once: the worst value for
    every objective, so it learns to avoid the region, and a flag the summary lists."""
    from ray import tune

    run = TrialRun(ctx.record, key, point, {**tags, "nas.infeasible": reason})
    run.end("FINISHED")
    flags = {"step": 0, "nas_complete": 1.0, "nas_infeasible": 1.0, "nas_reason": reason}
    tune.report({**ctx.worst, **flags})


def _fit(cfg: Any, out: Path, run: TrialRun) -> Any:
    from ray import tune

    from nas.lightning_hooks import TrialLogger, TuneReporter
    from trainers.run import train

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        result, _ = train(
            cfg, out, logger=TrialLogger(run), callbacks=[TuneReporter()], progress=False
        )
        return result
    with checkpoint.as_directory() as folder, tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / CKPT_NAME  # copied out: the checkpoint folder may be read-only
        ckpt.write_bytes((Path(folder) / CKPT_NAME).read_bytes())
        result, _ = train(
            cfg,
            out,
            logger=TrialLogger(run),
            callbacks=[TuneReporter()],
            progress=False,
            ckpt_path=ckpt,
        )
    return result
