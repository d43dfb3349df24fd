"""Where a sweep trial runs: what ``nas.trial.run.run_trial`` needs from around it (where to send its
reports, its id and folder, a retry's checkpoint, where Ray placed it), so the trial itself
names no runner.

``TuneHost`` is a Ray Tune worker, the only host ``nas sweep`` uses. ``LocalHost`` runs the same
trial in the calling process and keeps its reports in a list: a trial to step through in a
debugger, and what the suite uses to test a trial's outcomes (divergence, a time-out, a repeat)
without starting Ray.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from nas.trial.checkpoints import CKPT_NAME
from record.schema import Tag

if TYPE_CHECKING:  # Lightning is imported where a trial trains, not where the driver plans
    import lightning as L


class TrialHost(Protocol):
    def report(self, metrics: dict[str, Any]) -> None:
        """The trial's last report (its status), or a repeat's recorded one."""

    def trial_id(self) -> str: ...

    def trial_dir(self) -> Path: ...

    def reporter(self, key: str) -> L.Callback:
        """The callback that reports each validation."""

    def retry_checkpoint(self, dest: Path) -> bool:
        """Copy the checkpoint a retry of this attempt resumes from to ``dest``; False when
        this is the first attempt."""

    def placement(self) -> dict[str, str]:
        """Tags saying where the trial was placed: its node and the GPUs assigned to it."""


class TuneHost:
    """A Ray Tune worker: reports go to Tune (each validation's with a checkpoint), a retry
    resumes from Tune's newest checkpoint."""

    def report(self, metrics: dict[str, Any]) -> None:
        from ray import tune

        tune.report(metrics)

    def trial_id(self) -> str:
        from ray import tune

        return str(tune.get_context().get_trial_id())

    def trial_dir(self) -> Path:
        from ray import tune

        return Path(tune.get_context().get_trial_dir())

    def reporter(self, key: str) -> L.Callback:
        from nas.trial.lightning_hooks import TuneReporter

        return TuneReporter(key)

    def retry_checkpoint(self, dest: Path) -> bool:
        from ray import tune

        checkpoint = tune.get_checkpoint()
        if checkpoint is None:
            return False
        with checkpoint.as_directory() as folder:  # copied out: it may be read-only
            dest.write_bytes((Path(folder) / CKPT_NAME).read_bytes())
        return True

    def placement(self) -> dict[str, str]:
        """The node (the cluster test checks trials spread over nodes) and the GPUs Ray
        assigned (fractions share an id), as Ray numbers them and as ``CUDA_VISIBLE_DEVICES``
        shows them (absent where it is unset). What the trial trains on is ``nas.device``:
        torch's view, which Ray's assignment does not change."""
        import ray

        tags = {
            Tag.NODE: str(ray.get_runtime_context().get_node_id()),
            Tag.RAY_GPU_IDS: ",".join(str(i) for i in ray.get_gpu_ids()),
        }
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return tags if visible is None else {**tags, Tag.CUDA_VISIBLE_DEVICES: visible}


@dataclass
class LocalHost:
    """The calling process: every report (each validation's, then the last) kept in
    ``reports``; no retry, no Ray placement."""

    folder: Path
    id: str = "local"
    reports: list[dict[str, Any]] = field(default_factory=list)

    def report(self, metrics: dict[str, Any]) -> None:
        self.reports.append(dict(metrics))

    def trial_id(self) -> str:
        return self.id

    def trial_dir(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def reporter(self, key: str) -> L.Callback:
        from nas.trial.lightning_hooks import ValidationReporter

        return ValidationReporter(key, self.report)

    def retry_checkpoint(self, dest: Path) -> bool:
        return False

    def placement(self) -> dict[str, str]:
        return {}
