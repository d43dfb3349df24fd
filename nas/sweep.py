"""``nas sweep``: every trial of a space trained on Ray Tune (grid or Optuna search, ASHA where
it fits), recorded in MLflow as one parent run with a nested child run per trial.

The steps, in order: load the space and build the base configuration; expand the grid (skipping
invalid cells with their reasons) or set up the search; open the MLflow record in the driver;
start or join Ray; fit or restore the Tuner; close the record and print the summary.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from nas import package_version
from nas.tracking import (
    SweepRecord,
    close_sweep,
    log_sweep_text,
    open_sweep,
    resolve_tracking_uri,
)
from nas.trial import SweepContext, run_trial
from search_spaces import Space, get_space, grid_cells
from search_spaces.space import Cell, Skipped, nest
from trainers.config import RunConfig, to_dict
from trainers.config_io import from_dict, parse_overrides


@dataclass(frozen=True)
class SweepOptions:
    space: str
    name: str | None = None
    trials: int | None = None
    concurrency: int = 1
    cpus_per_trial: float | None = None  # None: one node's cores / concurrency
    gpus_per_trial: float | None = None  # None: 1 when the cluster has GPUs, else 0
    max_steps: int | None = None
    seeds: tuple[int, ...] | None = None
    overrides: tuple[str, ...] = ()
    scheduler: str = "auto"  # auto: ASHA for searches, none for grids
    tracking_uri: str | None = None
    address: str | None = None
    storage_path: str | None = None
    resume: bool = False
    verbose: bool = False


@dataclass(frozen=True)
class Plan:
    """Everything decided before Ray starts; building it raises ValueError on bad input."""

    space: Space
    name: str
    base: RunConfig
    cells: list[Cell]  # grid only: every valid cell, expanded once
    skipped: list[Skipped]
    storage: Path


def plan(opts: SweepOptions) -> Plan:
    space = get_space(opts.space)
    if opts.seeds:
        space = replace(space, seeds=opts.seeds)
    if opts.trials is not None:
        space = replace(space, trials=opts.trials)
    base = from_dict(nest(space.base))
    extra = parse_overrides(opts.overrides)
    if opts.max_steps:
        extra.setdefault("train", {})["max_steps"] = opts.max_steps
    base = from_dict(extra, base)
    cells: list[Cell] = []
    skipped: list[Skipped] = []
    if space.kind == "grid":
        cells, skipped = grid_cells(space, base)
        if not cells:
            reasons = "; ".join(sorted({s.reason for s in skipped}))
            raise ValueError(f"space {space.name!r} has no valid configuration ({reasons})")
    storage = Path(opts.storage_path or Path.cwd() / "ray_results").resolve()
    _check_writable(storage)
    if opts.resume and not (storage / (opts.name or space.name)).is_dir():
        raise ValueError(
            f"--resume: no stored sweep at {storage / (opts.name or space.name)}; "
            "check --name and --storage-path, or drop --resume to start it"
        )
    _check_address(opts.address or os.environ.get("RAY_ADDRESS"))
    return Plan(space, opts.name or space.name, base, cells, skipped, storage)


def _check_address(address: str | None) -> None:
    """An explicit host:port must accept a connection (a cluster that is not there would
    otherwise surface as a long time-out, after the record was opened). 'auto' and 'local'
    are left to Ray."""
    if not address or address in ("auto", "local"):
        return
    import socket

    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=5):
            pass
    except (OSError, ValueError) as err:
        raise ValueError(
            f"--address {address}: no Ray cluster reachable there ({err}); give host:port of a "
            "running head node, or 'auto'"
        ) from None


def _git_commit() -> str:
    """The commit of the code running the sweep, when it runs from a git checkout."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _check_writable(folder: Path) -> None:
    """The storage path must be a folder we can create things in. Probed by creating and
    removing a temporary folder in its nearest existing ancestor (permission bits say nothing
    when running as root), so a refused path leaves nothing behind."""
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    try:
        if existing is None or not existing.is_dir():
            raise OSError("no existing parent folder")
        Path(tempfile.mkdtemp(dir=existing, prefix=".nas-probe-")).rmdir()
    except OSError:
        raise ValueError(f"--storage-path {folder}: not a writable folder") from None


