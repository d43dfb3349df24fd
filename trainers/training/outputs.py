"""What ``nas train`` leaves in its output folder besides Lightning's logs."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from trainers.config import RunConfig, to_dict
from trainers.training.run import TrainResult


def save_run(out: Path, cfg: RunConfig, result: TrainResult, model: torch.nn.Module) -> None:
    """The resolved config (reloadable with ``nas train --config``), the final metrics, and
    the weights as a plain state dict (loads with ``torch.load(..., weights_only=True)``)."""
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "model.pt")
    (out / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    (out / "result.json").write_text(result.to_json() + "\n")
