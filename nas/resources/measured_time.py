"""``nas spaces SPACE --measure``: the time plan from measurement. Each distinct cell is timed on
this machine's device (``nas.resources.cell_timing``, a process per cell) and printed beside its memory
plan and its FLOP estimate (``trainers.measure.time_plan``, at the assumed MFU); the sweep's
device-hours follow from every trial's steps at its cell's measured step."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from nas.resources.cell_timing import OOM, CellTiming, measure
from nas.resources.memory import Target, as_run, cells
from trainers.budget import resolve_budget
from trainers.config import Checkpointing, RunConfig
from trainers.measure.memory_plan import gib, memory_plan
from trainers.measure.time_plan import duration, time_plan

if TYPE_CHECKING:
    from nas.campaign.kinds import Campaign

CELL_TIMEOUT_S = 600.0


def show_measured(
    campaign: Campaign, device: int | None, peak: float | None, mfu: float, steps: int
) -> None:
    """Measure every cell of ``campaign`` (as its trials run on ``device`` where given) and
    print the plan; ValueError, one line naming the cell and the cheapest fix, where a cell
    fails to run."""
    target = None if device is None else Target(device_bytes=device, gpu=True)
    runs = {arm: as_run(cfg, target) if target else cfg for arm, cfg in cells(campaign).items()}
    print(
        f"  measured on this machine ({steps} steps after a warm-up step, each cell in its own "
        "process; each line as its cell finishes):",
        flush=True,
    )
    start = time.perf_counter()
    timings = {}
    for arm, cfg in runs.items():  # printed as measured: a run stopped early keeps its lines
        timings[arm] = _measure(arm, cfg, steps)
        print(
            f"    {arm} ({timings[arm].device}): {_line(cfg, timings[arm], peak, mfu)}", flush=True
        )
    print(f"  the measurement took {time.perf_counter() - start:.0f} s")
    _sweep(campaign, runs, timings, peak, mfu)


def _measure(arm: str, cfg: RunConfig, steps: int) -> CellTiming:
    try:
        return measure(cfg, steps, CELL_TIMEOUT_S)
    except ValueError as err:
        fix = (
            "--set train.micro_batch=auto with --device-memory, or --set "
            "train.checkpointing=sublayer"
            if str(err) == OOM
            else "run it alone with nas train to see the whole error"
        )
        raise ValueError(f"--measure: cell {arm}: {err}; cheapest fix: {fix}") from None


def _line(cfg: RunConfig, timing: CellTiming, peak: float | None, mfu: float) -> str:
    """One cell: measured step, tokens/s, MFU, first step, peak against the plan, trial time
    measured and estimated."""
    t = resolve_budget(cfg).train
    tokens = t.batch_size * cfg.model.seq_len / timing.step_s
    ran = _as_trained(cfg, timing)
    plan = memory_plan(ran, gpu=timing.device.startswith("cuda"))
    estimate = f" (plan {gib(plan.total)}, micro-batch {plan.micro_batch})"
    trial = timing.trial_seconds(t.max_steps)
    flop = time_plan(resolve_budget(cfg), peak or timing.peak_flops, mfu).seconds
    return (
        f"step {timing.step_s:.3g} s, {tokens:,.0f} tokens/s, MFU {timing.mfu:.1%}, first step "
        f"{timing.first_step_s:.3g} s, peak {gib(timing.peak_mem_mb * 2**20)}{estimate}; trial "
        f"{duration(trial)} measured, {duration(flop)} by FLOPs at {mfu:.0%} MFU"
    )


def _as_trained(cfg: RunConfig, timing: CellTiming) -> RunConfig:
    """``cfg`` with the micro-batch and checkpointing its measurement trained with."""
    how: Checkpointing = "sublayer" if timing.checkpointing == "sublayer" else "none"
    train = dataclasses.replace(cfg.train, micro_batch=timing.micro_batch, checkpointing=how)
    return dataclasses.replace(cfg, train=train)


def _sweep(
    campaign: Campaign,
    runs: dict[str, RunConfig],
    timings: dict[str, CellTiming],
    peak: float | None,
    mfu: float,
) -> None:
    """The sweep's device-hours: every planned trial at its cell's measured step (a search:
    its trials at the slowest corner's), beside the FLOP estimate."""
    first = next(iter(timings.values()))
    peak_flops = peak or first.peak_flops
    if campaign.space.kind == "search":
        slowest = max(runs, key=lambda a: timings[a].trial_seconds(_steps(runs[a])))
        trials = [runs[slowest]] * campaign.space.trials
        matched = {id(c): timings[slowest] for c in trials}
    else:
        trials = [s.config for s in campaign.specs]
        trials += [c.config for c in getattr(campaign, "cells", ())]
        by_model = {(c.model, c.train.batch_size): timings[a] for a, c in runs.items()}
        matched = {id(c): by_model[(c.model, c.train.batch_size)] for c in trials}
    measured = sum(matched[id(c)].trial_seconds(_steps(c)) for c in trials)
    estimated = sum(time_plan(resolve_budget(c), peak_flops, mfu).seconds for c in trials)
    print(
        f"  sweep, measured: {len(trials)} trials, {duration(measured)} of training (one device "
        f"per trial; start-up, validation and diagnostics not counted); by FLOPs at {mfu:.0%} "
        f"MFU of {peak_flops / 1e12:.3g} TFLOP/s: {duration(estimated)}"
    )


def _steps(cfg: RunConfig) -> int:
    return resolve_budget(cfg).train.max_steps
