"""The Ray side of a sweep: start or join Ray, and this invocation's Tune experiment (resources
per trial, grid or warm-started search, ASHA where it fits, the time budget); SIGTERM handled as
Ctrl-C."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from nas.store.outbox import OUTAGE_ENV
from nas.store.tracking import SECRET_URI_ENV, RecordedTrial
from nas.sweep.plan import Plan, SweepOptions
from nas.trial.checkpoints import next_experiment
from nas.trial.data_parallel import Workers
from nas.trial.run import SweepContext, run_trial
from record.redact import redact
from trainers.budget import budgeted

DRIVER_MEMORY = 2**20  # bytes: a data-parallel trial's own reservation, a token (see tuner)


def tuner(
    opts: SweepOptions,
    p: Plan,
    ctx: SweepContext,
    callbacks: list[Any],
    recorded: dict[str, RecordedTrial],
) -> Any:
    """This invocation's Tune experiment over the trials the plan's campaign has left: a grid's
    (passed by key) or a search's proposals (warm-started from the record)."""
    from ray import tune

    from nas.sweep.outcomes import TimeBudget

    cpus, gpus = _cpus_per_trial(opts), _gpus_per_trial(opts)
    resources = {"cpu": cpus, "gpu": gpus}
    # A stopped data-parallel trial's actor must end rather than wait for the next trial: its
    # Ray Train controller and workers, which it owns, end with it.
    single = opts.workers_per_trial == 1
    if not single:
        # The trial only drives its Ray Train workers, which reserve the cores and GPUs
        # themselves (Ray Train V2 places them outside the trial's own reservation). Tune
        # refuses an empty reservation, and any CPU fraction would leave one worker too few
        # cores on a full node: the trial reserves a token of memory instead.
        workers = Workers(opts.workers_per_trial, cpus, gpus, opts.strategy)
        ctx = replace(ctx, workers=workers)
        resources = {"cpu": 0, "gpu": 0, "memory": DRIVER_MEMORY}
    trainable = tune.with_resources(tune.with_parameters(run_trial, ctx=ctx), resources)
    run_config = tune.RunConfig(
        name=next_experiment(p.folder),
        storage_path=str(p.folder),
        # Every checkpoint is kept while the sweep runs: an interrupted trial resumes from the
        # newest one of its key, in whichever invocation wrote it. A settled sweep prunes them.
        checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
        failure_config=tune.FailureConfig(max_failures=2),
        stop=TimeBudget(ctx.deadline),
        verbose=1 if opts.verbose else 0,
        callbacks=[*callbacks, *_result_loggers()],
    )
    trials = p.campaign.tune_trials(recorded, opts.study_storage, p.name)
    tune_config = tune.TuneConfig(
        # the searcher and ASHA carry their own metrics: Tune refuses one given twice
        search_alg=trials.search_alg,
        scheduler=_scheduler(opts, p),
        num_samples=trials.num_samples,
        max_concurrent_trials=opts.concurrency,
        reuse_actors=single,
    )
    return tune.Tuner(
        trainable,
        param_space=dict(trials.param_space),
        tune_config=tune_config,
        run_config=run_config,
    )


def _result_loggers() -> list[Any]:
    """Tune's CSV and JSON result files, without its TensorBoard one: nothing reads TensorBoard
    files (every metric is in MLflow), and making one imports tensorboardX, and with it torch,
    into the driver: seconds per sweep that the driver otherwise never spends."""
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    os.environ["TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"] = "1"  # the two below are given instead
    return [CSVLoggerCallback(), JsonLoggerCallback()]


def _scheduler(opts: SweepOptions, p: Plan) -> Any:
    """ASHA by default where the campaign wants it (a search; never a grid: an ablation
    compares full runs) and the space has one objective (stopping on the first objective of
    several would cut the small, cheap models a Pareto front is looking for)."""
    single = len(p.space.objectives) == 1
    # Budgeted trials train different step counts: ASHA's rungs (equal steps) would not be
    # equal compute, so auto picks none and an explicit asha is refused (nas.sweep.plan.plan).
    auto = p.campaign.asha_by_default and single and not budgeted(p.base.train, p.space.params)
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
        # A trial that reaches max_t ends on its own and reports its status; ASHA's default
        # stop at max_t cut it at its last validation instead, and it read as stopped early.
        stop_last_trials=False,
    )


