"""A sweep's plan: the command's options, and everything decided from them before Ray starts or
anything is recorded (the space, the base configuration, the campaign: a grid's trial specs and
skipped cells, or a search; where the state lives). Building it raises ValueError on bad input."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nas.campaign.kinds import Campaign, campaign_of
from nas.spec import TrialSpec, check_read
from nas.trial.data_parallel import Strategy
from record.client import writer_store
from record.stores import check_study_storage
from search_spaces import Space, get_space
from search_spaces.seed_choice import SeedRule
from search_spaces.space import Skipped
from trainers.budget import budgeted
from trainers.config import RunConfig
from trainers.settings import under_settings


@dataclass(frozen=True)
class SweepOptions:
    space: str
    name: str | None = None
    trials: int | None = None
    concurrency: int = 1
    cpus_per_trial: float | None = None  # None: one node's cores / concurrency
    gpus_per_trial: float | None = None  # None: 1 when the cluster has GPUs, else 0
    workers_per_trial: int = 1  # > 1: each trial data-parallel over this many Ray Train workers
    strategy: Strategy = "ddp"  # the workers': replicate the model, or shard it (fsdp)
    max_steps: int | None = None
    seeds: tuple[int, ...] | None = None
    seed_rule: SeedRule | None = None  # --seeds auto: a pilot, then the seeds its noise asks for
    overrides: tuple[str, ...] = ()
    scheduler: str = "auto"  # auto: ASHA for searches, none for grids
    tracking_uri: str | None = None
    address: str | None = None
    storage_path: str | None = None
    resume: bool = False
    restart: bool = False  # archive the stored state and start the sweep again
    trial_timeout_min: float | None = None  # end a trial that runs longer (timed_out)
    time_budget_h: float | None = None  # launch no trial after this much wall time
    study_storage: str | None = None  # searches: the Optuna study in this database
    peak_flops: float | None = None  # FLOP/s for every trial's MFU instead of its device's peak
    device_memory: int | None = None  # bytes per device every cell must fit (None: a GPU's own)
    verbose: bool = False

    @property
    def ray_address(self) -> str | None:
        """The Ray cluster the sweep runs on: ``--address``, else ``RAY_ADDRESS``; None (or
        empty): a local Ray this machine starts."""
        return self.address or os.environ.get("RAY_ADDRESS")


@dataclass(frozen=True)
class Plan:
    """Everything decided before Ray starts; building it raises ValueError on bad input."""

    campaign: Campaign  # grid or search, made once here: everything else asks it
    name: str
    storage: Path
    uri: str  # the tracking store, resolved once (a relative SQLite path made absolute)
    store_exists: bool = True  # False: a SQLite file the sweep's first write creates

    @property
    def space(self) -> Space:
        return self.campaign.space

    @property
    def base(self) -> RunConfig:
        return self.campaign.base

    @property
    def specs(self) -> list[TrialSpec]:
        """The trials known before anything runs: a grid's valid cells (a search has none)."""
        return list(self.campaign.specs)

    @property
    def skipped(self) -> list[Skipped]:
        return list(self.campaign.skipped)

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
    space_base, base, flat = under_settings(space.base, opts.overrides, opts.max_steps)
    space = replace(space, base=space_base)
    campaign = _campaign(space, base, opts.seed_rule)
    if not campaign.total:
        reasons = "; ".join(sorted({s.reason for s in campaign.skipped}))
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
        ("--peak-flops", opts.peak_flops),
    ):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{flag} {value}: must be a positive number")
    if opts.scheduler == "asha" and budgeted(base.train, space.params):
        raise ValueError(
            "--scheduler asha: this sweep's trials train to FLOP or token budgets, so their "
            "step counts differ and ASHA would compare them at equal steps, not equal compute; "
            "use --scheduler none"
        )
    if opts.study_storage is not None:
        _check_study_storage(opts.study_storage, campaign)
    check_read(space.name, campaign.models(), flat)
    for line in campaign.notes:  # cells differing only in fields their model does not read
        print(line)
    _check_workers(opts.workers_per_trial, base, campaign.specs)
    _check_vocab(campaign.specs)
    _check_memory(opts, campaign)
    _check_address(opts.ray_address)
    store = writer_store(opts.tracking_uri)
    return Plan(campaign, name, storage, store.uri, store.exists)


