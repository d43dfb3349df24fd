"""The memory of the device a run trains on, and what it keeps back, for ``train.micro_batch=auto``
(``trainers.measure.memory_fit.resolve_auto``).

On a GPU the context is measured, not stated: the bytes the device already holds once this
process has started CUDA (its own context and workspaces, and whatever other processes hold on a
shared GPU), with the allocator's stated reserve on the rest. A CPU lends the plan the machine's
physical memory under the stated CPU headroom. A memory the caller states (a sweep's
``--device-memory``, divided by its GPU share) replaces the device's own total, under the
stated headroom of its kind."""

from __future__ import annotations

import os

from trainers.measure.device_cost import training_device
from trainers.measure.memory_fit import GPU_HEADROOM, Headroom, headroom


def device_memory(accelerator: str, stated: int | None = None) -> tuple[int, Headroom, bool]:
    """The memory the run's device lends (bytes), the headroom kept back from it, and whether
    the device is a GPU; ``stated`` replaces the device's own total."""
    gpu = training_device(accelerator) == "cuda"
    if stated is not None:
        return stated, headroom(gpu), gpu
    if gpu:
        return _cuda_memory()
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return pages, headroom(False), False


def _cuda_memory() -> tuple[int, Headroom, bool]:
    """The current GPU's total memory, with the bytes already held on it measured as its
    context."""
    import torch

    free, total = torch.cuda.mem_get_info()
    held = Headroom(context=total - free, reserve=GPU_HEADROOM.reserve, source="measured")
    return total, held, True
