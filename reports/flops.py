"""Training compute of a trial: the FLOP count the compute-advantage fits put on their x axis.

The count is the trial's own record, ``final/train_flops``: ``trainers.flops``
(matrix-product FLOPs forward and backward, attention's causal sequence term, the head and the
residual wiring's own products) over the tokens of the steps it trained. Trials recorded before that
metric existed carry only their configuration and parameter count; for them ``estimated_flops``
gives the earlier estimate, Kaplan's 6N plus attention, and the report names the trials it was used
for."""

from __future__ import annotations

import math

import pandas as pd

from record.schema import Metric
from reports.normalize import recorded


def recorded_flops(row: pd.Series) -> float | None:
    """The trial's recorded training FLOPs, or None when it has none (recorded before
    ``final/train_flops`` existed)."""
    value = row.get(Metric.FINAL_TRAIN_FLOPS)
    if value is None or not math.isfinite(float(value)) or float(value) <= 0:
        return None
    return float(value)


def trial_flops(row: pd.Series) -> float:
    """Training FLOPs of one trial row: the recorded count, else the estimate."""
    count = recorded_flops(row)
    return estimated_flops(row) if count is None else count


def estimated_flops(row: pd.Series) -> float:
    """The estimate for a trial without a recorded count (Kaplan et al. 2020, Table 1), over every
    token of ``train.max_steps`` steps: 6 FLOPs per non-embedding parameter per token, the
    recorded parameter count less the token embedding, the head when untied, and learned
    positions (a gather is not a product), plus attention's 6 n_layers seq_len d_model.

    It knows neither the wiring's products nor, with tied embeddings, the head's (its weight is
    the embedding's): for a model with a wide vocabulary or an AttnRes or mHC wiring it falls
    short of ``trainers.flops``'s count."""
    d, vocab = int(row["model.d_model"]), int(row["model.vocab_size"])
    embedding = vocab * d * (1 if recorded(row, "model.tie_embeddings") else 2)
    if row.get("model.pos") == "learned":
        embedding += int(row["model.seq_len"]) * d
    n_layers, seq_len = int(row["model.n_layers"]), int(row["model.seq_len"])
    tokens = int(row["train.max_steps"]) * int(row["train.batch_size"]) * seq_len
    # Each weight does one multiply-add (2 FLOPs) per token forward and twice that backward.
    dense = 6.0 * (int(row[Metric.FINAL_PARAMS]) - embedding)
    # QK^T and AV, 2 d FLOPs each per attended key, seq_len / 2 keys on average under the causal
    # mask, forward and backward: 3 * 2 * 2 * (seq_len / 2) * d per layer.
    attention = 6.0 * n_layers * seq_len * d
    return (dense + attention) * tokens
