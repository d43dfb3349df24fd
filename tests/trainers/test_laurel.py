"""LAuReL's scalar (RW) and low-rank (LR) forms: what follows from the paper's equations and the
documented choices (trainers/residual/laurel.py)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.model.transformer import Block, DeepTransformer, num_params
from trainers.residual.laurel import LowRankSite, ResidualWeightsSite, column_orthogonal, rw_weights


def _seeded(**overrides: Any) -> DeepTransformer:
    torch.manual_seed(0)
    return DeepTransformer(tiny(n_layers=3, **overrides)).eval()


@pytest.mark.parametrize("residual", ["laurel_rw", "laurel_lr"])
def test_laurel_is_bitwise_the_standard_model_at_init(residual: str) -> None:
    """Same seed, same shared weights, same logits bit for bit: RW starts at alpha = beta = 1,
    LR at B = 0 (its init draws no random numbers, so the shared weights match too)."""
    standard, laurel = _seeded(), _seeded(residual=residual)
    shared = laurel.state_dict()
    for name, value in standard.state_dict().items():
        assert torch.equal(shared[name], value), name
    idx = torch.randint(0, 32, (2, 12))
    assert torch.equal(standard(idx), laurel(idx))


def test_rw_weights_are_a_scaled_softmax() -> None:
    """(alpha, beta) = 2 softmax(a, b): exactly (1, 1) at zero logits, each in (0, 2) and
    summing to 2 for any logits."""
    assert torch.equal(rw_weights(torch.zeros(2)), torch.ones(2))
    w = rw_weights(3 * torch.randn(2, 1000, dtype=torch.float64))
    assert ((w > 0) & (w < 2)).all()
    torch.testing.assert_close(w.sum(0), torch.full((1000,), 2.0, dtype=torch.float64))


def test_rw_site_computes_alpha_f_plus_beta_x() -> None:
    """With random logits the site returns alpha * f(x) + beta * x (float64, to rounding)."""
    site = ResidualWeightsSite(torch.nn.Identity()).double()
    with torch.no_grad():
        site.logits.copy_(torch.tensor([0.7, -1.3]))
    branch = torch.nn.Linear(8, 8).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    alpha, beta = 2 * torch.softmax(torch.tensor([0.7, -1.3], dtype=torch.float64), 0)
    torch.testing.assert_close(site(x, branch), alpha * branch(x) + beta * x)


def test_column_orthogonal_init_is_the_papers() -> None:
    """A[i, j] = 1/sqrt(r D) where i mod r = j, else 0 (D = 10, r = 4): A^T A is diagonal."""
    d, r = 10, 4
    a = column_orthogonal(d, r)
    expected = torch.zeros(d, r)
    for i in range(d):
        expected[i, i % r] = (r * d) ** -0.5
    assert torch.equal(a, expected)
    gram = a.T @ a
    assert torch.equal(gram, torch.diag(torch.diagonal(gram)))


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_low_rank_update_has_rank_at_most_r(rank: int) -> None:
    """With random A and B the site adds x A B to the plain residual, and the added updates of
    64 tokens (D = 16) span exactly r dimensions."""
    d = 16
    site = LowRankSite(d, rank, torch.nn.Identity()).double()
    with torch.no_grad():
        site.up.normal_()
        site.down.normal_()
    branch = torch.nn.Linear(d, d).double()
    x = torch.randn(64, d, dtype=torch.float64)
    added = site(x, branch) - (x + branch(x))
    torch.testing.assert_close(added, x @ site.down @ site.up)
    assert int(torch.linalg.matrix_rank(added)) == rank


def test_laurel_lr_sites_hold_the_configured_rank() -> None:
    """Every sublayer gets its own A (D x r) and B (r x D) of the configured rank."""
    model = DeepTransformer(tiny(residual="laurel_lr", laurel_rank=5, n_layers=2))
    for block in model.blocks:
        assert isinstance(block, Block)
        for site in (block.attn_site, block.mlp_site):
            assert isinstance(site, LowRankSite)
            assert site.down.shape == (16, 5) and site.up.shape == (5, 16)


@pytest.mark.parametrize("n_layers,d_model,rank", [(1, 16, 1), (3, 16, 4), (2, 32, 16)])
def test_laurel_extra_parameter_counts(n_layers: int, d_model: int, rank: int) -> None:
    """Over the standard model: RW adds 2 scalars per sublayer (4L), LR adds 2 r D per sublayer
    (4 L r D)."""
    kw: dict[str, Any] = dict(n_layers=n_layers, d_model=d_model, n_heads=2)
    base = num_params(DeepTransformer(tiny(**kw)))
    rw = num_params(DeepTransformer(tiny(residual="laurel_rw", **kw)))
    lr = num_params(DeepTransformer(tiny(residual="laurel_lr", laurel_rank=rank, **kw)))
    assert rw - base == 4 * n_layers
    assert lr - base == 4 * n_layers * rank * d_model


def test_laurel_rank_is_validated() -> None:
    """laurel_rank must lie in 1..d_model for laurel_lr, and no other residual takes another
    value than the default; each error names the field."""
    with pytest.raises(
        ValueError, match=r"model\.laurel_rank: 17 is out of range; allowed: 1 to 16"
    ):
        tiny(residual="laurel_lr", laurel_rank=17)
    with pytest.raises(ValueError, match=r"model\.laurel_rank: 0 is out of range"):
        tiny(residual="laurel_lr", laurel_rank=0)
    with pytest.raises(ValueError, match=r"model\.laurel_rank: 4 applies to residual 'laurel_lr'"):
        tiny(residual="laurel_rw", laurel_rank=4)
    with pytest.raises(ValueError, match=r"model\.placement: 'post' is not defined.*laurel_lr"):
        tiny(residual="laurel_lr", placement="post")
