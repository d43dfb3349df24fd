"""``--device-memory``: reading the size, finding a GPU's own when none is given, and holding a
sweep's cells to it (``trainers.measure.memory_plan``, ``trainers.measure.memory_fit``) before
anything launches.

A CPU-only driver without the flag plans nothing: a CPU trial's memory is the machine's, which
swaps rather than failing at a fixed size, and the default path stays as fast as it was."""

from __future__ import annotations

import itertools
import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from search_spaces.distributions import Distribution, FloatRange, IntRange
from trainers.config import AUTO, RunConfig
from trainers.measure.memory_fit import (
    Fit,
    Headroom,
    applied,
    cheapest_fit,
    fit_auto,
    headroom,
    whole_share,
)
from trainers.measure.memory_plan import MemoryPlan, gib, memory_plan

if TYPE_CHECKING:
    from nas.campaign.kinds import Campaign

UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes from ``80GiB``, ``24GB``, ``512MiB``, ``1.5TiB`` or a plain number of bytes;
    ValueError naming the flag and the forms allowed."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in UNITS or float(match.group(1)) <= 0:
        raise ValueError(
            f"--device-memory {text!r}: give a positive size such as 80GiB, 24GB, 512MiB or a "
            "number of bytes"
        )
    return int(float(match.group(1)) * UNITS[unit])


def stated_device(memory: str | None, gpu: str | None) -> int | None:
    """The trials' device memory a command states: ``--device-memory``, else the memory of the
    GPU ``--gpu`` names (``trainers.measure.gpu_types``); None for neither. ValueError, one
    line, for a size or a GPU it does not know."""
    if memory is not None:
        return parse_size(memory)
    if gpu is None:
        return None
    from trainers.measure.gpu_types import gpu_type

    return gpu_type(gpu).memory


def has_cuda_driver() -> bool:
    """Whether this machine has an NVIDIA driver, found without importing torch."""
    return Path("/proc/driver/nvidia").exists() or shutil.which("nvidia-smi") is not None


def gpu_memory() -> int | None:
    """The smallest total memory of this machine's visible GPUs; None without any (torch is
    imported only where a driver is present)."""
    if not has_cuda_driver():
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    count = torch.cuda.device_count()
    return min(torch.cuda.get_device_properties(i).total_memory for i in range(count))


@dataclass(frozen=True, kw_only=True)
class Target:
    """What a sweep's trials run on: the memory of one device (a trial's share of it), whether
    it is a GPU (what 'auto' precision resolves to), the data-parallel workers and whether they
    shard the parameters. A plan fits where its total is within the usable bytes: the memory
    less the headroom of the device's kind (``trainers.measure.memory_fit``)."""

    device_bytes: int
    gpu: bool
    workers: int = 1
    sharded: bool = False

    @property
    def room(self) -> Headroom:
        return headroom(self.gpu)

    @property
    def usable(self) -> int:
        return self.room.usable(self.device_bytes)

    def describe(self) -> str:
        return self.room.describe(self.device_bytes)

    def fit(self, cfg: RunConfig) -> Fit | None:
        """The cheapest setting under which ``cfg`` fits (None: none does)."""
        return cheapest_fit(cfg, self.usable, self.workers, self.sharded, self.gpu)

    def auto(self, cfg: RunConfig) -> Fit | None:
        """What ``train.micro_batch=auto`` resolves ``cfg`` to here (None: nothing fits)."""
        return fit_auto(cfg, self.usable, self.workers, self.sharded, self.gpu)


def plan_line(plan: MemoryPlan) -> str:
    """One cell's plan, per device."""
    return (
        f"params {gib(plan.params)}, grads+optimizer {gib(plan.states)}, activations "
        f"{gib(plan.activations + plan.logits)} (depth state {gib(plan.depth_state)}, micro-batch "
        f"{plan.micro_batch}), total {gib(plan.total)} ({plan.precision})"
    )


def cells(campaign: Campaign) -> dict[str, RunConfig]:
    """What a plan is made for: a grid's arms (a tuned grid's cells once per arm: its stage
    trains each at several learning rates, which change neither memory nor time), or the
    corners of a search (``corners``), or its base where it samples nothing that sizes it."""
    specs = getattr(campaign, "cells", ()) or campaign.specs
    if specs:
        return {s.arm: s.config for s in specs}
    if campaign.space.kind == "search":
        return corners(campaign) or {"base": campaign.base}
    return {"base": campaign.base}


