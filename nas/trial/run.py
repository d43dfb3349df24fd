"""One sweep trial on its host (a Ray Tune worker, ``nas.trial.host``): find its ``TrialSpec``,
find or open its MLflow run, train with Lightning (resuming from the newest checkpoint of its
key), and report every validation with a checkpoint; the last report carries the trial's status.

Tune carries only the trial key for a grid (``GRID_PARAM``) or the sampled point for a search;
everything else about the trial comes from the spec the driver built.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nas.campaign.kinds import Campaign
from nas.spec import TrialSpec, proposal_identity
from nas.store.outbox import TrackingOutage, journal_path
from nas.store.tracking import SweepRecord, TrialRun, recorded_trial
from nas.trial.checkpoints import CKPT_NAME, latest_checkpoints
from nas.trial.data_parallel import TrialLink, Workers, check_split
from nas.trial.host import TrialHost, TuneHost
from record.errors import first_line
from record.schema import SETTLED, Metric, Report, Status, Tag
from search_spaces.space import Space
from trainers.config import RunConfig

DEFERRED = "deferred"  # Report.STATUS of a trial not started because the time budget ran out


@dataclass(frozen=True)
class SweepContext:
    """What every trial needs besides its own Tune config; plain data, so it pickles to
    workers."""

    record: SweepRecord
    campaign: Campaign  # grid or search: which spec a Tune config is
    tags: Mapping[str, str] = field(default_factory=dict)
    # searches: each objective's Tune key -> its worst value, reported for an infeasible or
    # diverged trial so the searcher avoids the region
    worst: Mapping[str, float] = field(default_factory=dict)
    # key -> checkpoint files (newest first) written for it by earlier invocations
    resume_from: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    trial_timeout_s: float | None = None
    # --peak-flops: the FLOP/s a trial's MFU is measured against instead of its device's peak
    # (trainers.measure.device_cost); a fact about the machine, not the configuration: no hash has
    # it
    peak_flops: float | None = None
    deadline: float | None = None  # time.time() after which no trial starts (--time-budget)
    folder: str | None = None  # the sweep's storage folder: the trials' metric journals
    workers: Workers | None = None  # --workers-per-trial > 1: each trial's data-parallel group
    # the memory a trial's device lends it where the command states it (nas.sweep.plan.
    # stated_memory): what train.micro_batch=auto is resolved against; None: the device's own
    device_bytes: int | None = None

    @property
    def space(self) -> Space:
        return self.campaign.space

    @property
    def seed(self) -> int:
        """The seed a proposal runs with (a search's trials)."""
        return self.campaign.seed

    def journal(self, key: str) -> Path | None:
        return None if self.folder is None else journal_path(Path(self.folder), key)

    def spec_for(self, config: Mapping[str, Any]) -> TrialSpec:
        """The trial's spec from its Tune config; ValueError for a search point the
        configuration rejects, or whose batch does not split over the trial's workers."""
        spec = self.campaign.spec_for(config)
        if self.workers is not None:
            check_split(spec.config, self.workers.count)
        return spec

    def key_for(self, config: Mapping[str, Any]) -> str:
        """The trial key, also for a proposal that has no valid configuration."""
        try:
            return self.spec_for(config).key
        except ValueError:
            return proposal_identity(self.space, config, self.seed)[0]


def run_trial(config: dict[str, Any], ctx: SweepContext, host: TrialHost | None = None) -> None:
    """The function trainable (on a Tune worker unless given another host)."""
    from trainers.config import flatten

    host = TuneHost() if host is None else host
    start = time.perf_counter()
    if ctx.deadline is not None and time.time() > ctx.deadline:
        host.report({Report.STATUS: DEFERRED, Report.KEY: ctx.key_for(config)})
        return
    tags = {Tag.TRIAL_ID: host.trial_id(), **host.placement(), **ctx.tags}
    try:
        spec = ctx.spec_for(config)
    except ValueError as err:  # a sampler proposed an invalid combination: no training spent
        _infeasible(ctx, config, tags, str(err), host)
        return
    if _settled(ctx, spec.key, host):  # a search proposed a point it has run: nothing runs twice
        return
    tags |= {Tag.ARM: spec.arm, Tag.SEED: str(spec.seed), Tag.HARDWARE: _hardware()}
    tags |= _cost_tags(spec.config, ctx.peak_flops)
    run = TrialRun(ctx.record, spec.key, flatten(spec.config), tags, ctx.journal(spec.key))
    try:
        result = _fit(spec, run, ctx, host)
    except TrackingOutage:
        raise  # the store is down: the reason cannot be written there (Tune keeps it)
    except Exception as err:
        # The driver decides the status (Tune may retry): the trial only leaves the reason.
        # Not for BaseException: Tune stops a trial (ASHA) by ending its thread with one.
        run.client.set_tag(run.run_id, Tag.REASON, first_line(err, limit=5000))
        raise
    _finish(run, spec, result, ctx, time.perf_counter() - start, host)


def _settled(ctx: SweepContext, key: str, host: TrialHost) -> bool:
    """Report a trial the record already settled (a search's repeated proposal: the same
    point and seed train to the same result) with its recorded values, instead of running it
    again."""
    from nas.campaign.searcher import objective_values

    recorded = recorded_trial(ctx.record, key)
    if recorded is None or recorded.status not in SETTLED:
        return False
    values = objective_values(recorded, ctx.space, ctx.worst) if ctx.worst else None
    objectives = dict(ctx.worst)
    if values is not None:
        objectives = {o.key: v for o, v in zip(ctx.space.objectives, values, strict=True)}
    status = {Report.STATUS: recorded.status.value, Report.KEY: key, Report.REPEAT: 1}
    host.report({**objectives, **status})
    return True


def _finish(
    run: TrialRun, spec: TrialSpec, result: Any, ctx: SweepContext, trial_s: float, host: TrialHost
) -> None:
    """Record the outcome, then the last report (the searcher reads its objectives there).
    The run ends before the report: Ray may end the worker right after it."""
    status = Status(result.status)
    final = {
        Metric.FINAL_VAL_LOSS: result.val_loss,
        Metric.FINAL_WALL_S: result.wall_s,  # the fit
        Metric.FINAL_STEP_S: result.step_s,  # inside training steps
        Metric.FINAL_TRIAL_S: trial_s,  # the whole trial function
        Metric.FINAL_TOKENS_PER_S: result.tokens_per_s,
        Metric.FINAL_PARAMS: float(result.params),
        Metric.FINAL_STEPS: float(result.steps),
        Metric.FINAL_TIMED_STEPS: float(result.timed_steps),
        Metric.FINAL_FLOPS_PER_TOKEN: float(result.flops_per_token),
        Metric.FINAL_TRAIN_FLOPS: float(result.train_flops),
    }
    if result.cost is not None:
        final |= _cost_metrics(result.cost, trial_s)
        final |= _planned(result)
    if result.decode is not None:
        final |= {
            Metric.FINAL_DECODE_TOKENS_PER_S: result.decode.tokens_per_s,
            Metric.FINAL_PREFILL_TOKENS_PER_S: result.decode.prefill_tokens_per_s,
            Metric.FINAL_KV_BYTES_PER_TOKEN: result.decode.kv_bytes_per_token,
        }
    run.log_metrics(final, result.steps)  # non-finite values are left out
    # A collapsed routing is no outcome of its own (the trial trained to its end), but its
    # reason and description name it, so the record says why such an arm plateaued.
    reason = "; ".join(r for r in (result.reason, result.routing_alarm) if r)
    run.end(status, reason, result.steps)
    # Written once the store has just answered (the outcome), never at the fit's start, where a
    # store outage would stall training: a running trial's record names Ray's GPUs only.
    run.client.set_tag(run.run_id, Tag.DEVICE, result.device)
    tags = {**_path_tags(result.paths), **_step_tags(result), **_group_tags(ctx.workers)}
    for tag, value in tags.items():
        run.client.set_tag(run.run_id, tag, value)
    host.report(
        {**_objectives(status, result, ctx), Report.STATUS: status.value, Report.KEY: spec.key}
    )


def _path_tags(paths: Any) -> dict[str, str]:
    """The kernels the trial ran (``trainers.training.paths.Paths``) as its tags."""
    if paths is None:
        return {}
    return {
        Tag.COMPILED: "true" if paths.compiled else "false",
        Tag.DEPTH_PATH: paths.depth_mixing,
        Tag.DEPTH_PATH_REASON: paths.reason,
        Tag.KERNELS: json.dumps(paths.versions, sort_keys=True),
    }


def _step_tags(result: Any) -> dict[str, str]:
    """How each step ran: the micro-batch and checkpointing trained with ('auto' resolved)."""
    if not result.micro_batch:
        return {}
    return {Tag.MICRO_BATCH: str(result.micro_batch), Tag.CHECKPOINTING: result.checkpointing}


def _group_tags(workers: Workers | None) -> dict[str, str]:
    """How the model was spread: one process, or replicated or sharded over its workers."""
    if workers is None:
        return {Tag.STRATEGY: "single", Tag.WORLD_SIZE: "1"}
    return {Tag.STRATEGY: workers.strategy, Tag.WORLD_SIZE: str(workers.count)}


def _objectives(status: Status, result: Any, ctx: SweepContext) -> dict[str, float]:
    """What the searcher and the scheduler see last. A trial without a finite validation loss
    (diverged, or timed out before its first validation) reports each objective's worst value
    and no step: ASHA, which needs both, leaves it out of its rungs instead of ranking a
    made-up number."""
    values = {Report.VAL_LOSS: result.val_loss, Report.PARAMS: float(result.params)}
    if result.val_bpb is not None:
        values[Report.VAL_BPB] = result.val_bpb
    if result.decode is not None:
        values[Report.DECODE_TOKENS_PER_S] = result.decode.tokens_per_s
    if status == Status.DIVERGED or not math.isfinite(result.val_loss):
        return {**values, **ctx.worst} if ctx.worst else {k: math.inf for k in values}
    return {**values, Report.STEP: result.steps}


def _cost_tags(cfg: RunConfig, peak_flops: float | None) -> dict[str, str]:
    """Where the trial's MFU peak comes from and what its device-hours count, known before it
    trains (a CPU's peak is measured here, once per worker; ``train`` reuses the figure)."""
    from trainers.measure.device_cost import DEVICE_UNITS, CostMeter
    from trainers.training.run import resolve_precision

    t = cfg.train
    meter = CostMeter(t.accelerator, resolve_precision(t), peak_flops)
    return {Tag.PEAK_FLOPS_SOURCE: meter.peak.source, Tag.DEVICE_UNIT: DEVICE_UNITS[meter.device]}


def _cost_metrics(cost: Any, trial_s: float) -> dict[str, float]:
    """A ``trainers.measure.device_cost.Cost`` as final metrics; device-hours over the whole trial
    function, which holds its devices for that long. NVML's only where it was read."""
    metrics = {
        Metric.FINAL_PEAK_MEM_MB: cost.peak_mem_mb,
        Metric.FINAL_MFU: cost.mfu,
        Metric.FINAL_PEAK_FLOPS: cost.peak_flops,
        Metric.FINAL_DEVICE_HOURS: cost.device_hours(trial_s),
        Metric.FINAL_GPU_UTIL: cost.gpu_util,
        Metric.FINAL_GPU_POWER_W: cost.gpu_power_w,
    }
    return {k: float(v) for k, v in metrics.items() if v is not None}


def _planned(result: Any) -> dict[str, float]:
    """What the FLOP plan gave the steps the trial trained, at the MFU it assumes of the
    device's peak (``trainers.measure.time_plan``); nothing where the peak is unknown."""
    from trainers.measure.time_plan import DEFAULT_MFU, planned_seconds

    peak = result.cost.peak_flops
    if not (math.isfinite(peak) and peak > 0):
        return {}
    seconds = planned_seconds(result.train_flops, result.checkpointing, peak)
    return {Metric.FINAL_PLANNED_TRAIN_S: seconds, Metric.FINAL_PLANNED_MFU: DEFAULT_MFU}


def _hardware() -> str:
    """What this trial trains on, in words (the report's provenance)."""
    import torch

    from record.machine import cpu_words

    if torch.cuda.is_available():
        return f"GPU {torch.cuda.get_device_name(0)}"
    return f"CPU {cpu_words()}, {torch.get_num_threads()} threads"


def _infeasible(
    ctx: SweepContext, config: Mapping[str, Any], tags: dict[str, str], reason: str, host: TrialHost
) -> None:
    """Record the proposal with its reason and tell the searcher at once: the worst value for
    every objective, so it learns to avoid the region."""
    key, arm = proposal_identity(ctx.space, config, ctx.seed)
    run = TrialRun(ctx.record, key, dict(config), {**tags, Tag.ARM: arm, Tag.SEED: str(ctx.seed)})
    run.end(Status.INFEASIBLE, reason, 0)
    report = {Report.STATUS: Status.INFEASIBLE.value, Report.REASON: reason, Report.KEY: key}
    host.report({**ctx.worst, **report})


def _fit(spec: TrialSpec, run: TrialRun, ctx: SweepContext, host: TrialHost) -> Any:
    from nas.trial.lightning_hooks import TrialLogger
    from trainers.training.run import train

    out = host.trial_dir()
    if ctx.workers is not None:
        return _fit_data_parallel(spec, out, run, ctx, ctx.workers)

    def fit(ckpt: Path | None) -> Any:
        result, _ = train(
            spec.config,
            out,
            logger=TrialLogger(run),
            callbacks=[host.reporter(spec.key)],
            progress=False,
            ckpt_path=ckpt,
            time_limit_s=ctx.trial_timeout_s,
            peak_flops=ctx.peak_flops,
            device_bytes=ctx.device_bytes,
        )
        return result

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / CKPT_NAME
        if host.retry_checkpoint(ckpt):  # a retry of this attempt: its host's newest checkpoint
            return fit(ckpt)
        earlier = _loadable(ctx.resume_from.get(spec.key, ()), ckpt)
        return fit(earlier)


def _fit_data_parallel(
    spec: TrialSpec, out: Path, run: TrialRun, ctx: SweepContext, workers: Workers
) -> Any:
    """The trial over its Ray Train workers. Their checkpoints lie beside the trial's folder in
    this invocation's Tune experiment (``<experiment>/<trial id>-train``), where
    ``nas.trial.checkpoints`` finds them by key: a retry of this attempt, or a later invocation,
    resumes from the newest of any attempt, read in place (every worker must reach it)."""
    from ray import tune

    from nas.trial.data_parallel import train_data_parallel

    assert ctx.folder is not None  # a sweep's context names its folder
    tc = tune.get_context()
    storage = Path(ctx.folder) / tc.get_experiment_name() / f"{tc.get_trial_id()}-train"
    candidates = latest_checkpoints(Path(ctx.folder)).get(spec.key, [])
    journal = ctx.journal(spec.key)
    link = TrialLink(ctx.record, run.run_id, spec.key, None if journal is None else str(journal))
    return train_data_parallel(
        spec.config,
        out,
        workers,
        time_limit_s=ctx.trial_timeout_s,
        peak_flops=ctx.peak_flops,
        device_bytes=ctx.device_bytes,
        ckpt_path=_loadable_in_place(candidates),
        link=link,
        storage=storage,
    )


def _loadable_in_place(candidates: list[Path]) -> Path | None:
    """The newest checkpoint that loads (a kill can leave the newest truncated)."""
    import torch

    for path in candidates:
        try:
            torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # truncated or missing: pickle, zip and OS errors alike
            continue
        return path
    return None


def _loadable(candidates: tuple[str, ...], dest: Path) -> Path | None:
    """The newest earlier checkpoint that loads, copied to ``dest`` (a single-device trial
    reads its copy: the stored folder may be read-only); None to start from scratch."""
    found = _loadable_in_place([Path(c) for c in candidates])
    if found is None:
        return None
    dest.write_bytes(found.read_bytes())
    return dest
