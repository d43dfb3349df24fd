"""``--device-memory``: reading the size, finding a GPU's own when none is given, and holding a
sweep's cells to it (``trainers.measure.memory_plan``, ``trainers.measure.memory_fit``) before
anything launches.

A CPU-only driver without the flag plans nothing: a CPU trial's memory is the machine's, which
swaps rather than failing at a fixed size, and the default path stays as fast as it was."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from nas.spec import TrialSpec
from trainers.config import RunConfig
from trainers.measure.memory_fit import Fit, cheapest_fit
from trainers.measure.memory_plan import MemoryPlan, gib, memory_plan

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
    """What a sweep's trials run on: the memory of one device, whether it is a GPU (what 'auto'
    precision resolves to), the data-parallel workers and whether they shard the parameters."""

    device_bytes: int
    gpu: bool
    workers: int = 1
    sharded: bool = False


def plan_line(plan: MemoryPlan) -> str:
    """One cell's plan, per device."""
    return (
        f"params {gib(plan.params)}, grads+optimizer {gib(plan.states)}, activations "
        f"{gib(plan.activations + plan.logits)} (depth state {gib(plan.depth_state)}, micro-batch "
        f"{plan.micro_batch}), total {gib(plan.total)} ({plan.precision})"
    )


def cells(specs: Iterable[TrialSpec], base: RunConfig) -> dict[str, RunConfig]:
    """Each arm's configuration, or the base's for a search (its sampled sizes are not known
    before it runs): what a plan is made for."""
    return {s.arm: s.config for s in specs} or {"base": base}


def _shortfall(cfg: RunConfig, target: Target) -> tuple[MemoryPlan, Fit | None] | None:
    """None where ``cfg``'s plan fits the device; else the plan and the cheapest setting that
    would fit (None: none does)."""
    plan = memory_plan(cfg, target.workers, target.sharded, target.gpu)
    if plan.total <= target.device_bytes:
        return None
    return plan, cheapest_fit(cfg, target.device_bytes, target.workers, target.sharded, target.gpu)


def verdict(cfg: RunConfig, target: Target) -> str:
    """``fits 80 GiB`` or ``does not fit 512 MiB; cheapest that fits: --set ...``."""
    size, short = gib(target.device_bytes), _shortfall(cfg, target)
    if short is None:
        return f"fits {size}"
    fit = short[1]
    advice = "none fits" if fit is None else f"cheapest that fits: {fit.advice()}"
    return f"does not fit {size}; {advice}"


def check_cells(arms: Iterable[tuple[str, RunConfig]], target: Target) -> None:
    """ValueError (one line) naming the first cell whose plan does not fit, its estimate, the
    device memory and the cheapest setting that would fit (or that none does)."""
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
            f"({plan.precision}, micro-batch {plan.micro_batch}), more than "
            f"{gib(target.device_bytes)}; {advice}"
        )
