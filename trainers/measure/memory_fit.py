"""The cheapest change that makes a training step fit a device's memory, by the memory plan
(``trainers.measure.memory_plan``): first a smaller micro-batch (the largest divisor of the worker's
share that fits: the same step, more accumulation), then activation checkpointing (one more forward
per step), then sharding the parameters over the data-parallel workers (FSDP: communication every
step). ``train.micro_batch=auto`` is the same search from the whole share, without sharding.

A device does not lend all its memory to the plan's tensors: the headroom (``Headroom``) keeps
back the CUDA context with the libraries' workspaces and a share of the rest for the caching
allocator's fragmentation. Its figures are stated here (``GPU_HEADROOM``); a trial on a GPU
measures its context instead (``trainers.measure.device_memory``). Torch-free, like the plan."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainers.config import AUTO, RunConfig, micro_batch_of
from trainers.measure.memory_plan import MemoryPlan, gib, memory_plan


@dataclass(frozen=True, kw_only=True)
class Headroom:
    """What a device keeps back from the plan's tensors: ``context`` bytes (the CUDA context,
    cuBLAS's and the kernels' workspaces, the loaded kernels) and ``reserve``, a fraction of
    the rest (blocks the caching allocator holds but cannot hand out: fragmentation).
    ``source`` says whether the figures were stated or measured."""

    context: int
    reserve: float
    source: str = "stated"

    def usable(self, device_bytes: int) -> int:
        """The bytes of ``device_bytes`` the plan's tensors may take."""
        return max(0, int((device_bytes - self.context) * (1.0 - self.reserve)))

    def describe(self, device_bytes: int) -> str:
        """``71.1 GiB usable of 80 GiB (1 GiB context, 10% allocator reserve, stated)``."""
        parts = [f"{gib(self.context)} context"] if self.context else []
        parts.append(f"{self.reserve:.0%} allocator reserve")
        usable = gib(self.usable(device_bytes))
        return f"{usable} usable of {gib(device_bytes)} ({', '.join(parts)}, {self.source})"


# Stated, not yet measured by the harness: a CUDA context with cuBLAS's workspaces and the
# compiled and Triton kernels' modules takes a GiB or less on recent GPUs, and PyTorch's caching
# allocator reserves about a tenth more than it hands out in a training loop's steady state.
GPU_HEADROOM = Headroom(context=2**30, reserve=0.10)
# A CPU has no context to set aside; the allocator's reserve stands for the process's own.
CPU_HEADROOM = Headroom(context=0, reserve=0.10)


def headroom(gpu: bool) -> Headroom:
    """The stated headroom of a GPU or of a CPU."""
    return GPU_HEADROOM if gpu else CPU_HEADROOM


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


def fit_auto(
    cfg: RunConfig, budget: int, workers: int = 1, sharded: bool = False, gpu: bool = True
) -> Fit | None:
    """What ``train.micro_batch=auto`` resolves to within ``budget`` usable bytes: the largest
    micro-batch dividing the worker's share that fits as ``cfg`` is checkpointed, else the
    largest that fits with every sublayer checkpointed; None when one sequence does not."""
    fit = cheapest_fit(whole_share(cfg), budget, workers, sharded, gpu)
    if fit is None or fit.shard:
        return None
    micro = ("train.micro_batch", fit.plan.micro_batch)
    rest = tuple(item for item in fit.settings if item[0] != "train.micro_batch")
    return Fit(settings=(*rest, micro), shard=False, plan=fit.plan)


def whole_share(cfg: RunConfig) -> RunConfig:
    """``cfg`` with its micro-batch the worker's whole share (0): an 'auto' one before a device
    resolves it, as a split or a plan without one reads it."""
    return _train(cfg, micro_batch=0)


def applied(cfg: RunConfig, fit: Fit) -> RunConfig:
    """``cfg`` under ``fit``'s settings (its sharding is the caller's: a strategy, not a
    field)."""
    return _train(cfg, **{key.split(".", 1)[1]: value for key, value in fit.settings})


def resolve_auto(
    cfg: RunConfig,
    device_bytes: int,
    room: Headroom,
    workers: int = 1,
    sharded: bool = False,
    gpu: bool = True,
) -> RunConfig:
    """``cfg`` with ``train.micro_batch=auto`` resolved for a device of ``device_bytes`` under
    ``room`` (unchanged when the micro-batch is a number); ValueError, one line, when even one
    sequence with every sublayer checkpointed does not fit."""
    if cfg.train.micro_batch != AUTO:
        return cfg
    fit = fit_auto(cfg, room.usable(device_bytes), workers, sharded, gpu)
    if fit is not None:
        return applied(cfg, fit)
    one = _train(cfg, micro_batch=1, checkpointing="sublayer", batch_size=workers)
    need = memory_plan(one, workers, sharded, gpu).total
    shard = "" if sharded or workers == 1 else "shard it over the workers (--strategy fsdp), "
    raise ValueError(
        f"train.micro_batch=auto: one sequence with every sublayer checkpointed needs about "
        f"{gib(need)} per device, more than the {room.describe(device_bytes)}; {shard}use a "
        "device with more memory, or a smaller model"
    )


def _train(cfg: RunConfig, **changes: Any) -> RunConfig:
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, **changes))


def _largest_micro_batch(
    cfg: RunConfig, device_bytes: int, workers: int, sharded: bool, gpu: bool
) -> tuple[RunConfig, MemoryPlan] | None:
    """``cfg`` with the largest micro-batch, no larger than its own, dividing the worker's
    share, under which the plan fits; None when even one sequence does not."""
    share = cfg.train.batch_size // workers
    current = micro_batch_of(cfg.train) or share
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
