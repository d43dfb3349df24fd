"""Sharded training (FSDP2, ``torch.distributed.fsdp.fully_shard``) of one configuration over
a data-parallel group: each Transformer block (``trainers.model.transformer.Block``) is one unit
whose parameters, gradients and optimizer state every rank holds a 1/N shard of, gathered for the
block's forward and backward and freed after; the embedding, the wiring's own state, the final norm
and the head are the root's unit.

Lightning's ``ModelParallelStrategy`` applies sharding in the module's ``configure_model`` hook
(``ShardedModule``); the math is the same as data-parallel's (each rank's share of the global
batch, gradients averaged by reduce-scatter), so a sharded run trains what one process does up
to the order of float sums.

Whatever runs on rank 0 alone (the dilution profile, decoding after training) cannot run the
sharded model: its forward gathers every block from every rank. It runs on a full copy that
every rank helps gather (``full_copy``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from trainers.model.transformer import Block, DeepTransformer
from trainers.training.module import LanguageModelModule


def shard_blocks(model: DeepTransformer, mesh: Any) -> None:
    """Shard ``model`` in place over ``mesh`` (one dimension: the data-parallel ranks): every
    block its own unit, then the rest as the root's. Idempotent (Lightning calls the hook again
    before a validation after the fit)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    if isinstance(model, FSDPModule):
        return
    for block in model.blocks:
        assert isinstance(block, Block)
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)


class ShardedModule(LanguageModelModule):
    """``LanguageModelModule`` with its model sharded over the strategy's data-parallel mesh.

    Accumulation: ``toggle_model(sync_grad=False)`` does nothing here (it blocks DDP's
    all-reduce only), so every micro-batch's backward reduce-scatters its gradient into the
    shards, which sum over the micro-batches as one process's gradients do. FSDP2's
    ``set_requires_gradient_sync(False)`` would save those reduce-scatters but keep each
    block's gradient whole until the last micro-batch: the memory sharding is there to save.
    Clipping: ``torch.nn.utils.clip_grad_norm_`` (what Lightning's ``clip_gradients`` calls)
    takes the norm of sharded gradients over every rank, so the module's own step clips the
    global gradient as it does unsharded."""

    def configure_model(self) -> None:
        mesh = self.device_mesh
        assert mesh is not None  # the strategy sets it up before this hook
        shard_blocks(self.model, mesh["data_parallel"])


def full_copy(model: nn.Module, device: torch.device) -> DeepTransformer | None:
    """An unsharded copy of the sharded ``model`` on rank 0, on ``device`` if it fits there,
    else on the CPU; None on every other rank. A collective: every rank must call it at the same
    point. The copy is built without drawing from the RNG, so rank 0's random stream stays the
    other ranks' (dropout, the data)."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    assert isinstance(model, DeepTransformer)
    # cpu_offload: gathered block by block onto rank 0's CPU; the other ranks keep nothing
    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    if dist.get_rank() != 0:
        return None
    with torch.random.fork_rng(devices=[]):
        copy = DeepTransformer(model.cfg)
    copy.load_state_dict(state)
    try:
        return copy.to(device)
    except torch.OutOfMemoryError:  # the model FSDP was there for: the copy stays on the CPU
        return copy
