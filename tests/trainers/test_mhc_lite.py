"""mHC-lite (arXiv 2601.05732): H_res is a convex combination of permutation matrices, so it is
doubly stochastic by construction; the rest is mHC's."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.trainers.conftest import tiny
from trainers.model.transformer import DeepTransformer, num_params
from trainers.residual.mhc_lite import MHCLiteSite, permutation_matrices

EPS32 = torch.finfo(torch.float32).eps


def _sum_bound(n: int) -> float:
    """Worst rounding of a row or column sum of H_res in float32, to first order: the softmax's
    normalizer adds n! terms (n! - 1 roundings) and divides (one), an entry adds (n-1)! weights
    and a row or column n entries; each rounding is at most eps/2 of a partial sum <= 1, so
    |sum - 1| <= (n! + (n-1)! + n) * eps / 2 (17 eps at n = 4; measured over 20 random draws:
    2.5 eps at n = 4, 4 eps at n = 5)."""
    return (math.factorial(n) + math.factorial(n - 1) + n) * EPS32 / 2


def _mixing(model: DeepTransformer, idx: torch.Tensor) -> list[torch.Tensor]:
    """H_res (B, T, n, n) of every mHC-lite site on the streams it really receives."""
    found: list[torch.Tensor] = []

    def keep(site: torch.nn.Module, args: tuple[torch.Tensor, ...], _: object) -> None:
        found.append(site.maps(args[0])[2])  # type: ignore[operator]

    sites = [m for m in model.modules() if isinstance(m, MHCLiteSite)]
    hooks = [s.register_forward_hook(keep) for s in sites]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    assert len(found) == 2 * model.cfg.n_layers
    return found


def _assert_doubly_stochastic(mixing: list[torch.Tensor], n: int) -> None:
    for res in mixing:
        assert res.dtype == torch.float32 and res.shape[-2:] == (n, n)
        assert (res >= 0).all()
        assert (res.sum(-1) - 1).abs().max().item() <= _sum_bound(n)
        assert (res.sum(-2) - 1).abs().max().item() <= _sum_bound(n)


def test_permutation_matrices_are_the_n_factorial_distinct_permutations() -> None:
    """n! distinct 0/1 matrices with one 1 per row and column, the identity first."""
    for n in range(1, 6):
        perms = permutation_matrices(n).unflatten(-1, (n, n))
        assert perms.shape == (math.factorial(n), n, n)
        assert torch.equal(perms[0], torch.eye(n))
        assert torch.equal(perms.sum(-1), torch.ones(math.factorial(n), n))
        assert torch.equal(perms.sum(-2), torch.ones(math.factorial(n), n))
        assert len({tuple(p.flatten().tolist()) for p in perms}) == math.factorial(n)


@pytest.mark.parametrize("streams", [2, 4, 5])
def test_mixing_is_doubly_stochastic_for_random_parameters(streams: int) -> None:
    """Random maps with logits spread like N(0, 3^2), where Sinkhorn would need many
    iterations: rows and columns still sum to 1 to float32 rounding, entries non-negative."""
    model = DeepTransformer(tiny(residual="mhc_lite", hc_streams=streams, d_model=16))
    with torch.no_grad():
        for site in model.modules():
            if isinstance(site, MHCLiteSite):
                site.w_res.normal_(0, 3 / math.sqrt(site.w_res.shape[0]))
                site.alpha_res.fill_(1.0)
                site.b_res.normal_(0, 1.0)
    _assert_doubly_stochastic(_mixing(model, torch.randint(0, 32, (3, 12))), streams)


def test_mixing_stays_doubly_stochastic_while_training() -> None:
    """From the default init, 20 AdamW steps at lr 1e-2 move the maps; the sums stay exact."""
    model = DeepTransformer(tiny(residual="mhc_lite", d_model=16))
    idx = torch.randint(0, 32, (4, 12))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(20):
        opt.zero_grad()
        F.cross_entropy(model(idx)[:, :-1].flatten(0, 1), idx[:, 1:].flatten()).backward()
        opt.step()
    sites = [m for m in model.modules() if isinstance(m, MHCLiteSite)]
    assert max(s.w_res.abs().max().item() for s in sites) > 0.05  # the maps really trained
    _assert_doubly_stochastic(_mixing(model, idx), 4)


def test_init_mixing_is_the_papers_near_identity() -> None:
    """b_res = 0 on the identity, -8 on the 23 others: 1/(1 + 23 e^-8) on the identity weight, so
    H_res = 0.9940 on the diagonal and 0.0020 off it, for every token."""
    site = MHCLiteSite(tiny(residual="mhc_lite"), sublayer=3).double()
    res = site.maps(torch.randn(2, 5, 4, 16, dtype=torch.float64))[2]
    other = math.exp(-8) / (1 + 23 * math.exp(-8))
    eye = torch.eye(4, dtype=torch.float64)
    want = (1 - 18 * other) * eye + 6 * other * (1 - eye)
    torch.testing.assert_close(res, want.expand_as(res), rtol=0, atol=1e-15)


def test_equals_pre_norm_at_init() -> None:
    """W = 0 and H_post = 1 keep the copies equal, and H_res's rows sum to 1: every copy is the
    pre-norm running sum, so mHC-lite computes what pre-norm computes."""
    kw = dict(d_model=32, n_heads=4, n_layers=5, norm_eps=1e-12)
    standard = DeepTransformer(tiny(**kw)).double().eval()  # type: ignore[arg-type]
    lite = DeepTransformer(tiny(**kw, residual="mhc_lite")).double().eval()  # type: ignore[arg-type]
    _, unexpected = lite.load_state_dict(standard.state_dict(), strict=False)
    assert not unexpected
    idx = torch.randint(0, 32, (3, 12))
    with torch.no_grad():
        assert (standard(idx) - lite(idx)).abs().max().item() < 1e-6


@pytest.mark.parametrize("streams", [1, 3, 4])
def test_added_parameter_count(streams: int) -> None:
    """Per sublayer: W_pre, W_post (n*d x n each), W_res (n*d x n!), three gates, b_pre, b_post
    (n each) and b_res (n!): 2L (n d (2n + n!) + 2n + n! + 3) over standard pre-norm."""
    L, d, n = 3, 16, streams
    kw = dict(d_model=d, n_heads=2, n_layers=L)
    base = num_params(DeepTransformer(tiny(**kw)))  # type: ignore[arg-type]
    lite = num_params(DeepTransformer(tiny(**kw, residual="mhc_lite", hc_streams=n)))  # type: ignore[arg-type]
    k = math.factorial(n)
    assert lite - base == 2 * L * (n * d * (2 * n + k) + 2 * n + k + 3)


def test_streams_are_capped_naming_the_field() -> None:
    """n! weights per site: mhc_lite refuses more than 5 streams, naming model.hc_streams."""
    tiny(residual="mhc_lite", hc_streams=5)
    with pytest.raises(ValueError, match=r"model\.hc_streams: 6 .*mhc_lite.*1 to 5"):
        tiny(residual="mhc_lite", hc_streams=6)
    tiny(residual="mhc", hc_streams=6)  # mHC itself is not capped
