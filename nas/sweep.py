"""``nas sweep``: every trial of a space trained on Ray Tune (grid or Optuna search, ASHA where
it fits), recorded in MLflow as one parent run with a nested child run per trial.

The steps, in order: load the space and build the base configuration; expand the grid into
trial specs (skipping invalid cells with their reasons) or set up the search; compare the plan
with what the record already holds (extend it, or refuse a change before anything runs); open
the MLflow record in the driver; start or join Ray; run this invocation's Tune experiment over
the trials still to run; close the record and print the summary, read from the record.

Each invocation runs a Tune experiment of its own (``<storage>/<sweep>/tune-NNNN``); the record
in MLflow, not Tune's state, says which trials are settled, and a trial interrupted in one
invocation resumes in the next from the newest checkpoint of its key.
"""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from nas import package_version
from nas.checkpoints import latest_checkpoints, next_experiment, prune
from nas.plan_check import conflicts, refusal
from nas.spec import TrialSpec, grid_specs
from nas.tracking import (
    RecordedTrial,
    StoredSweep,
    SweepRecord,
    close_sweep,
    find_sweep,
    log_plan,
    log_sweep_text,
    open_sweep,
    recorded_trials,
    resolve_tracking_uri,
    supersede,
)
from nas.trial import SweepContext, run_trial
from reports.schema import GRID_PARAM, SETTLED, SKIPPED_FILE, SPACE_FILE, Status, Tag
from search_spaces import Space, get_space, grid_cells
from search_spaces.space import Skipped, nest
from trainers.config import RunConfig, flatten
from trainers.config_io import from_dict, parse_overrides

# Exit statuses besides 0 (done), 1 (a trial failed) and 2 (bad input).
EXIT_INTERRUPTED = 130  # Ctrl-C: the same command resumes
EXIT_TERMINATED = 143  # SIGTERM (a cluster scheduler's preemption): the same command resumes
EXIT_TIME_BUDGET = 75  # EX_TEMPFAIL: --time-budget ran out, the same command continues


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
    restart: bool = False  # archive the stored state and start the sweep again
    trial_timeout_min: float | None = None  # end a trial that runs longer (timed_out)
    time_budget_h: float | None = None  # launch no trial after this much wall time
    verbose: bool = False


@dataclass(frozen=True)
class Plan:
    """Everything decided before Ray starts; building it raises ValueError on bad input."""

    space: Space
    name: str
    base: RunConfig
    specs: list[TrialSpec]  # grid only: every valid cell, expanded once
    skipped: list[Skipped]
    storage: Path

    @property
    def folder(self) -> Path:
        """The sweep's Tune experiments and checkpoints; its path is the record's sweep key."""
        return self.storage / self.name


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
    cells, skipped = grid_cells(space, base) if space.kind == "grid" else ([], [])
    if space.kind == "grid" and not cells:
        reasons = "; ".join(sorted({s.reason for s in skipped}))
        raise ValueError(f"space {space.name!r} has no valid configuration ({reasons})")
    storage = Path(opts.storage_path or Path.cwd() / "ray_results").resolve()
    _check_writable(storage)
    name = opts.name or space.name
    if opts.resume and opts.restart:
        raise ValueError("--resume and --restart contradict each other; give one")
    if opts.resume and not (storage / name).is_dir():
        raise ValueError(
            f"--resume: no stored sweep at {storage / name}; "
            "check --name and --storage-path, or drop --resume to start it"
        )
    for flag, value in (
        ("--trial-timeout", opts.trial_timeout_min),
        ("--time-budget", opts.time_budget_h),
    ):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{flag} {value}: must be a positive number")
    _check_address(opts.address or os.environ.get("RAY_ADDRESS"))
    return Plan(space, name, base, grid_specs(cells), skipped, storage)


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


def _stored(uri: str, p: Plan) -> StoredSweep | None:
    """What the store already holds of this sweep (read only); a store that cannot be read is
    bad input, not a crash."""
    try:
        return find_sweep(uri, p.name, str(p.folder))
    except Exception as err:  # MLflow raises its own exception types, sqlalchemy's, OSError
        raise ValueError(_store_error(uri, err)) from None


def _store_error(uri: str, err: BaseException) -> str:
    from reports.load import first_line

    return f"--tracking-uri {uri}: cannot open the MLflow store ({first_line(err)})"


def _open_record(uri: str, p: Plan) -> SweepRecord:
    """Open the MLflow record: the sweep's parent run, created with the base configuration as
    its params, or found again."""
    try:
        return open_sweep(
            uri,
            p.name,
            key=str(p.folder),
            tags={
                Tag.COMMAND: _command(),
                Tag.SPACE: p.space.name,
                Tag.VERSIONS: json.dumps(_versions()),
            },
            base=flatten(p.base),
        )
    except Exception as err:
        raise ValueError(_store_error(uri, err)) from None


