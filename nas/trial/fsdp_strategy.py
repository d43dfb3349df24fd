"""Lightning's FSDP2 strategy (``ModelParallelStrategy``: ``fully_shard`` over a device mesh)
inside a Ray Train worker: what ``nas.trial.data_parallel`` runs for ``Workers(strategy="fsdp")``.

Why not FSDP1 (Lightning's ``FSDPStrategy``, Ray's ``RayFSDPStrategy``): on the CPU it raises
"FSDP needs a non-CPU accelerator device", so no CPU test could hold it to one process's
losses; FSDP2 runs on gloo as on nccl. Imported in the workers only (Lightning, torch).

Every checkpoint is one whole-model file, whichever strategy wrote it (one process, DDP, or
this one gathered onto rank 0), so a trial resumes under any strategy and world size from any
of them (``named_optimizer_state``: the one place the layouts differ).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.strategies import ModelParallelStrategy
from torch import nn


class RayFSDP2Strategy(ModelParallelStrategy):
    """Data-parallel sharding over all of Ray Train's workers (no tensor parallelism), the
    checkpoint saved whole by rank 0 (one file, as DDP's: ``nas.trial.checkpoints`` finds it, a retry
    resumes from it)."""

    def __init__(self, workers: int) -> None:
        super().__init__(
            data_parallel_size=workers, tensor_parallel_size=1, save_distributed_checkpoint=False
        )

    @property
    def root_device(self) -> torch.device:
        """Ray's device for this worker: Lightning's own would index its one CPU "device"
        by the local rank."""
        import ray.train.torch

        return ray.train.torch.get_device()

    def load_checkpoint(self, checkpoint_path: Any, weights_only: bool | None = None) -> Any:
        """Every rank reads the whole checkpoint it was given and keeps its shard of the
        weights and of the optimizer state. Lightning's broadcasts rank 0's path, but each Ray
        worker copies Ray's checkpoint into a folder of its own
        (``nas.trial.data_parallel._resume_from``), which on another node is not there; and it
        names the optimizer's saved parameters by the model's order, which only its own
        checkpoints follow (``named_optimizer_state``)."""
        from lightning.fabric.strategies.model_parallel import _load_raw_module_state
        from torch.distributed.checkpoint.state_dict import (
            StateDictOptions,
            set_optimizer_state_dict,
        )

        assert self.lightning_module is not None and len(self.optimizers) == 1
        assert isinstance(self.model, nn.Module)
        strict = self.lightning_module.strict_loading
        checkpoint = torch.load(
            Path(checkpoint_path), mmap=True, map_location="cpu", weights_only=weights_only
        )
        _load_raw_module_state(checkpoint.pop("state_dict"), self.model, strict=strict)
        optimizer = self.optimizers[0]
        saved = named_optimizer_state(checkpoint["optimizer_states"][0], self.model, optimizer)
        # every rank read the same file: rank 0's copy is scattered as the shards
        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=strict)
        set_optimizer_state_dict(self.model, optimizer, optim_state_dict=saved, options=options)
        return checkpoint  # the loops, schedules and callbacks, which Lightning restores


def named_optimizer_state(
    saved: Mapping[str, Any], module: nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """A whole checkpoint's optimizer state (``saved``, its parameters numbered) keyed by the
    names ``module`` gives the parameters ``optimizer`` holds, as FSDP2 loads it.

    The numbering differs by writer: ``Optimizer.state_dict`` (one process, DDP) numbers the
    parameters in the order of the optimizer's groups; Lightning's FSDP save numbers them in the
    model's order (the groups split decayed from undecayed parameters, so the two differ).
    Either way the groups list the numbers in the optimizer's own order, so the n-th number
    listed is the n-th parameter of the groups, the rule ``Optimizer.load_state_dict`` follows.
    Lightning's FSDP loader reads every number in the model's order, so the first numbering's
    states would land on other parameters (of another shape: the load fails; of the same
    shape: silently)."""
    names = {id(p): name for name, p in module.named_parameters()}
    held = [[names[id(p)] for p in group["params"]] for group in optimizer.param_groups]
    listed = [group["params"] for group in saved["param_groups"]]
    if [len(g) for g in listed] != [len(g) for g in held]:
        raise ValueError(
            f"checkpoint: its optimizer groups hold {[len(g) for g in listed]} parameters, "
            f"this model's {[len(g) for g in held]}"
        )
    name_of = dict(zip(_chain(listed), _chain(held), strict=True))
    groups = [{**g, "params": [name_of[n] for n in g["params"]]} for g in saved["param_groups"]]
    return {"state": {name_of[n]: s for n, s in saved["state"].items()}, "param_groups": groups}


def _chain(groups: list[list[Any]]) -> list[Any]:
    return [item for group in groups for item in group]
