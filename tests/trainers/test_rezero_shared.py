"""ReZero with one alpha per block (``rezero_shared``, the official code's form) beside the
per-sublayer ``rezero``."""

from __future__ import annotations

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.model.transformer import Block, DeepTransformer, num_params


def _blocks(model: DeepTransformer) -> list[Block]:
    return [b for b in model.blocks if isinstance(b, Block)]


@pytest.mark.parametrize("placement", ["none", "pre"])
def test_is_the_identity_at_init(placement: str) -> None:
    """With every alpha = 0 the stream is the embedding: logits = head(final_norm(embedding))."""
    model = DeepTransformer(tiny(residual="rezero_shared", placement=placement, n_layers=4))
    model.eval()
    idx = torch.randint(0, 32, (2, 12))
    assert torch.equal(model(idx), model.head(model.final_norm(model.embed(idx))))


def test_one_alpha_per_block() -> None:
    """The two sites of a block hold the same parameter, distinct across blocks: L scalars where
    rezero has 2L, and setting one changes both sites."""
    kw = dict(residual="rezero_shared", placement="none", n_layers=3)
    model = DeepTransformer(tiny(**kw))  # type: ignore[arg-type]
    per_sublayer = DeepTransformer(tiny(**{**kw, "residual": "rezero"}))  # type: ignore[arg-type]
    assert num_params(per_sublayer) - num_params(model) == 3
    base = DeepTransformer(tiny(placement="none", n_layers=3))
    assert num_params(model) - num_params(base) == 3
    blocks = _blocks(model)
    assert len({id(b.attn_site.alpha) for b in blocks}) == 3
    for b in blocks:
        assert b.mlp_site.alpha is b.attn_site.alpha
        with torch.no_grad():
            b.attn_site.alpha.fill_(0.5)
        assert b.mlp_site.alpha.item() == 0.5


def test_the_shared_alpha_gets_gradient_from_both_sublayers() -> None:
    """d loss / d alpha is the sum of what the attention and the MLP output contribute: it
    equals the two per-sublayer gradients of a rezero model at the same weights, added."""
    kw = dict(placement="none", n_layers=2)
    shared = DeepTransformer(tiny(residual="rezero_shared", **kw)).double()  # type: ignore[arg-type]
    split = DeepTransformer(tiny(residual="rezero", **kw)).double()  # type: ignore[arg-type]
    with torch.no_grad():
        for b in _blocks(shared):
            b.attn_site.alpha.fill_(0.3)  # alpha != 0, so the MLP sees the attention's output
    split.load_state_dict(shared.state_dict())
    idx = torch.randint(0, 32, (2, 12))
    shared(idx).square().mean().backward()
    split(idx).square().mean().backward()
    for a, b in zip(_blocks(shared), _blocks(split), strict=True):
        attn_part, mlp_part = b.attn_site.alpha.grad, b.mlp_site.alpha.grad
        assert attn_part is not None and mlp_part is not None
        assert attn_part.abs() > 0 and mlp_part.abs() > 0  # both sublayers contribute
        torch.testing.assert_close(a.attn_site.alpha.grad, attn_part + mlp_part)


@pytest.mark.parametrize("placement", ["none", "pre"])
def test_equals_rezero_when_each_blocks_two_alphas_are_equal(placement: str) -> None:
    """rezero_shared with alpha_i set to the per-sublayer values of a rezero model whose two
    alphas in block i are equal gives the same logits (same weights, bit for bit)."""
    kw = dict(placement=placement, n_layers=3)
    split = DeepTransformer(tiny(residual="rezero", **kw)).eval()  # type: ignore[arg-type]
    with torch.no_grad():
        for i, b in enumerate(_blocks(split)):
            b.attn_site.alpha.fill_(0.1 * (i + 1))
            b.mlp_site.alpha.fill_(0.1 * (i + 1))
    shared = DeepTransformer(tiny(residual="rezero_shared", **kw)).eval()  # type: ignore[arg-type]
    shared.load_state_dict(split.state_dict())  # strict: the same parameter names
    idx = torch.randint(0, 32, (2, 12))
    assert torch.equal(shared(idx), split(idx))
    assert [b.attn_site.alpha.item() for b in _blocks(shared)] == pytest.approx([0.1, 0.2, 0.3])