def _command() -> str:
    return " ".join(sys.argv)


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


def _context(
    opts: SweepOptions, p: Plan, record: SweepRecord, recorded: dict[str, RecordedTrial]
) -> SweepContext:
    tags = {
        Tag.SPACE: p.space.name,
        Tag.VERSION: package_version(),
        Tag.GIT_COMMIT: _git_commit(),
    }
    worst = {o.key: math.inf if o.mode == "min" else -math.inf for o in p.space.objectives}
    checkpoints = latest_checkpoints(p.folder)
    return SweepContext(
        record=record,
        base=p.base,
        space=p.space,
        specs={s.key: s for s in p.specs},
        seed=p.space.seeds[0],
        tags=tags,
        worst=worst if p.space.kind == "search" else {},
        resume_from={k: tuple(str(c) for c in v) for k, v in checkpoints.items()},
        trial_timeout_s=None if opts.trial_timeout_min is None else opts.trial_timeout_min * 60,
        deadline=None if opts.time_budget_h is None else time.time() + opts.time_budget_h * 3600,
    )


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


def _tuner(
    opts: SweepOptions,
    p: Plan,
    ctx: SweepContext,
    todo: list[TrialSpec] | int,
    callbacks: list[Any],
    recorded: dict[str, RecordedTrial],
) -> Any:
    """This invocation's Tune experiment: the grid's trials still to run (``todo`` specs,
    passed by key), or ``todo`` more proposals of a search warm-started from the record."""
    from ray import tune

    from nas.outcomes import TimeBudget
    from nas.searcher import searcher

    trainable = tune.with_resources(
        tune.with_parameters(run_trial, ctx=ctx),
        {"cpu": _cpus_per_trial(opts), "gpu": _gpus_per_trial(opts)},
    )
    run_config = tune.RunConfig(
        name=next_experiment(p.folder),
        storage_path=str(p.folder),
        # Every checkpoint is kept while the sweep runs: an interrupted trial resumes from the
        # newest one of its key, in whichever invocation wrote it. A settled sweep prunes them.
        checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
        failure_config=tune.FailureConfig(max_failures=2),
        stop=TimeBudget(ctx.deadline),
        verbose=1 if opts.verbose else 0,
        callbacks=callbacks,
    )
    if isinstance(todo, list):
        param_space = {GRID_PARAM: tune.grid_search([s.key for s in todo])}
        tune_config = tune.TuneConfig(
            scheduler=_scheduler(opts, p),  # carries its own metric: Tune refuses it twice
            max_concurrent_trials=opts.concurrency,
            reuse_actors=True,
        )
    else:
        param_space = {}
        tune_config = tune.TuneConfig(
            # the searcher and ASHA carry their own metrics
            search_alg=searcher(p.space, recorded, dict(ctx.worst)),
            scheduler=_scheduler(opts, p),
            num_samples=todo,
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


class Terminated(Exception):
    """SIGTERM arrived (what Slurm and Kubernetes send before killing a job)."""


def _on_sigterm(seen: dict[str, bool]) -> None:
    """SIGTERM behaves like Ctrl-C: Tune saves its state and stops the trials, the record marks
    them killed, and the exit status says so (143). Tune listens for SIGINT only, so the
    handler raises that in this process; the flag remembers which signal it was. Installed
    after ``ray.init``, whose own handler exits the driver at once (the process aborted)."""

    def handler(signum: int, frame: Any) -> None:
        seen["sigterm"] = True
        signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, handler)


def _begin(uri: str, p: Plan, opts: SweepOptions) -> tuple[SweepRecord, dict[str, RecordedTrial]]:
    """Refuse a changed plan, else archive (--restart) or continue the stored sweep, open the
    record and log this invocation's plan. Nothing is written before the refusal."""
    stored = _stored(uri, p)
    if stored is not None and not opts.restart:
        reason = conflicts(stored, flatten(p.base), p.specs)
        if reason:
            raise ValueError(refusal(p.name, reason))
    if stored is not None and opts.restart:
        _archive(p.folder)
        supersede(stored)
        print(f"--restart: the earlier run of sweep {p.name!r} is archived (tag {Tag.SUPERSEDED})")
    record = _open_record(uri, p)
    from search_spaces.loader import space_to_data

    space = space_to_data(p.space)
    log_sweep_text(record, yaml.safe_dump(space, sort_keys=False), SPACE_FILE)
    skipped = [{"arm": s.arm, "reason": s.reason} for s in p.skipped]
    log_sweep_text(record, yaml.safe_dump(skipped, sort_keys=False), SKIPPED_FILE)
    plan_data = {"command": _command(), "space": space, "keys": [s.key for s in p.specs]}
    log_plan(record, plan_data)
    for s in p.skipped:
        print(f"skipped {s.arm}: {s.reason}")
    return record, recorded_trials(record) if stored is not None and not opts.restart else {}


