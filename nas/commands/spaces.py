"""``nas spaces``: list the built-in search spaces, or show one (built-in or a YAML file)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from trainers.measure.time_plan import DEFAULT_MFU, duration

if TYPE_CHECKING:
    from nas.campaign.kinds import Campaign
    from search_spaces import Space
    from trainers.config import RunConfig


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "spaces",
        help="list the built-in search spaces, or show one",
        description="Without a name: every built-in space in one line. With a name or a YAML "
        "file: its arms, parameters, seeds, the number of valid and skipped cells, the "
        "AttnRes blocks (N, and the sublayers in each) of each AttnRes configuration, and "
        "each cell's memory plan per device (trainers/measure/memory_plan.py; 'auto' precision "
        "as on "
        "a GPU).",
    )
    p.add_argument("space", nargs="?", help="a built-in space name or a space YAML file")
    p.add_argument(
        "--device-memory",
        metavar="SIZE",
        help="memory of one device, e.g. 80GiB, 24GB, 512MiB or bytes: also say whether each "
        "cell fits it, and the cheapest --set that would where it does not",
    )
    p.add_argument(
        "--gpu",
        metavar="NAME",
        help="a GPU by name (h100-sxm, h200-sxm, a100-80gb, l4, ...: "
        "trainers/measure/gpu_types.py): its memory and dense bf16 peak where --device-memory "
        "and --peak-flops are not given",
    )
    p.add_argument(
        "--peak-flops",
        type=float,
        metavar="FLOP/S",
        help="the dense bf16 peak of one device, e.g. 989e12 (H100 SXM): also estimate each "
        "trial's time and the sweep's device-hours (trainers/measure/time_plan.py)",
    )
    p.add_argument(
        "--mfu",
        type=float,
        default=DEFAULT_MFU,
        help="the model FLOPs utilization the estimate assumes (default: %(default)s)",
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="time a few optimizer steps of each distinct cell on this machine's device, each "
        "in its own process, after a warm-up step: per cell the measured step, tokens/s, MFU, "
        "the first step (compilation) apart, the peak memory beside the plan, and the trial's "
        "and the sweep's training time measured and by FLOPs (nas/resources/cell_timing.py)",
    )
    p.add_argument(
        "--measure-steps",
        type=int,
        default=10,
        metavar="N",
        help="steps timed per cell after the warm-up (default: %(default)s)",
    )
    p.set_defaults(run=run_spaces)


def run_spaces(args: argparse.Namespace) -> int:
    from nas.resources.memory import stated_device
    from search_spaces import BUILTIN, get_space

    device = stated_device(args.device_memory, args.gpu)
    if args.gpu is not None and args.peak_flops is None:
        from trainers.measure.gpu_types import gpu_type

        args.peak_flops = gpu_type(args.gpu).bf16
    if args.peak_flops is not None and (args.peak_flops <= 0 or not 0 < args.mfu <= 1):
        raise ValueError(
            f"--peak-flops {args.peak_flops:g} at --mfu {args.mfu:g}: the peak must be positive "
            "and the MFU in (0, 1]"
        )
    if args.measure_steps < 2:
        raise ValueError(f"--measure-steps {args.measure_steps}: give 2 or more")
    if not args.space:
        width = max(map(len, BUILTIN))
        for name, space in BUILTIN.items():
            print(f"{name:<{width}}  {space.description}")
        return 0
    steps = args.measure_steps if args.measure else None
    _show(get_space(args.space), device, args.peak_flops, args.mfu, steps)
    return 0


def _show(
    space: Space, device: int | None, peak: float | None, mfu: float, steps: int | None
) -> None:
    from nas.campaign.kinds import campaign_of
    from trainers.settings import under_settings

    print(f"{space.name} ({space.kind}): {space.description}")
    for name, overrides in space.arms.items():
        print(f"  arm {name}: {overrides}")
    for key, dist in space.params.items():
        print(f"  param {key}: {dist.to_data()}")
    print(f"  seeds: {list(space.seeds)}")
    _, base, _ = under_settings(space.base, ())
    campaign = campaign_of(space, base)
    for line in [*campaign.describe(), *campaign.notes]:
        print(f"  {line}")
    _memory(campaign, device)
    if peak is not None:
        _time(campaign, device, peak, mfu)
    if steps is not None:
        from nas.resources.measured_time import show_measured

        show_measured(campaign, device, peak, mfu, steps)


def _memory(campaign: Campaign, device: int | None) -> None:
    """Each cell's (arm's) memory plan on one device, and with ``device`` whether it fits
    (within its usable memory: the headroom kept back) and what 'auto' micro-batches chose;
    a search is planned at its corners (nas.resources.memory.corners)."""
    from nas.resources.memory import Target, as_run, cells, choice, plan_line, verdict
    from trainers.measure.memory_plan import memory_plan

    target = None if device is None else Target(device_bytes=device, gpu=True)
    print("  memory per device (1 worker; 'auto' precision as on a GPU):")
    for arm, cfg in cells(campaign).items():
        picked = choice(cfg, target)
        line = f"    {arm}: {plan_line(memory_plan(as_run(cfg, target)))}"
        line += f"; {picked}" if picked else ""
        if target is not None:
            line += f"; {verdict(cfg, target)}"
        print(line)


def _as_run(cfg: RunConfig, device: int | None) -> tuple[RunConfig, str]:
    """``cfg`` as it would run on ``device`` ('auto' resolved there, or under the cheapest
    setting that fits it: a smaller micro-batch, then checkpointing), and that setting's
    ``--set``s ('' if none)."""
    from nas.resources.memory import Target, as_run
    from trainers.measure.memory_fit import applied

    target = None if device is None else Target(device_bytes=device, gpu=True)
    run = as_run(cfg, target)
    if run is not cfg or target is None:
        return run, ""
    fit = target.fit(cfg)
    if fit is None or fit.shard or not fit.settings:
        return cfg, ""
    return applied(cfg, fit), fit.advice()


def _time(campaign: Campaign, device: int | None, peak: float, mfu: float) -> None:
    """Each cell's time per trial on one device at ``mfu`` of ``peak``, and the sweep's
    device-hours over every trial it plans (a learning-rate stage's included)."""
    from nas.resources.memory import cells
    from trainers.measure.time_plan import time_plan

    where = "under the setting that fits the device" if device is not None else "as configured"
    print(f"  time per trial on one device ({where}; {peak / 1e12:g} TFLOP/s at {mfu:.0%} MFU):")
    for arm, cfg in cells(campaign).items():
        run, advice = _as_run(cfg, device)
        t = time_plan(run, peak, mfu)
        line = f"    {arm}: {t.tokens:.3g} tokens, {t.flops:.3g} training FLOPs"
        print(f"{line}, {duration(t.seconds)}" + (f" (with {advice})" if advice else ""))
    if campaign.space.kind == "search":
        n = campaign.space.trials
        print(
            f"  sweep: a search samples its {n} trials; each takes at most the largest "
            f"corner's time above ({n} x it bounds the sweep)"
        )
        return
    trials = [s.config for s in campaign.specs] + [c.config for c in getattr(campaign, "cells", ())]
    seconds = sum(time_plan(_as_run(cfg, device)[0], peak, mfu).seconds for cfg in trials)
    total = f"{seconds / 3600:,.1f} device-hours" if seconds >= 3600 else duration(seconds)
    print(
        f"  sweep: {len(trials)} trials, {total} (one device per trial; an estimate: "
        "validation, diagnostics and start-up are not counted)"
    )