def _campaign(space: Space, base: RunConfig, rule: SeedRule | None) -> Campaign:
    """The space's campaign, or with ``--seeds auto`` a pilot that sizes its seeds."""
    if rule is None:
        return campaign_of(space, base)
    from nas.campaign.seeds import AutoSeedsCampaign

    return AutoSeedsCampaign.sized(space, base, rule)


def _check_workers(workers: int, base: RunConfig, specs: Sequence[TrialSpec]) -> None:
    """Every trial's global batch splits evenly over its data-parallel workers (a search's
    sampled batch size is checked when it is proposed: the trial is infeasible)."""
    from nas.trial.data_parallel import check_split

    try:
        for cfg in [base, *(s.config for s in specs)]:
            check_split(cfg, workers)
    except ValueError as err:
        raise ValueError(f"--workers-per-trial {workers}: {err}") from None


def _check_vocab(specs: Sequence[TrialSpec]) -> None:
    """Every cell's model takes the tokens of its data: a ``model.vocab_size`` an arm gives
    below its corpus's vocabulary is refused here, not in each of its trials (the base took the
    data's, or was checked, when ``under_settings`` built it)."""
    from trainers.corpus.vocab import check_vocab

    for spec in specs:
        try:
            check_vocab(spec.config)
        except ValueError as err:
            raise ValueError(f"{err} (arm {spec.arm!r})") from None


def trial_memory(opts: SweepOptions) -> tuple[int | None, bool]:
    """The memory one trial's device lends it (bytes; None: not known before a trial runs) and
    whether that device is a GPU. ``--device-memory`` states it (a GPU's unless
    ``--gpus-per-trial 0``); else a sweep on this machine trains on this machine's GPU, and a
    cluster's is unknown here (the driver's own device says nothing about its workers'). A
    fractional ``--gpus-per-trial`` shares one GPU between trials: each gets that share."""
    from nas.resources.memory import gpu_memory, has_cuda_driver

    gpus = opts.gpus_per_trial
    device: int | None
    if opts.device_memory is not None:
        device, gpu = opts.device_memory, gpus is None or gpus > 0
    elif opts.ray_address or gpus == 0:
        return None, False
    else:
        device, gpu = gpu_memory(), has_cuda_driver()
    if device is None:
        return None, gpu
    share = gpus if gpu and gpus is not None and 0 < gpus < 1 else 1.0
    return int(device * share), gpu


def stated_memory(opts: SweepOptions) -> int | None:
    """The memory a trial resolves 'auto' micro-batches against, where the command states it
    (``--device-memory``) or shares a GPU (a fractional ``--gpus-per-trial``); None: the trial
    measures its own device."""
    gpus = opts.gpus_per_trial
    shared = gpus is not None and 0 < gpus < 1
    return trial_memory(opts)[0] if opts.device_memory is not None or shared else None


def _check_memory(opts: SweepOptions, campaign: Campaign) -> None:
    """Every cell's memory plan fits its trial's device (``trial_memory``), within the usable
    memory its headroom leaves; a cell whose micro-batch is 'auto' fits where some micro-batch
    does. A search is planned at its corners (``nas.resources.memory.corners``): its largest
    sizes with each of its categorical values.
    Where the trials' device is not known here, nothing is checked, and a cluster sweep says
    how to plan it."""
    from nas.resources.memory import Target, cells, check_cells

    device, gpu = trial_memory(opts)
    if device is None:
        if opts.ray_address:
            print(
                "memory: not planned (the cluster's GPUs are not known to the driver); give "
                "--device-memory to check every cell before launch"
            )
        return
    workers, sharded = opts.workers_per_trial, opts.strategy == "fsdp"
    target = Target(device_bytes=device, gpu=gpu, workers=workers, sharded=sharded)
    check_cells(cells(campaign).items(), target)


def _check_study_storage(url: str, campaign: Campaign) -> None:
    """A search's study database: SQLite or PostgreSQL, reachable; a grid has no study."""
    if not campaign.has_study:
        space = campaign.space
        raise ValueError(
            f"--study-storage: only a search has an Optuna study; {space.name!r} is a {space.kind}"
        )
    check_study_storage(url)


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