def _cpus_per_trial(opts: SweepOptions) -> float:
    """Ray sets a trial's OMP_NUM_THREADS (so torch's threads) to the CPUs it reserves: one CPU
    per trial would leave a laptop's other cores idle at concurrency 1. By default a trial gets
    the largest node's cores shared by the concurrent trials and their data-parallel workers
    (never more than one node has)."""
    if opts.cpus_per_trial is not None:
        return opts.cpus_per_trial
    import ray

    per_node = [n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive")]
    largest = max(per_node, default=1.0)
    return float(max(1, int(largest // (opts.concurrency * opts.workers_per_trial))))


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


# Ray starts its worker processes at nice 15, so that the raylet stays responsive beside them.
# In a local sweep the workers are the trials, the work itself: at nice 15 each gets about 3% of
# a core against any process at nice 0, the sweep's own driver among them (its imports and the
# store's opening: about 7 CPU-seconds of a smoke sweep), so a busy machine starves the trials,
# not the bookkeeping (docs/benchmarks.md, "Ray's worker niceness"). A user's own
# RAY_worker_niceness wins; a cluster's raylets read their own.
WORKER_NICENESS_ENV, LOCAL_WORKER_NICENESS = "RAY_worker_niceness", "0"
FORWARDED = frozenset({OUTAGE_ENV, "MLFLOW_DISABLE_TELEMETRY"})
HTTP_ENV = "MLFLOW_HTTP_REQUEST_"  # MLflow's client retries and time-outs


def start_ray(opts: SweepOptions, uri: str) -> None:
    """Ray for the sweep (a local one, or the cluster at ``--address``), its workers told how to
    reach the tracking store at ``uri`` (the plan's)."""
    _quiet_ray(opts.verbose)
    import ray

    address = opts.ray_address
    if not address:  # the local Ray ray.init starts inherits this environment
        os.environ.setdefault(WORKER_NICENESS_ENV, LOCAL_WORKER_NICENESS)
    # A cluster's workers inherit their raylet's environment, not the driver's: what the
    # driver's environment says about talking to the store travels with the job.
    forwarded = {k: v for k, v in os.environ.items() if k in FORWARDED or k.startswith(HTTP_ENV)}
    runtime_env: dict[str, Any] = {"env_vars": forwarded} if forwarded else {}
    if redact(uri) != uri:
        os.environ[SECRET_URI_ENV] = uri  # the driver's callbacks write with the shareable record
        runtime_env["worker_process_setup_hook"] = _secret_hook(uri)
    ray.init(
        address=address,
        runtime_env=runtime_env or None,
        include_dashboard=False,
        log_to_driver=opts.verbose,
        configure_logging=True,
        logging_level=logging.INFO if opts.verbose else logging.WARNING,
    )


def _secret_hook(uri: str) -> Callable[[], None]:
    """What gives every worker of the sweep the tracking URI with its password, through Ray's
    store (the hook is pickled into the cluster's GCS, the URI held in its closure), never
    through a command line: Ray hands a job's ``env_vars`` to each new worker as an argument
    of ``setup_worker.py``, which any user of the node sees in ``ps``; nor through Tune's
    pickles, which it writes to disk (``nas.store.tracking.SECRET_URI_ENV``)."""

    def hold_tracking_secret() -> None:
        os.environ[SECRET_URI_ENV] = uri

    return hold_tracking_secret


def on_sigterm(seen: dict[str, bool]) -> None:
    """SIGTERM behaves like Ctrl-C: Tune saves its state and stops the trials, the record marks
    them killed, and the exit status says so (143). Tune listens for SIGINT only, so the
    handler raises that in this process; the flag remembers which signal it was. Installed
    after ``ray.init``, whose own handler exits the driver at once (the process aborted)."""

    def handler(signum: int, frame: Any) -> None:
        seen["sigterm"] = True
        signal.raise_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, handler)


class TuneRunner:
    """``nas sweep``'s runner: Ray started or joined once, then a Tune experiment per stage."""

    def start(self, opts: SweepOptions, p: Plan, seen: dict[str, bool]) -> None:
        start_ray(opts, p.uri)
        on_sigterm(seen)

    def run(
        self, opts: SweepOptions, p: Plan, ctx: SweepContext, recorded: dict[str, RecordedTrial]
    ) -> int:
        from nas.sweep.live import LiveView
        from nas.sweep.outcomes import Outcomes

        view = LiveView(ctx, p.campaign.total, p.campaign.settled(recorded))
        tuner(opts, p, ctx, [view, Outcomes(ctx)], recorded).fit()
        return view.repeats