def _open_record(uri: str, p: Plan) -> SweepRecord:
    """Open the MLflow record; a store that cannot be opened is bad input, not a crash."""
    try:
        return open_sweep(
            uri,
            p.name,
            key=str(p.storage / p.name),
            tags={
                "nas.command": " ".join(sys.argv),
                "nas.space": p.space.name,
                "nas.versions": json.dumps(_versions()),
            },
        )
    except Exception as err:  # MLflow raises its own exception types, sqlalchemy's, OSError
        from reports.load import first_line

        message = f"--tracking-uri {uri}: cannot open the MLflow store ({first_line(err)})"
        raise ValueError(message) from None


def _versions() -> dict[str, str]:
    """Versions of Python and the stack, read from package metadata (importing would cost
    seconds before the first trial)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "nas": package_version()}
    for package in ("torch", "lightning", "ray", "optuna", "mlflow"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "missing"
    return found


def _context(p: Plan, record: SweepRecord) -> SweepContext:
    tags = {
        "nas.space": p.space.name,
        "nas.version": package_version(),
        "nas.git_commit": _git_commit(),
    }
    if p.space.kind != "grid":
        worst = {o.key: math.inf if o.mode == "min" else -math.inf for o in p.space.objectives}
        return SweepContext(record, to_dict(p.base), seed=p.space.seeds[0], tags=tags, worst=worst)
    points = [{**c.point, "train.seed": c.seed} for c in p.cells]
    return SweepContext(record, to_dict(p.base), points, [c.arm for c in p.cells], tags=tags)


def _searcher(space: Space) -> Any:
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    from search_spaces.distributions import Choice, Fixed, FloatRange, IntRange

    dists: dict[str, Any] = {}
    for key, d in space.params.items():
        if isinstance(d, Choice):
            dists[key] = optuna.distributions.CategoricalDistribution(list(d.values))
        elif isinstance(d, Fixed):
            dists[key] = optuna.distributions.CategoricalDistribution([d.value])
        elif isinstance(d, IntRange):
            dists[key] = optuna.distributions.IntDistribution(d.low, d.high, log=d.log)
        elif isinstance(d, FloatRange):
            dists[key] = optuna.distributions.FloatDistribution(d.low, d.high, log=d.log)
    sampler = (
        optuna.samplers.TPESampler(seed=0)
        if space.sampler == "tpe"
        else optuna.samplers.RandomSampler(seed=0)
    )
    keys = [o.key for o in space.objectives]
    modes: list[str] = [o.mode for o in space.objectives]
    if len(keys) == 1:
        return OptunaSearch(space=dists, metric=keys[0], mode=modes[0], sampler=sampler)
    return OptunaSearch(space=dists, metric=keys, mode=modes, sampler=sampler)


def _scheduler(opts: SweepOptions, p: Plan) -> Any:
    """ASHA for single-objective searches by default. Never by default for a grid (an ablation
    compares full runs) nor for a multi-objective search (stopping on the first objective
    would cut the small, cheap models a Pareto front is looking for)."""
    single = len(p.space.objectives) == 1
    auto = p.space.kind == "search" and single
    if not (opts.scheduler == "asha" or (opts.scheduler == "auto" and auto)):
        return None
    from ray.tune.schedulers import ASHAScheduler

    t = p.base.train
    first = p.space.objectives[0]
    return ASHAScheduler(
        metric=first.key,
        mode=first.mode,
        time_attr="step",
        max_t=t.max_steps,
        grace_period=min(t.val_every, t.max_steps),
        reduction_factor=2,
    )


def _tuner(opts: SweepOptions, p: Plan, ctx: SweepContext, printer: Any) -> Any:
    from ray import tune

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, ctx=ctx),
        {"cpu": _cpus_per_trial(opts), "gpu": _gpus_per_trial(opts)},
    )
    run_config = tune.RunConfig(
        name=p.name,
        storage_path=str(p.storage),
        # Every checkpoint is kept while the sweep runs: a driver killed between a trial's new
        # checkpoint and Tune's next snapshot of its state resumes from the checkpoint that
        # snapshot names, which num_to_keep=1 would already have deleted (the SIGKILL test
        # caught it). A finished sweep prunes them (_prune_checkpoints).
        checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
        failure_config=tune.FailureConfig(max_failures=2),
        verbose=1 if opts.verbose else 0,
        callbacks=[printer],
    )
    path = p.storage / p.name
    if tune.Tuner.can_restore(str(path)):
        print(f"resuming the sweep stored in {path}")
        tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_errored=True)
        # Tune restores the run config pickled by the first invocation, callbacks included;
        # this invocation's live view (and verbosity) must replace them. No public API for it.
        local = tuner._local_tuner
        assert local is not None  # a Tuner made in this process (not through Ray Client)
        restored = local.get_run_config()
        restored.callbacks, restored.verbose = run_config.callbacks, run_config.verbose
        return tuner
    if p.space.kind == "grid":
        param_space = {"cell": tune.grid_search(list(range(len(ctx.cells))))}
        tune_config = tune.TuneConfig(
            scheduler=_scheduler(opts, p),  # carries its own metric: Tune refuses it twice
            max_concurrent_trials=opts.concurrency,
            reuse_actors=True,
        )
    else:
        param_space = {}
        tune_config = tune.TuneConfig(
            search_alg=_searcher(p.space),  # the searcher and ASHA carry their own metrics
            scheduler=_scheduler(opts, p),
            num_samples=p.space.trials,
            max_concurrent_trials=opts.concurrency,
            reuse_actors=True,
        )
    return tune.Tuner(
        trainable, param_space=param_space, tune_config=tune_config, run_config=run_config
    )


def _cpus_per_trial(opts: SweepOptions) -> float:
    """Ray sets a trial's OMP_NUM_THREADS (so torch's threads) to the CPUs it reserves: one CPU
    per trial would leave a laptop's other cores idle at concurrency 1. By default a trial gets
    the largest node's cores shared by the concurrent trials (never more than one node has)."""
    if opts.cpus_per_trial is not None:
        return opts.cpus_per_trial
    import ray

    per_node = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")]
    largest = max(per_node, default=1.0)
    return float(max(1, int(largest // opts.concurrency)))


def _gpus_per_trial(opts: SweepOptions) -> float:
    """One GPU per trial where the cluster (or this machine) has any, unless told otherwise;
    Ray then hides the GPUs from trials that asked for none, so those train on the CPU."""
    if opts.gpus_per_trial is not None:
        return opts.gpus_per_trial
    import ray

    return 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0


def _prune_checkpoints(folder: Path) -> None:
    """Keep each trial's last checkpoint only, once no trial can be resumed any more."""
    import shutil

    for trial in folder.iterdir():
        checkpoints = sorted(trial.glob("checkpoint_*")) if trial.is_dir() else []
        for old in checkpoints[:-1]:
            shutil.rmtree(old, ignore_errors=True)


def _quiet_ray(verbose: bool) -> None:
    """Our own progress lines replace Ray's console output unless --verbose."""
    if verbose:
        return

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the legacy reporter is silent at verbose 0
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR
    )


def _start_ray(opts: SweepOptions) -> None:
    _quiet_ray(opts.verbose)
    import ray

    address = opts.address or os.environ.get("RAY_ADDRESS")
    ray.init(
        address=address,
        include_dashboard=False,
        log_to_driver=opts.verbose,
        configure_logging=True,
        logging_level=logging.INFO if opts.verbose else logging.WARNING,
    )


def run_sweep(opts: SweepOptions) -> int:
    p = plan(opts)  # every bad input surfaces here, before anything is recorded
    uri = resolve_tracking_uri(opts.tracking_uri)
    record = _open_record(uri, p)
    from search_spaces.loader import space_to_data

    log_sweep_text(record, yaml.safe_dump(space_to_data(p.space), sort_keys=False), "space.yaml")
    skipped = [{"arm": s.arm, "reason": s.reason} for s in p.skipped]
    log_sweep_text(record, yaml.safe_dump(skipped, sort_keys=False), "skipped.yaml")
    for s in p.skipped:
        print(f"skipped {s.arm}: {s.reason}")
    ctx = _context(p, record)
    _start_ray(opts)
    from nas.live import LiveView
    from nas.summary import summarize

    status = "FAILED"
    try:
        total = len(p.cells) if p.space.kind == "grid" else p.space.trials
        view = LiveView(ctx, total, state_file=p.storage / p.name / "nas-completed.json")
        results = _tuner(opts, p, ctx, view).fit()
        summary = summarize(results, ctx, p, uri, view.completed)
        if not summary["sweep/unfinished"]:
            _prune_checkpoints(p.storage / p.name)
        status = "KILLED" if summary["sweep/unfinished"] else "FINISHED"
    finally:
        close_sweep(record, {} if status == "FAILED" else summary, status)
    if summary["sweep/unfinished"]:
        return 130  # interrupted: the same command resumes it
    return 1 if summary["sweep/failed"] else 0
