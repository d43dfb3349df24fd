"""Activation checkpointing (``train.checkpointing``, ``trainers.model.checkpointing``): the same
gradients as keeping every activation, for every wiring, with fewer tensors kept."""

from __future__ import annotations

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.model.checkpointing import enable_checkpointing
from trainers.model.loss import lm_loss
from trainers.model.transformer import DeepTransformer


def _model(checkpointed: bool, **overrides: object) -> DeepTransformer:
    """A float64 model, its zero-initialized parts moved off zero, seeded alike each call."""
    torch.manual_seed(3)
    model = DeepTransformer(tiny(**overrides)).double().train()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    enable_checkpointing(model, "sublayer" if checkpointed else "none")
    return model


def _gradients(model: DeepTransformer, seed: int = 11) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)  # the same dropout masks for both models' forwards
    x, y = torch.randint(0, 32, (3, 12)), torch.randint(0, 32, (3, 12))
    lm_loss(model(x), y).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _assert_identical(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    """Bit for bit: the recomputation runs the same float64 operations on the same inputs,
    dropout replaying the forward's RNG state, so nothing may differ at all."""
    assert got.keys() == want.keys()
    for name, g in want.items():
        assert torch.equal(got[name], g), name


def test_checkpointed_gradients_are_identical(wiring: dict[str, str]) -> None:
    """Every wiring, with dropout on: the gradients with sublayer checkpointing are the
    gradients without it, bit for bit."""
    kwargs = {"n_layers": 3, "dropout": 0.1, **wiring}
    plain = _gradients(_model(False, **kwargs))
    _assert_identical(_gradients(_model(True, **kwargs)), plain)


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
@pytest.mark.parametrize("fast", [True, False], ids=["buffered", "plain"])
def test_both_attnres_paths_checkpoint_exactly(residual: str, fast: bool) -> None:
    """The buffered two-phase path (its store stays outside the checkpointed branches) and the
    plain path: identical gradients with checkpointing on and off."""
    kwargs = {"n_layers": 6, "residual": residual, "attnres_blocks": 3}
    models = [_model(c, **kwargs) for c in (False, True)]
    for m in models:
        m.stream.fast = fast
    _assert_identical(_gradients(models[1]), _gradients(models[0]))


def _saved_bytes(model: DeepTransformer) -> int:
    """Bytes of the tensors autograd keeps for the backward of one training forward (each
    storage once)."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    x = torch.randint(0, 32, (4, 12))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lm_loss(model(x), x)
    return sum(storages.values())


@pytest.mark.parametrize("residual", ["standard", "attnres", "block_attnres", "hyper"])
def test_checkpointing_keeps_fewer_activations(residual: str) -> None:
    """Checkpointed, the forward keeps less for the backward: each sublayer's internals
    (attention scores, the MLP's hidden layer) are recomputed instead; what stays is the
    wiring's state. (mHC is left out: at this width its per-token Sinkhorn iterations, which
    stay outside the branches, outweigh the branches themselves.)"""
    kwargs = {"n_layers": 4, "residual": residual, "d_model": 32, "n_heads": 2}
    kept = _saved_bytes(_model(True, **kwargs))
    assert kept < 0.75 * _saved_bytes(_model(False, **kwargs))


def test_evaluation_and_no_grad_forwards_are_not_checkpointed() -> None:
    """Outside training (validation, decoding) a checkpointed model computes as a plain one and
    recomputes nothing: the same logits, and no checkpoint in the graph."""
    plain, checkpointed = _model(False).eval(), _model(True).eval()
    x = torch.randint(0, 32, (2, 12))
    assert torch.equal(checkpointed(x), plain(x))
    with torch.no_grad():
        assert torch.equal(checkpointed.train()(x), plain.train()(x))


def test_every_sublayer_is_marked() -> None:
    """'sublayer' marks both branches of every block; 'none' marks none."""
    model = DeepTransformer(tiny(n_layers=5))
    assert enable_checkpointing(model, "none") == 0
    assert enable_checkpointing(model, "sublayer") == 10
