"""LayerScale (CaiT, Touvron et al. 2021, arXiv 2103.17239): the model against the paper's
equations computed here in float64 from the weights alone, its init rule by depth, its parameter
and FLOP counts against its catalogue entry, causality, and what the optimizer does with it."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from tests.trainers.conftest import assert_causal, tiny
from trainers import catalogue
from trainers.config import ModelConfig
from trainers.flops import flops_per_token
from trainers.model.optim_groups import param_groups
from trainers.model.transformer import DeepTransformer, num_params
from trainers.residual import RESIDUALS

Weights = dict[str, torch.Tensor]


def _rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """eta: x / sqrt(mean(x^2) + eps) times a gain (RMSNorm, the model's default norm)."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def _attention(x: torch.Tensor, w: Weights, prefix: str, heads: int) -> torch.Tensor:
    """SA: causal multi-head softmax(q k^T / sqrt(d_h)) v, then the output projection."""
    b, t, d = x.shape
    q, k, v = (x @ w[f"{prefix}.qkv.weight"].T).split(d, dim=-1)
    q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads)
    future = torch.ones(t, t, dtype=torch.bool).triu(1)
    mixed = scores.masked_fill(future, -math.inf).softmax(-1) @ v
    return mixed.transpose(1, 2).reshape(b, t, d) @ w[f"{prefix}.proj.weight"].T


def _ffn(x: torch.Tensor, w: Weights, prefix: str) -> torch.Tensor:
    """FFN: GELU (the exact, erf form) between two projections."""
    h = x @ w[f"{prefix}.fc_in.weight"].T
    return (0.5 * h * (1 + torch.erf(h / math.sqrt(2)))) @ w[f"{prefix}.fc_out.weight"].T


def _papers_forward(cfg: ModelConfig, w: Weights, idx: torch.Tensor) -> torch.Tensor:
    """CaiT eq. 3 per block l, from the weights alone:
    x'_l = x_l + diag(lambda_l) SA(eta(x_l)); x_{l+1} = x'_l + diag(lambda'_l) FFN(eta(x'_l));
    then the final norm and the (tied) head."""
    eps = cfg.norm_eps
    x = w["tok_emb.weight"][idx] + w["pos_emb.weight"][: idx.shape[1]]
    for i in range(cfg.n_layers):
        p = f"blocks.{i}"
        sa = _attention(_rms_norm(x, w[f"{p}.attn.norm_in.weight"], eps), w, f"{p}.attn.layer", 2)
        x = x + w[f"{p}.attn_site.scale"] * sa
        ffn = _ffn(_rms_norm(x, w[f"{p}.mlp.norm_in.weight"], eps), w, f"{p}.mlp.layer")
        x = x + w[f"{p}.mlp_site.scale"] * ffn
    return _rms_norm(x, w["final_norm.weight"], eps) @ w["head.weight"].T


def _scales(model: DeepTransformer) -> list[torch.nn.Parameter]:
    return [p for name, p in model.named_parameters() if name.endswith("_site.scale")]


def test_the_forward_is_the_papers_equations_in_float64() -> None:
    """With every diagonal set to its own random per-channel values, the model's logits are
    CaiT's equations evaluated independently from its weights (float64, learned positions)."""
    cfg = tiny(residual="layerscale", pos="learned", n_layers=3)
    model = DeepTransformer(cfg).double().eval()
    with torch.no_grad():
        for scale in _scales(model):
            scale.copy_(torch.randn(cfg.d_model, dtype=torch.float64))
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    expected = _papers_forward(cfg, model.state_dict(), idx)
    torch.testing.assert_close(model(idx), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("n_layers", "epsilon"),
    [(1, 0.1), (12, 0.1), (18, 0.1), (19, 1e-5), (24, 1e-5), (25, 1e-6), (36, 1e-6)],
)
def test_every_diagonal_starts_at_the_papers_epsilon_for_its_depth(
    n_layers: int, epsilon: float
) -> None:
    """CaiT §2: epsilon 0.1 up to depth 18, 1e-5 at 24, 1e-6 deeper (19 to 23, which it leaves
    open, take 1e-5): one d-wide vector per sublayer, every entry epsilon."""
    model = DeepTransformer(tiny(residual="layerscale", n_layers=n_layers))
    scales = _scales(model)
    assert len(scales) == 2 * n_layers
    for scale in scales:
        assert torch.equal(scale.detach(), torch.full((16,), epsilon))


def test_with_every_diagonal_one_it_is_standard_pre_norm() -> None:
    """lambda = 1 gives x + f(eta(x)): the standard pre-norm model of the same weights, bit for
    bit (both built from one seed share every other weight)."""
    torch.manual_seed(1)
    layerscale = DeepTransformer(tiny(residual="layerscale", n_layers=3)).eval()
    torch.manual_seed(1)
    standard = DeepTransformer(tiny(n_layers=3)).eval()
    with torch.no_grad():
        for scale in _scales(layerscale):
            scale.fill_(1.0)
    idx = torch.randint(0, 32, (2, 12))
    assert torch.equal(layerscale(idx), standard(idx))


@pytest.mark.parametrize("n_layers", [1, 4])
def test_parameters_and_flops_are_the_catalogue_entrys(n_layers: int) -> None:
    """2L d-wide vectors beyond standard pre-norm, as the entry's formula says; no FLOPs beyond
    it (an elementwise scale is not a matrix product)."""
    cfg = tiny(residual="layerscale", n_layers=n_layers)
    standard = dataclasses.replace(cfg, residual="standard")
    extra = num_params(DeepTransformer(cfg)) - num_params(DeepTransformer(standard))
    entry = catalogue.wiring("layerscale")
    assert entry.params is not None
    assert extra == 2 * n_layers * cfg.d_model == entry.params(cfg)
    assert flops_per_token(cfg).wiring == 0
    assert flops_per_token(cfg).total == flops_per_token(standard).total


def test_registry_catalogue_and_config_agree() -> None:
    """Registered under its catalogue name, defined for pre-norm only (CaiT's blocks), and a
    configuration with another placement is refused naming the one it allows."""
    assert "layerscale" in RESIDUALS.names()
    assert catalogue.wiring("layerscale").placements == ("pre",)
    with pytest.raises(ValueError, match=r"model\.placement: 'post' .*choose one of: pre"):
        ModelConfig(residual="layerscale", placement="post")


def test_causal() -> None:
    """No position reads a later token."""
    assert_causal(DeepTransformer(tiny(residual="layerscale", n_layers=3)).double().eval())


def test_the_diagonals_learn_and_are_not_decayed() -> None:
    """One backward reaches every diagonal and, through epsilon != 0, every branch weight; AdamW
    decays no diagonal (a vector, like a norm's gain)."""
    model = DeepTransformer(tiny(residual="layerscale", n_layers=2))
    idx = torch.randint(0, 32, (2, 12))
    model(idx).logsumexp(-1).mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    decayed = {id(p) for g in param_groups(model, 0.1) if g["weight_decay"] for p in g["params"]}
    assert not decayed & {id(s) for s in _scales(model)}
