"""``nas sweep``: the CLI surface of ``nas.sweep.run``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from nas.exits import exit_statuses
from record.uri import STUDY_STORAGE_ENV, TRACKING_URI_HELP
from search_spaces.seed_choice import DEFAULT_MAX_SEEDS, SeedRule
from stats.power import DEFAULT_EFFECT


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="train every trial of a search space on Ray Tune, recorded in MLflow",
        description="Run a built-in space (see `nas spaces`) or a space YAML file. Re-running "
        "the same command after an interruption resumes it; re-running it with more seeds, "
        "arms, values or trials extends the sweep (only the new trials run); a change to what "
        f"recorded trials mean (--set, --max-steps, an edited arm) is refused. Exit status: "
        f"{exit_statuses()}.",
    )
    p.add_argument("space", help="a built-in space name or a space YAML file")
    p.add_argument("--name", help="sweep name: MLflow experiment and Tune folder (default: space)")
    p.add_argument("--trials", type=int, help="searches: number of sampled trials")
    p.add_argument("--concurrency", type=int, default=1, help="trials at once (default 1)")
    p.add_argument(
        "--cpus-per-trial",
        type=float,
        help="CPU cores per trial (per worker with --workers-per-trial), which sets its torch "
        "threads (default: one node's cores divided by --concurrency and the workers)",
    )
    p.add_argument(
        "--gpus-per-trial",
        type=float,
        help="per trial (per worker with --workers-per-trial); fractions allowed (default: 1 "
        "when the cluster has GPUs, else 0)",
    )
    p.add_argument(
        "--workers-per-trial",
        type=int,
        default=1,
        metavar="N",
        help="train each trial data-parallel over N Ray Train workers (N GPUs, or N CPU "
        "processes), each reserving --cpus-per-trial and --gpus-per-trial; train.batch_size "
        "stays the global batch and must divide by N, each worker's share by "
        "train.micro_batch (default 1: one process)",
    )
    p.add_argument(
        "--strategy",
        default="ddp",
        metavar="{ddp,fsdp}",
        help="with --workers-per-trial N: ddp keeps the whole model on every worker; fsdp "
        "shards every Transformer block over the N >= 2 workers (FSDP2), for a model larger "
        "than one device's memory; the same losses, record and checkpoints (default ddp)",
    )
    p.add_argument("--max-steps", type=int, help="override train.max_steps for every trial")
    p.add_argument(
        "--seeds",
        help="comma-separated seeds, replacing the space's; or 'auto': the space's seeds (at "
        "least 3) run as a pilot, whose noise alone (the sd of each arm's per-seed differences "
        "from its baseline, never their mean) sets the seeds every arm then gets: the most any "
        "comparison needs to detect --effect at 80%% power and Holm's first-step level, at most "
        "--max-seeds; the choice is printed and kept on the parent run (seeds.json)",
    )
    p.add_argument(
        "--effect",
        metavar="NATS",
        help=f"--seeds auto: the difference in final validation loss to detect (default "
        f"{DEFAULT_EFFECT}, the smallest gain the AttnRes paper reports)",
    )
    p.add_argument(
        "--max-seeds",
        type=int,
        metavar="N",
        help=f"--seeds auto: the most seeds per arm (default {DEFAULT_MAX_SEEDS})",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a base configuration key (repeatable)",
    )
    p.add_argument(
        "--scheduler",
        choices=("auto", "asha", "none"),
        default="auto",
        help="early stopping: auto = ASHA for searches, none for grids",
    )
    p.add_argument("--tracking-uri", help=TRACKING_URI_HELP)
    p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS or local)")
    p.add_argument("--storage-path", help="Tune state and checkpoints (default ./ray_results)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="insist on continuing a stored sweep (an error if there is none; without it, a "
        "stored sweep of the same name is continued too)",
    )
    p.add_argument(
        "--restart",
        action="store_true",
        help="archive the stored Tune state beside itself and start the sweep again as a new "
        "parent run in the same experiment (needed to change the base configuration of a "
        "sweep that has trials; nothing recorded is deleted)",
    )
    p.add_argument(
        "--trial-timeout",
        type=float,
        metavar="MINUTES",
        help="end a trial that trains longer than this (status timed_out, its last "
        "validation kept)",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        metavar="HOURS",
        help="launch no trial after this much wall time; running trials stop at their next "
        "checkpoint and the same command continues the sweep (exit status 75)",
    )
    p.add_argument(
        "--study-storage",
        metavar="URL",
        help=f"searches: keep the Optuna study in this database, under the sweep's name; give "
        f"one with a password as {STUDY_STORAGE_ENV} (the environment, which the process list "
        "does not show) or keep the password in ~/.pgpass (sqlite:///<file> or "
        "postgresql://user@host/db). It outlives the storage path, `nas ui --optuna` shows it "
        "while the sweep runs, and a driver on another machine continues it",
    )
    p.add_argument(
        "--peak-flops",
        type=float,
        metavar="FLOP/S",
        help="the peak each trial's MFU is measured against, e.g. 989.5e12 (default: the "
        "GPU's dense bf16 or fp32 datasheet peak from trainers/measure/device_cost.py, or a timed "
        "matmul on a CPU or an unlisted GPU); recorded per trial, not part of the plan",
    )
    p.add_argument(
        "--device-memory",
        metavar="SIZE",
        help="memory of the trials' device, e.g. 80GiB, 24GB, 512MiB or bytes (a GPU's unless "
        "--gpus-per-trial 0; a fractional --gpus-per-trial gets its share): a sweep any of "
        "whose cells' memory plan (trainers/measure/memory_plan.py: parameters, gradients, "
        "AdamW state, one micro-batch's activations) exceeds its usable part (less the "
        "headroom, trainers/measure/memory_fit.py) is refused before anything launches, with "
        "the cheapest --set that fits, and train.micro_batch=auto is chosen within it (default: "
        "a sweep on this machine, its GPU's memory; on a cluster or a CPU-only machine, no "
        "check, and each trial chooses 'auto' on its own device)",
    )
    p.add_argument(
        "--gpu",
        metavar="NAME",
        help="the trials' GPU by name (h100-sxm, h200-sxm, a100-80gb, l4, ...: "
        "trainers/measure/gpu_types.py): its memory where --device-memory is not given",
    )
    p.add_argument("--verbose", action="store_true", help="show Ray's own output")
    p.set_defaults(run=run)


def _seed_rule(args: argparse.Namespace) -> SeedRule | None:
    """``--seeds auto``'s rule; ValueError for --effect or --max-seeds without it, or a bad one."""
    if args.seeds != "auto":
        if args.effect is not None or args.max_seeds is not None:
            raise ValueError("--effect and --max-seeds size --seeds auto; give --seeds auto")
        return None
    try:
        effect = DEFAULT_EFFECT if args.effect is None else float(args.effect)
    except ValueError:
        raise ValueError(f"--effect {args.effect!r}: give a positive number of nats") from None
    cap = DEFAULT_MAX_SEEDS if args.max_seeds is None else args.max_seeds
    return SeedRule(effect=effect, cap=cap)


