"""Trial checkpoints on the sweep's storage, found by trial key.

Each invocation of ``nas sweep`` runs its own Tune experiment
(``<storage>/<sweep>/tune-NNNN-<tag>``) over the trials still to run, so a trial interrupted in
one invocation resumes in a later one from the newest checkpoint any invocation wrote for its
key. Every checkpoint folder holds the
Lightning checkpoint and a small JSON naming the key and step; a folder a kill left half-copied
lacks one or the other and is passed over.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
from pathlib import Path

CKPT_NAME = "last.ckpt"
MARK_NAME = "nas-checkpoint.json"  # {"key": ..., "step": ...}, written after the checkpoint


def write_mark(folder: Path, key: str, step: int) -> None:
    (folder / MARK_NAME).write_text(json.dumps({"key": key, "step": step}))


def _mark(folder: Path) -> tuple[str, int] | None:
    try:
        data = json.loads((folder / MARK_NAME).read_text())
        ckpt = folder / CKPT_NAME
        if not ckpt.is_file() or ckpt.stat().st_size == 0:
            return None
        return str(data["key"]), int(data["step"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def latest_checkpoints(sweep_dir: Path, per_key: int = 3) -> dict[str, list[Path]]:
    """trial key -> its newest checkpoint files, highest step first (later experiments first on
    a tie: they resumed from the earlier), over every Tune experiment of the sweep. A few per
    key: the newest may be one a kill left truncated, which the trial finds when loading it."""
    found: dict[str, list[tuple[int, str, Path]]] = {}
    if not sweep_dir.is_dir():
        return {}
    for mark in sweep_dir.glob(f"tune-*/*/checkpoint_*/{MARK_NAME}"):
        read = _mark(mark.parent)
        if read is not None:
            key, step = read
            found.setdefault(key, []).append((step, str(mark.parent), mark.parent / CKPT_NAME))
    return {
        key: [path for _, _, path in sorted(items, reverse=True)[:per_key]]
        for key, items in found.items()
    }


def next_experiment(sweep_dir: Path) -> str:
    """The folder name of this invocation's Tune experiment: one past the highest number there,
    and a random tag. Tune stages every experiment's files in the Ray session's folder under
    the experiment's name and start time (to the second), and syncs that folder to the storage
    path: two sweeps starting together on one cluster with the same name would each receive the
    other's trial folders, checkpoints included (the tag keeps them apart)."""
    numbers = []
    for p in sweep_dir.glob("tune-[0-9]*"):
        with contextlib.suppress(ValueError):
            numbers.append(int(p.name.removeprefix("tune-").split("-")[0]))
    return f"tune-{max(numbers, default=0) + 1:04d}-{secrets.token_hex(4)}"


def prune(sweep_dir: Path, keep: set[Path]) -> None:
    """Delete every checkpoint folder but those holding a file in ``keep`` (the newest per
    key), once no trial of the sweep is left to resume."""
    for mark in sweep_dir.glob(f"tune-*/*/checkpoint_*/{MARK_NAME}"):
        if mark.parent / CKPT_NAME not in keep:
            shutil.rmtree(mark.parent, ignore_errors=True)