# A search's categorical parameters are planned at every combination of their values up to this
# many; beyond it only the first combinations are planned.
CORNERS = 64


def corners(campaign: Campaign) -> dict[str, RunConfig]:
    """The points of a search that bound its memory: every numeric parameter at its largest
    value (width, depth, batch, context: memory grows with each) and every categorical one (a
    wiring, a norm) at each of its values, up to ``CORNERS`` combinations. A corner that the
    configuration rejects is left out (the search would find it infeasible)."""
    numeric, categorical = {}, {}
    for key, dist in campaign.space.params.items():
        values = _values(dist)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            numeric[key] = max(values)
        else:
            categorical[key] = values
    out: dict[str, RunConfig] = {}
    for combo in itertools.islice(itertools.product(*categorical.values()), CORNERS):
        point = {**numeric, **dict(zip(categorical, combo, strict=True))}
        try:
            spec = campaign.spec_for(point)
        except ValueError:
            continue
        label = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in point.items())
        out[f"largest ({label})"] = spec.config
    return out


def _values(dist: Distribution) -> tuple[Any, ...]:
    """The values a distribution can draw that bound it: a choice's, a range's ends."""
    if isinstance(dist, (IntRange, FloatRange)):
        return (dist.low, dist.high)
    return dist.grid()


def as_run(cfg: RunConfig, target: Target | None) -> RunConfig:
    """``cfg`` as its trial runs on ``target``: ``train.micro_batch=auto`` resolved there (a
    cell nothing fits, and any cell without a target, as its whole share: what the check
    refuses, or plans per worker)."""
    if cfg.train.micro_batch != AUTO:
        return cfg
    fit = None if target is None else target.auto(cfg)
    return applied(cfg, fit) if fit is not None else whole_share(cfg)


def _shortfall(cfg: RunConfig, target: Target) -> tuple[MemoryPlan, Fit | None] | None:
    """None where ``cfg``'s plan fits the device (for 'auto': some micro-batch does); else the
    plan and the cheapest setting that would fit (None: none does)."""
    if cfg.train.micro_batch == AUTO:
        if target.auto(cfg) is not None:
            return None
        cfg = whole_share(cfg)
    plan = memory_plan(cfg, target.workers, target.sharded, target.gpu)
    if plan.total <= target.usable:
        return None
    return plan, target.fit(cfg)


def choice(cfg: RunConfig, target: Target | None) -> str:
    """What 'auto' chose for ``cfg`` (``micro-batch auto: 16``, and checkpointing where it
    needs it), or "" for a micro-batch given as a number."""
    if cfg.train.micro_batch != AUTO:
        return ""
    if target is None:
        return "micro-batch auto: chosen on each trial's device"
    fit = target.auto(cfg)
    if fit is None:
        return "micro-batch auto: nothing fits"
    run = applied(cfg, fit)
    changed = run.train.checkpointing != cfg.train.checkpointing
    return f"micro-batch auto: {run.train.micro_batch}" + (
        ", every sublayer checkpointed" if changed else ""
    )


def verdict(cfg: RunConfig, target: Target) -> str:
    """``fits 71.1 GiB usable of 80 GiB (...)`` or ``does not fit ...; cheapest that fits:
    --set ...``."""
    size, short = target.describe(), _shortfall(cfg, target)
    if short is None:
        return f"fits {size}"
    fit = short[1]
    advice = "none fits" if fit is None else f"cheapest that fits: {fit.advice()}"
    return f"does not fit {size}; {advice}"


def check_cells(arms: Iterable[tuple[str, RunConfig]], target: Target) -> None:
    """ValueError (one line) naming the first cell whose plan does not fit, its estimate, the
    usable memory and the cheapest setting that would fit (or that none does)."""
    for arm, cfg in arms:
        short = _shortfall(cfg, target)
        if short is None:
            continue
        plan, fit = short
        advice = (
            "no micro-batch, checkpointing or sharding fits it"
            if fit is None
            else f"the cheapest setting that fits: {fit.advice()} ({gib(fit.plan.total)})"
        )
        raise ValueError(
            f"--device-memory: arm {arm} needs about {gib(plan.total)} per device "
            f"({plan.precision}, micro-batch {plan.micro_batch}), more than the "
            f"{target.describe()}; {advice}"
        )