def _seeds(text: str | None) -> tuple[int, ...] | None:
    if not text or text == "auto":
        return None
    try:
        return tuple(int(s) for s in text.split(","))
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers") from None


def options(args: argparse.Namespace) -> Any:
    """The parsed command as ``nas.sweep.plan.SweepOptions``; ValueError for values no sweep
    can take."""
    from nas.resources.memory import stated_device
    from nas.sweep.plan import SweepOptions
    from nas.trial.data_parallel import check_strategy

    if (
        args.concurrency < 1
        or (args.cpus_per_trial or 1) <= 0
        or (args.gpus_per_trial or 0) < 0
        or args.workers_per_trial < 1
    ):
        raise ValueError(
            "--concurrency and --workers-per-trial must be >= 1, --cpus-per-trial > 0, "
            "--gpus-per-trial >= 0"
        )
    check_strategy(args.strategy, args.workers_per_trial, "--strategy")
    return SweepOptions(
        space=args.space,
        name=args.name,
        trials=args.trials,
        concurrency=args.concurrency,
        cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial,
        workers_per_trial=args.workers_per_trial,
        strategy=args.strategy,
        max_steps=args.max_steps,
        seeds=_seeds(args.seeds),
        seed_rule=_seed_rule(args),
        overrides=tuple(args.overrides),
        scheduler={"none": "fifo"}.get(args.scheduler, args.scheduler),
        tracking_uri=args.tracking_uri,
        address=args.address,
        storage_path=args.storage_path,
        resume=args.resume,
        restart=args.restart,
        trial_timeout_min=args.trial_timeout,
        time_budget_h=args.time_budget,
        study_storage=args.study_storage or os.environ.get(STUDY_STORAGE_ENV) or None,
        peak_flops=args.peak_flops,
        device_memory=stated_device(args.device_memory, args.gpu),
        verbose=args.verbose,
    )


def run(args: argparse.Namespace) -> int:
    from nas.sweep.run import run_sweep

    return run_sweep(options(args))
