"""The contract every valid wiring meets (tests/trainers/contract.py), over every (residual,
placement) cell with each norm and norm scaling (`conftest.covering` says which cells)."""

from __future__ import annotations

import pytest
import torch

from tests.trainers.conftest import tiny
from tests.trainers.contract import (  # noqa: F401  (the contract, run on conftest's wiring cells)
    test_causal,
    test_every_wiring_trains,
    test_finite_loss_and_gradients_at_depth_64,
    test_seeded_determinism,
    test_state_dict_round_trip,
)
from trainers.model.transformer import DeepTransformer


def test_depth_256_builds_and_runs() -> None:
    """Depth is not capped below 256 blocks."""
    model = DeepTransformer(tiny(n_layers=256, residual="block_attnres")).eval()
    assert torch.isfinite(model(torch.randint(0, 32, (1, 4)))).all()


def test_sequence_longer_than_context_is_rejected() -> None:
    """A sequence longer than seq_len raises instead of silently reading past the positions."""
    model = DeepTransformer(tiny())
    with pytest.raises(ValueError, match="seq_len"):
        model(torch.zeros(1, 13, dtype=torch.long))
