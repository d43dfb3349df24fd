"""The decode cost every run records after training (``trainers.measure.decode_cost``): the KV
cache's bytes per position follow from the shapes (keys and values of every layer, d_model each),
the rates are finite and positive, and measuring leaves the model as it found it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.config_io import from_dict
from trainers.measure.decode_cost import measure
from trainers.model.transformer import DeepTransformer
from trainers.training.run import train


@pytest.mark.parametrize("residual", ["standard", "block_attnres", "mhc"])
def test_kv_bytes_follow_the_shapes_and_the_model_is_left_as_it_was(residual: str) -> None:
    """2 (keys, values) x n_layers x d_model x 4 bytes (float32) per position, whatever the
    wiring (depth mixing carries nothing across positions); train mode and weights unchanged."""
    torch.manual_seed(0)
    model = DeepTransformer(tiny(residual=residual, n_layers=3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cost = measure(model)
    cfg = model.cfg
    assert cost.kv_bytes_per_token == 2 * cfg.n_layers * cfg.d_model * 4
    assert cost.tokens_per_s > 0 and cost.prefill_tokens_per_s > 0
    assert model.training
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_a_run_records_its_decode_cost(tmp_path: Path) -> None:
    """``train`` measures the trained model: the result holds the cost, in result.json too."""
    cfg = from_dict(
        {
            "model": {"d_model": 16, "n_heads": 2, "n_layers": 2, "seq_len": 16},
            "train": {"max_steps": 2, "batch_size": 2, "val_every": 2, "val_batches": 1},
            "data": {"source": "synthetic", "hops": 1, "n_symbols": 8},
        }
    )
    result, _ = train(cfg, tmp_path, progress=False)
    assert result.decode is not None
    assert result.decode.kv_bytes_per_token == 2 * 2 * 16 * 4
    assert '"tokens_per_s"' in result.to_json()
