"""Training compute of a trial: the FLOP count the compute-advantage fits put on their x axis,
from the configuration and parameter count a trial recorded."""

from __future__ import annotations

import pandas as pd

from reports.schema import Metric


def training_flops(n_params: int, tokens: int, n_layers: int, d_model: int, seq_len: int) -> float:
    """Training FLOPs of a decoder-only Transformer (Kaplan et al. 2020, Table 1).

    ``n_params`` must be the *non-embedding* parameter count: an embedding lookup is a gather,
    not a matmul, so counting its parameters at 6 FLOPs each would overstate compute and the
    more so for small models, bending the fitted power law.
    """
    # Each non-embedding weight does one multiply-add (2 FLOPs) per token forward, and the
    # backward pass costs twice the forward: 3 · 2 · N per token.
    dense = 6.0 * n_params * tokens
    # Attention scores QKᵀ and the value mix AV are each one multiply-add per key per model
    # dimension: 2 · d FLOPs per attended key, twice. Under the causal mask a token attends to
    # seq_len / 2 keys on average, so the forward is 2 · 2 · (seq_len / 2) · d = 2 · seq_len · d
    # per layer per token, and forward + backward is 3× that: 6 · n_layers · seq_len · d_model.
    # (AttnRes depth mixing attends over at most n_layers sources of width d_model per site,
    # which is small beside this and is not counted.)
    attention = 6.0 * n_layers * seq_len * d_model * tokens
    return dense + attention


def trial_flops(row: pd.Series) -> float:
    """Training FLOPs of one trial row: non-embedding parameters (the recorded count less the
    token embedding, the output head when untied, and learned positions) over every token of
    ``train.max_steps`` steps."""
    d, vocab = int(row["model.d_model"]), int(row["model.vocab_size"])
    embedding = vocab * d * (1 if row.get("model.tie_embeddings", True) else 2)
    if row.get("model.pos") == "learned":
        embedding += int(row["model.seq_len"]) * d
    tokens = int(row["train.max_steps"]) * int(row["train.batch_size"]) * int(row["model.seq_len"])
    return training_flops(
        int(row[Metric.FINAL_PARAMS]) - embedding,
        tokens,
        int(row["model.n_layers"]),
        d,
        int(row["model.seq_len"]),
    )
