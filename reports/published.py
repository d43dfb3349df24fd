"""The AttnRes paper's published numbers (Kimi Team 2026, arXiv 2603.15031: §5.1 with Table 2,
§5.3 with Table 4), shown beside a user's results where the arms correspond. They come from
194M-528M-parameter MoE models trained on 38-119B tokens: a different scale from any sweep this
harness runs on a laptop, and labelled so wherever they appear."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    label: str  # the paper's name for the arm
    val_loss: float


# Table 4: the 436M model (16 blocks), identical hyperparameters and compute.
TABLE4_BASELINE = 1.766
TABLE4 = {
    "standard": Published("Baseline (PreNorm)", 1.766),
    "denseformer": Published("DenseFormer", 1.767),
    "mhc": Published("mHC", 1.747),
    "attnres": Published("AttnRes Full", 1.737),
    "block_attnres": Published("AttnRes Block (N = 8)", 1.746),
}

# Table 2: final validation loss per model size (activated params excluding embeddings).
TABLE2_COLUMNS = ("size", "tokens", "standard", "block_attnres", "attnres", "mhc")
TABLE2 = (
    ("194M", "38.7B", 1.931, 1.909, 1.899, 1.906),
    ("241M", "45.4B", 1.895, 1.875, 1.874, 1.869),
    ("296M", "62.1B", 1.829, 1.809, 1.804, 1.807),
    ("436M", "87.9B", 1.766, 1.746, 1.737, 1.747),
    ("528M", "119.0B", 1.719, 1.693, 1.692, 1.694),
)

# §5.1: Block AttnRes at 5.6 PFLOP/s-days matches a baseline trained with 1.25x the compute.
COMPUTE_MULTIPLIER = 1.25

# Fig. 5, in words (the paper gives no numbers): what the per-layer profiles looked like.
FIG5 = {
    "output_growth": "the baseline's block outputs grow monotonically with depth; Block AttnRes "
    "stays bounded",
    "grad_front_load": "the baseline's gradients are disproportionately large in the earliest "
    "blocks; AttnRes spreads them more evenly",
}


def published_for(residual: str) -> Published | None:
    """The Table 4 row for a residual type, where one corresponds."""
    return TABLE4.get(residual)
