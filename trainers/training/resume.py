"""A checkpoint brought to the current version before any strategy reads it.

``LanguageModelModule.on_load_checkpoint`` upgrades a checkpoint as Lightning loads it, but not
every strategy calls it before the weights: a sharded one (FSDP2, ``ModelParallelStrategy``)
loads the model's state first, so an old checkpoint's renamed weights would not be found.
Upgrading the file itself before the fit sees it makes the upgrade hold however the checkpoint
is loaded; the module's hook then finds a current checkpoint and changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from trainers.upgrade import CHECKPOINT_VERSION, checkpoint_version, upgrade_checkpoint


def _mapped(ckpt: Path) -> dict[str, Any]:
    """A Lightning checkpoint, its tensors memory-mapped where the file allows (read only when
    touched), on the CPU."""
    try:
        return torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # a file torch did not write in its zip format cannot be mapped
        return torch.load(ckpt, map_location="cpu", weights_only=True)


def version_of(ckpt: Path) -> int:
    """The version a Lightning checkpoint was written at, read without loading its tensors."""
    return checkpoint_version(_mapped(ckpt))


def current(ckpt: Path, folder: Path) -> Path:
    """``ckpt`` itself when it is current; otherwise its upgrade, written once into ``folder``
    under a name of this process's own (data-parallel ranks upgrade side by side)."""
    state = _mapped(ckpt)  # read once: the version, and for an old file what it upgrades
    if checkpoint_version(state) == CHECKPOINT_VERSION:
        return ckpt
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"upgraded-{os.getpid()}-{ckpt.name}"
    partial = out.with_suffix(".partial")
    torch.save(upgrade_checkpoint(state), partial)
    partial.replace(out)  # whole or absent, should the process stop mid-write
    return out
