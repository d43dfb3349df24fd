"""Lightning's FSDP2 strategy (``ModelParallelStrategy``: ``fully_shard`` over a device mesh)
inside a Ray Train worker: what ``nas.trial.data_parallel`` runs for ``Workers(strategy="fsdp")``.

Why not FSDP1 (Lightning's ``FSDPStrategy``, Ray's ``RayFSDPStrategy``): on the CPU it raises
"FSDP needs a non-CPU accelerator device", so no CPU test could hold it to one process's
losses; FSDP2 runs on gloo as on nccl. Imported in the workers only (Lightning, torch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lightning.fabric.strategies.model_parallel import _load_checkpoint
from lightning.pytorch.strategies import ModelParallelStrategy


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
        """Every rank reads the checkpoint it was given. Lightning's broadcasts rank 0's path,
        but each Ray worker copies Ray's checkpoint into a folder of its own
        (``nas.trial.data_parallel._resume_from``), which on another node is not there."""
        state = {"state_dict": self.model, "optimizer_0": self.optimizers[0]}
        assert self.lightning_module is not None and len(self.optimizers) == 1
        return _load_checkpoint(
            path=Path(checkpoint_path),
            state=state,
            strict=self.lightning_module.strict_loading,
            optimizer_states_from_list=True,
            weights_only=weights_only,
        )
