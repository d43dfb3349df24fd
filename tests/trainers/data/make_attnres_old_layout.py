"""How ``attnres_old_layout.ckpt`` and ``attnres_old_layout.pt`` were made: with the code of
main at c297def, before one parameter layout per model (issue 24), when AttnRes's plain path
(any Table 4 switch set) nested its parameters as ``stream.sites.score.queries``,
``stream.sites.score.query_proj``, ``stream.sites.score.source_logits`` and
``stream.sites.score.keys.key_norm_weights``. Kept to say how; run with today's code it writes
today's layout, not the old one.

    .venv/bin/python -m tests.trainers.data.make_attnres_old_layout

- ``.ckpt``: a Lightning checkpoint (weights, optimizer, loops) of ``RESUMED`` at step 4.
- ``.pt``: per ``CELLS`` entry, a plain state dict (as ``model.pt`` holds one) with random
  mixing parameters and the float64 logits of ``IDX`` the old code computed from it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from tests.trainers.callbacks import (
    SaveAtStep,  # at c297def: tests.trainers.test_divergence._SaveAtStep
)
from trainers.config import ModelConfig
from trainers.config_io import from_dict
from trainers.model.transformer import DeepTransformer
from trainers.training.run import train

HERE = Path(__file__).parent
# One block, d_model 8, pointer chasing over 7 symbols (vocabulary 8): a few KB.
RESUMED: dict[str, dict[str, Any]] = {
    "model": {
        "vocab_size": 8,
        "d_model": 8,
        "n_heads": 2,
        "n_layers": 1,
        "seq_len": 16,
        "residual": "attnres",
        "attnres_window": 1,
    },
    "train": {
        "batch_size": 4,
        "max_steps": 4,
        "val_every": 4,
        "val_batches": 1,
        "warmup_steps": 1,
        "diagnostics_every": 0,
        "accelerator": "cpu",
    },
    "data": {"source": "synthetic", "hops": 1, "n_symbols": 7},
}
BASE = {"vocab_size": 8, "d_model": 8, "n_heads": 2, "n_layers": 1, "seq_len": 8}
CELLS: dict[str, dict[str, Any]] = {
    "attnres-heads=2": {"residual": "attnres", "attnres_heads": 2},
    "attnres-query=input": {"residual": "attnres", "attnres_query": "input"},
    "block_attnres-query=scalar": {
        "residual": "block_attnres",
        "attnres_blocks": 2,
        "attnres_query": "scalar",
    },
}
IDX = torch.tensor([[1, 5, 2, 7, 0, 3, 6, 4]])


def make_checkpoint() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        save = SaveAtStep(4, HERE / "attnres_old_layout.ckpt")
        train(from_dict(RESUMED), Path(tmp), callbacks=[save], progress=False)


def make_state_dicts() -> None:
    cells = {}
    for name, switches in CELLS.items():
        torch.manual_seed(0)
        model = DeepTransformer(ModelConfig(**BASE, **switches)).double().eval()
        with torch.no_grad():
            for key, p in model.named_parameters():
                if key.startswith("stream.sites."):
                    p.copy_(torch.randn_like(p))
            logits = model(IDX)
        cells[name] = {"state": model.state_dict(), "logits": logits}
    torch.save(cells, HERE / "attnres_old_layout.pt")


if __name__ == "__main__":
    make_checkpoint()
    make_state_dicts()
