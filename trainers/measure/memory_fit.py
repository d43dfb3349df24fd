"""The cheapest change that makes a training step fit a device's memory, by the memory plan
(``trainers.measure.memory_plan``): first a smaller micro-batch (the largest divisor of the worker's
share that fits: the same step, more accumulation), then activation checkpointing (one more forward
per step), then sharding the parameters over the data-parallel workers (FSDP: communication every
step). Torch-free, like the plan."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainers.config import RunConfig
from trainers.measure.memory_plan import MemoryPlan, memory_plan


@dataclass(frozen=True, kw_only=True)
class Fit:
    """A setting that fits: the train fields to set (empty: ``cfg`` fits as it is), whether the
    parameters must be sharded over the workers, and the plan under it."""

    settings: tuple[tuple[str, object], ...]
    shard: bool
    plan: MemoryPlan

    def advice(self) -> str:
        """What to give the command: ``--set train.micro_batch=2 --set ...``, and sharding."""
        text = " ".join(f"--set {key}={value}" for key, value in self.settings)
        if self.shard:
            shard = f"--strategy fsdp (the parameters sharded over the {self.plan.workers} workers)"
            text = f"{text} {shard}" if text else shard
        return text or "nothing: it fits"


def cheapest_fit(
    cfg: RunConfig, device_bytes: int, workers: int = 1, sharded: bool = False, gpu: bool = True
) -> Fit | None:
    """The first of these under which the plan fits ``device_bytes``: as it is; a smaller
    micro-batch; checkpointing every sublayer (with the largest micro-batch that then fits);
    sharding over ``workers`` (with both); None when none does."""
    steps = [(cfg, sharded)]
    if cfg.train.checkpointing != "sublayer":
        steps.append((_train(cfg, checkpointing="sublayer"), sharded))
    if workers > 1 and not sharded:
        steps.append((steps[-1][0], True))
    for candidate, shard in steps:
        fit = _largest_micro_batch(candidate, device_bytes, workers, shard, gpu)
        if fit is not None:
            return _as_fit(cfg, fit, shard and not sharded)
    return None


def _train(cfg: RunConfig, **changes: Any) -> RunConfig:
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **changes))


def _largest_micro_batch(
    cfg: RunConfig, device_bytes: int, workers: int, sharded: bool, gpu: bool
) -> tuple[RunConfig, MemoryPlan] | None:
    """``cfg`` with the largest micro-batch, no larger than its own, dividing the worker's
    share, under which the plan fits; None when even one sequence does not."""
    share = cfg.train.batch_size // workers
    current = cfg.train.micro_batch or share
    for micro in range(current, 0, -1):
        if share % micro:
            continue
        candidate = cfg if micro == current else _train(cfg, micro_batch=micro)
        plan = memory_plan(candidate, workers, sharded, gpu)
        if plan.total <= device_bytes:
            return candidate, plan
    return None


def _as_fit(original: RunConfig, found: tuple[RunConfig, MemoryPlan], shard: bool) -> Fit:
    """The train fields ``found`` changed from ``original``, checkpointing first."""
    cfg, plan = found
    settings: list[tuple[str, object]] = []
    if cfg.train.checkpointing != original.train.checkpointing:
        settings.append(("train.checkpointing", cfg.train.checkpointing))
    if cfg.train.micro_batch != original.train.micro_batch:
        settings.append(("train.micro_batch", cfg.train.micro_batch))
    return Fit(settings=tuple(settings), shard=shard, plan=plan)