def _archive(folder: Path) -> None:
    """Move the stored Tune state aside (``<name>.archived-<UTC time>``), keeping it."""
    if folder.exists():
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = folder.with_name(f"{folder.name}.archived-{stamp}")
        folder.rename(target)
        print(f"--restart: the stored Tune state is now in {target}")


def _todo(p: Plan, recorded: dict[str, RecordedTrial]) -> tuple[list[TrialSpec] | int, int]:
    """(what this invocation runs, how many planned trials an earlier invocation settled)."""
    from nas.searcher import remaining

    if p.space.kind == "grid":
        settled = {k for k, t in recorded.items() if t.status in SETTLED}
        todo = [s for s in p.specs if s.key not in settled]
        return todo, len(p.specs) - len(todo)
    left = remaining(p.space, recorded)
    return left, p.space.trials - left


def _fit(
    opts: SweepOptions,
    p: Plan,
    ctx: SweepContext,
    recorded: dict[str, RecordedTrial],
    seen: dict[str, bool],
) -> int:
    """Run this invocation's trials; returns how many search proposals repeated a point the
    record had settled (answered from it, not run)."""
    from nas.live import LiveView
    from nas.outcomes import Outcomes

    todo, earlier = _todo(p, recorded)
    total = len(p.specs) if p.space.kind == "grid" else p.space.trials
    if not todo:
        print(
            f"sweep {p.name}: all {total} planned trials are settled in the record; nothing to run"
        )
        return 0
    _start_ray(opts)
    _on_sigterm(seen)
    view = LiveView(ctx, total, earlier)
    _tuner(opts, p, ctx, todo, [view, Outcomes(ctx)], recorded).fit()
    return view.repeats


def _finish(p: Plan, uri: str, record: SweepRecord, repeats: int) -> tuple[dict[str, float], str]:
    """Close the record (trials left RUNNING are killed) and summarize it."""
    from nas.summary import (
        NOT_STARTED,
        Outcome,
        best,
        outcomes,
        print_next,
        summarize,
        write_best,
    )

    close_sweep(record, {}, None)
    from nas.searcher import remaining

    recorded = recorded_trials(record)
    planned = {s.key: s.label for s in p.specs} if p.space.kind == "grid" else None
    results = outcomes(planned, recorded)
    if planned is None:  # a search's proposals not made yet (the time budget ran out)
        missing = (
            remaining(p.space, recorded)
            - repeats
            - sum(
                t.status is None or t.status in (Status.KILLED, Status.FAILED)
                for t in recorded.values()
            )
        )
        results += [
            Outcome(f"proposal {i + 1}", NOT_STARTED, "", {}, None) for i in range(max(0, missing))
        ]
    summary = summarize(p.name, results, p.space.objectives, p.skipped)
    print_next(p.name, uri, resolve_tracking_uri(None), p.folder)
    top = best(results)
    if top is not None:
        p.folder.mkdir(parents=True, exist_ok=True)
        write_best(top, p.folder / "best-config.yaml")
    if not summary["sweep/unsettled"]:
        prune(p.folder, {Path(c[0]) for c in latest_checkpoints(p.folder).values()})
    return summary, "KILLED" if summary["sweep/unsettled"] else "FINISHED"


def run_sweep(opts: SweepOptions) -> int:
    p = plan(opts)  # every bad input surfaces here or in _begin, before anything is recorded
    uri = resolve_tracking_uri(opts.tracking_uri)
    record, recorded = _begin(uri, p, opts)
    ctx = _context(opts, p, record, recorded)
    seen = {"sigterm": False}
    summary: dict[str, float] = {}
    status = "FAILED"
    try:
        repeats = _fit(opts, p, ctx, recorded, seen)
        summary, status = _finish(p, uri, record, repeats)
    except KeyboardInterrupt:  # before or after Tune's own handler
        status = "KILLED"
        print("interrupted: run the same command again to resume", file=sys.stderr)
    finally:
        close_sweep(record, summary, status)
    if seen["sigterm"]:
        return EXIT_TERMINATED
    if status == "KILLED":
        from nas.outcomes import past

        return EXIT_TIME_BUDGET if past(ctx.deadline) else EXIT_INTERRUPTED
    return 1 if summary.get("sweep/failed") else 0
