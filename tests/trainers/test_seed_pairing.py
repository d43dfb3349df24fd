"""What a seed fixes across arms, so that a paired comparison pairs what it says it pairs: under one
seed every wiring starts from the same weights wherever it shares a parameter with standard
pre-norm (its own parameters come after, from its own init), and the training windows depend on
the seed and the data alone (``test_data.py`` checks that they are seeded)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainers import catalogue
from trainers.config import VALID_PLACEMENTS, ModelConfig
from trainers.model.transformer import DeepTransformer

SIZE = ModelConfig(n_layers=4, d_model=32, n_heads=2)
# DeepNorm's rule is to scale the shared weights' init (its beta), so they differ by design.
SCALES_SHARED_INIT = {"deepnorm"}


def _weights(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    return DeepTransformer(cfg).state_dict()


@pytest.mark.parametrize(
    "wiring", [w.name for w in catalogue.WIRINGS if w.name not in SCALES_SHARED_INIT]
)
def test_a_seed_gives_every_wiring_the_same_shared_weights(wiring: str) -> None:
    placement = VALID_PLACEMENTS[wiring][0]
    base = dataclasses.replace(SIZE, placement=placement)
    standard = _weights(base, seed=3)
    mine = _weights(dataclasses.replace(base, residual=wiring), seed=3)
    shared = [k for k, v in standard.items() if k in mine and mine[k].shape == v.shape]
    assert len(shared) >= len(standard) - 2  # at most the final norm / head may be the wiring's
    differ = [k for k in shared if not torch.equal(mine[k], standard[k])]
    assert differ == [], f"{wiring} starts {differ[:3]} elsewhere than standard under one seed"


def test_another_seed_gives_other_weights() -> None:
    """The property above is not vacuous: the seed does reach the shared weights."""
    a, b = _weights(SIZE, seed=3), _weights(SIZE, seed=4)
    assert not torch.equal(a["tok_emb.weight"], b["tok_emb.weight"])
