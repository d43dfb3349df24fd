"""Properties of the baseline zoo (ReZero, DeepNorm, HC, mHC, DenseFormer, Mix-LN, LNS) that
follow from each paper's equations."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.trainers.conftest import tiny
from trainers.model.placement import PLACEMENTS
from trainers.model.transformer import MLP, Attention, Block, DeepTransformer, num_params
from trainers.residual.deepnorm import deepnorm_alpha, deepnorm_beta
from trainers.residual.mhc import MHCSite

EXACT = dict(d_model=32, n_heads=4, n_layers=5, norm_eps=1e-12)  # eps out of the way


def _pair(**variant: object) -> tuple[DeepTransformer, DeepTransformer]:
    """A standard pre-norm model and the variant loaded from its state dict (float64)."""
    standard = DeepTransformer(tiny(**EXACT)).double().eval()
    other = DeepTransformer(tiny(**EXACT, **variant)).double().eval()  # type: ignore[arg-type]
    _, unexpected = other.load_state_dict(standard.state_dict(), strict=False)
    assert not unexpected, "a variant keeps every parameter name of the standard model"
    return standard, other


@torch.no_grad()
def _max_diff(a: DeepTransformer, b: DeepTransformer) -> float:
    idx = torch.randint(0, 32, (3, 12))
    return float((a(idx) - b(idx)).abs().max())


@pytest.mark.parametrize("placement", ["none", "pre"])
def test_rezero_is_the_identity_at_init(placement: str) -> None:
    """With every alpha = 0 the stream is the embedding: logits = head(final_norm(embedding))."""
    model = DeepTransformer(tiny(residual="rezero", placement=placement, n_layers=4)).eval()
    idx = torch.randint(0, 32, (2, 12))
    expected = model.head(model.final_norm(model.embed(idx)))
    assert torch.equal(model(idx), expected)
    assert isinstance(model.final_norm, torch.nn.Identity) == (placement == "none")


@pytest.mark.parametrize("placement", ["pre", "post", "sandwich", "none"])
def test_denseformer_equals_standard_at_init(placement: str) -> None:
    """Identity-initialized depth-weighted averages pass each block's output through unchanged."""
    standard = DeepTransformer(tiny(**EXACT, placement=placement)).double().eval()
    dense = DeepTransformer(tiny(**EXACT, placement=placement, residual="denseformer"))
    dense = dense.double().eval()
    dense.load_state_dict(standard.state_dict(), strict=False)
    assert _max_diff(standard, dense) == 0.0


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("streams", [1, 2, 4])
def test_hyper_connections_equal_pre_norm_at_init(dynamic: bool, streams: int) -> None:
    """Static init (A_m one-hot, A_r = I, B = 1; dynamic terms zero) keeps every stream equal to
    the pre-norm running sum; the final norm absorbs the n-fold sum at the output."""
    standard, hyper = _pair(residual="hyper", hc_streams=streams, hc_dynamic=dynamic)
    assert _max_diff(standard, hyper) < 1e-6


def test_mhc_equals_pre_norm_at_init() -> None:
    """The chosen mHC init (W = 0, streams equal) also computes pre-norm's function."""
    standard, mhc = _pair(residual="mhc")
    assert _max_diff(standard, mhc) < 1e-6


@pytest.mark.parametrize("n_layers", [1, 6, 12, 100, 1000])
def test_deepnorm_constants(n_layers: int) -> None:
    """Decoder-only DeepNet: alpha = (2M)^(1/4), beta = (8M)^(-1/4); 12 blocks give 2.21, 0.32."""
    assert deepnorm_alpha(n_layers) == pytest.approx(math.sqrt(math.sqrt(2 * n_layers)))
    assert deepnorm_beta(n_layers) == pytest.approx(1 / math.sqrt(math.sqrt(8 * n_layers)))
    assert deepnorm_alpha(n_layers) * deepnorm_beta(n_layers) == pytest.approx(0.5**0.5)
    if n_layers == 12:
        assert round(deepnorm_alpha(12), 2) == 2.21 and round(deepnorm_beta(12), 2) == 0.32


def test_deepnorm_site_uses_alpha() -> None:
    """Each DeepNorm site scales the skip by alpha before the post-norm."""
    model = DeepTransformer(tiny(residual="deepnorm", placement="post", n_layers=7))
    for block in model.blocks:
        assert isinstance(block, Block)
        assert block.attn_site.alpha == block.mlp_site.alpha == deepnorm_alpha(7)


def test_deepnorm_init_scales_exactly_the_named_projections() -> None:
    """Xavier-normal with gain beta on value, attention output and both MLP projections; gain 1
    on query and key; embeddings untouched. 65k samples per matrix: the sample std is within
    1% of its target with overwhelming probability, so 4% cannot flake."""
    d, n = 256, 8
    torch.manual_seed(0)
    model = DeepTransformer(
        tiny(
            residual="deepnorm", placement="post", d_model=d, n_heads=4, n_layers=n, vocab_size=256
        )
    )
    beta, square, wide = deepnorm_beta(n), math.sqrt(2 / (2 * d)), math.sqrt(2 / (5 * d))
    for module in model.modules():
        if isinstance(module, Attention):
            q, k, v = module.qkv.weight.split(d)
            for w, target in (
                (q, square),
                (k, square),
                (v, beta * square),
                (module.proj.weight, beta * square),
            ):
                assert w.std().item() == pytest.approx(target, rel=0.04)
        if isinstance(module, MLP):
            for w in (module.fc_in.weight, module.fc_out.weight):
                assert w.std().item() == pytest.approx(beta * wide, rel=0.04)
    assert model.tok_emb.weight.std().item() == pytest.approx(0.02, rel=0.04)


def _doubly_stochastic_error(model: DeepTransformer, idx: torch.Tensor) -> float:
    """Largest deviation of a row or column sum from 1, over every mHC site and token."""
    worst = 0.0

    def check(site: torch.nn.Module, args: tuple[torch.Tensor, ...], _: object) -> None:
        nonlocal worst
        res = site.maps(args[0])[2]  # type: ignore[operator]
        assert (res >= 0).all()
        worst = max(
            worst, (res.sum(-1) - 1).abs().max().item(), (res.sum(-2) - 1).abs().max().item()
        )

    hooks = [m.register_forward_hook(check) for m in model.modules() if isinstance(m, MHCSite)]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    return worst


def test_sinkhorn_projects_random_logits() -> None:
    """20 iterations bring exp(logits), logits ~ N(0, 1), to row and column sums of 1 (measured
    worst case over 1000 draws: 3e-5). Wider spreads converge more slowly: at N(0, 2^2) the
    worst row is off by ~0.03 after 20 iterations and ~2e-4 after 100."""
    from trainers.residual.mhc import sinkhorn

    m = sinkhorn(torch.randn(1000, 4, 4), 20)
    assert (m >= 0).all()
    assert (m.sum(-1) - 1).abs().max() < 1e-3 and (m.sum(-2) - 1).abs().max() < 1e-3


@pytest.mark.parametrize("iters", [1, 2, 20])
def test_sinkhorn_backward_equals_autograd_through_the_iterations(iters: int) -> None:
    """The hand-written backward is the exact gradient of the unrolled iterations (not an
    implicit-function approximation at the fixed point), so it matches autograd at any count."""
    from trainers.residual.mhc import sinkhorn

    def unrolled(log_m: torch.Tensor) -> torch.Tensor:
        for _ in range(iters):
            log_m = log_m - log_m.logsumexp(-1, keepdim=True)
            log_m = log_m - log_m.logsumexp(-2, keepdim=True)
        return log_m.exp()

    torch.manual_seed(0)
    logits = (2 * torch.randn(3, 5, 4, 4, dtype=torch.float64)).requires_grad_()
    weights = torch.randn(3, 5, 4, 4, dtype=torch.float64)
    (ours,) = torch.autograd.grad((sinkhorn(logits, iters) * weights).sum(), logits)
    (ref,) = torch.autograd.grad((unrolled(logits) * weights).sum(), logits)
    torch.testing.assert_close(sinkhorn(logits, iters), unrolled(logits), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


def test_mhc_maps_follow_the_paper_formula() -> None:
    """H_pre = sigmoid(a_pre RMSNorm(x) W_pre + b_pre), H_post = 2 sigmoid(...), H_res =
    Sinkhorn(a_res RMSNorm(x) W_res + b_res) on the flattened n*d stream, with random maps:
    the site's factored evaluation (products first, then 1/rms) is the same function."""
    from trainers.residual.mhc import sinkhorn

    torch.manual_seed(0)
    site = MHCSite(tiny(residual="mhc", d_model=8, hc_streams=3), sublayer=1).double()
    with torch.no_grad():
        for p in site.parameters():
            p.copy_(torch.randn_like(p))
    h = torch.randn(2, 5, 3, 8, dtype=torch.float64)
    flat = torch.nn.functional.rms_norm(h.flatten(-2), (24,), eps=site.eps)
    pre = torch.sigmoid(site.alpha_pre * (flat @ site.w_pre) + site.b_pre)
    post = 2 * torch.sigmoid(site.alpha_post * (flat @ site.w_post) + site.b_post)
    res_logits = site.alpha_res * (flat @ site.w_res).unflatten(-1, (3, 3)) + site.b_res
    for got, want in zip(site.maps(h), (pre, post, sinkhorn(res_logits, site.iters)), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_sinkhorn_survives_extreme_logits() -> None:
    """Logits 400 apart (exp of the gap underflows in float32): the linear-domain iteration
    must not divide zero by zero. Output and gradient stay finite, columns sum to 1 (the last
    half-step), and the dominant entries keep their places."""
    from trainers.residual.mhc import sinkhorn

    logits = torch.full((2, 4, 4), -200.0)
    logits[:, torch.arange(4), torch.arange(4)] = 200.0
    logits.requires_grad_()
    m = sinkhorn(logits, 20)
    m.square().sum().backward()
    assert torch.isfinite(m).all() and torch.isfinite(logits.grad).all()
    torch.testing.assert_close(m.sum(-2), torch.ones(2, 4))
    torch.testing.assert_close(m, torch.eye(4).expand(2, 4, 4), atol=1e-6, rtol=0)


def test_mhc_mixing_is_doubly_stochastic_for_random_maps() -> None:
    """H_res rows and columns sum to 1 within 1e-3 for random inputs through random (not
    near-identity) maps whose logits spread like N(0, 1)."""
    model = DeepTransformer(tiny(residual="mhc", n_layers=4, d_model=32))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, MHCSite):
                m.w_res.normal_(0, 0.8 / math.sqrt(m.w_res.shape[0]))
                m.alpha_res.fill_(1.0)
                m.b_res.normal_(0, 0.6)
    assert _doubly_stochastic_error(model, torch.randint(0, 32, (4, 12))) < 1e-3


def test_mhc_mixing_stays_doubly_stochastic_while_training() -> None:
    """From the default init, 40 AdamW steps (lr 3e-3) later the sums are still within 1e-3."""
    model = DeepTransformer(tiny(residual="mhc", n_layers=4, d_model=32))
    idx = torch.randint(0, 32, (4, 12))
    assert _doubly_stochastic_error(model, idx) < 1e-3
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(40):
        opt.zero_grad()
        F.cross_entropy(model(idx)[:, :-1].flatten(0, 1), idx[:, 1:].flatten()).backward()
        opt.step()
    moved = [m.w_res.abs().max().item() for m in model.modules() if isinstance(m, MHCSite)]
    assert max(moved) > 0.01  # the maps really trained
    assert _doubly_stochastic_error(model, torch.randint(0, 32, (4, 12))) < 1e-3


def test_mix_ln_with_alpha_0_is_pre_norm() -> None:
    """No post-norm blocks: the same parameter names and the same logits as pre-norm."""
    pre = DeepTransformer(tiny(**EXACT)).eval()
    mix = DeepTransformer(tiny(**EXACT, placement="mix", mix_ln_alpha=0.0)).eval()
    mix.load_state_dict(pre.state_dict())  # strict: identical structure
    assert _max_diff(pre, mix) == 0.0


def test_mix_ln_with_alpha_1_is_all_post_norm() -> None:
    """Every block is a post-norm block: block by block, it computes what post-norm computes."""
    post = DeepTransformer(tiny(**EXACT, placement="post")).eval()
    mix = DeepTransformer(tiny(**EXACT, placement="mix", mix_ln_alpha=1.0)).eval()
    missing, unexpected = mix.load_state_dict(post.state_dict(), strict=False)
    assert not unexpected and set(missing) == {"final_norm.weight"}
    x = y = post.embed(torch.randint(0, 32, (2, 12)))
    for a, b in zip(post.blocks, mix.blocks, strict=True):
        x, y = a(x), b(y)
        assert torch.equal(x, y)


@pytest.mark.parametrize("n_layers,alpha,post_blocks", [(8, 0.25, 2), (12, 0.25, 3), (5, 0.5, 2)])
def test_mix_ln_splits_at_floor_alpha_l(n_layers: int, alpha: float, post_blocks: int) -> None:
    """The first floor(alpha * n_layers) blocks are post-norm, the rest pre-norm."""
    cfg = tiny(placement="mix", mix_ln_alpha=alpha, n_layers=n_layers)
    slots = [PLACEMENTS.get("mix").slots(cfg, i) for i in range(n_layers)]
    assert [s.post_main for s in slots] == [i < post_blocks for i in range(n_layers)]
    assert [s.norm_in for s in slots] == [i >= post_blocks for i in range(n_layers)]


@pytest.mark.parametrize("placement", ["pre", "sandwich"])
def test_lns_with_unit_scales_is_plain_pre_norm(placement: str) -> None:
    """LayerNorm Scaling only multiplies the input norm: with every scale forced to 1 it is the
    unscaled model, parameter for parameter."""
    plain = DeepTransformer(tiny(**EXACT, placement=placement)).eval()
    lns = DeepTransformer(tiny(**EXACT, placement=placement, norm_scaling="lns")).eval()
    lns.load_state_dict(plain.state_dict())
    assert _max_diff(plain, lns) > 0  # the scales matter...
    for block in lns.blocks:
        assert isinstance(block, Block)
        block.attn.in_scale = block.mlp.in_scale = 1.0
    assert _max_diff(plain, lns) == 0.0  # ...and are all it changes


def test_lns_scales_are_inverse_sqrt_depth_and_turn_scaled_init_off() -> None:
    """Block l (1-based) scales both sublayers by 1/sqrt(l); output projections keep init_std."""
    torch.manual_seed(0)
    model = DeepTransformer(tiny(norm_scaling="lns", n_layers=16, d_model=128, n_heads=4))
    for i, block in enumerate(model.blocks):
        assert isinstance(block, Block)
        assert block.attn.in_scale == block.mlp.in_scale == pytest.approx(1 / math.sqrt(i + 1))
    proj = torch.cat([b.attn.layer.proj.weight.flatten() for b in model.blocks])  # type: ignore[union-attr]
    assert proj.std().item() == pytest.approx(0.02, rel=0.02)  # not 0.02 / sqrt(32)


def test_lns_needs_an_input_norm() -> None:
    """'lns' with a placement that has no input norm is rejected, naming the valid placements."""
    with pytest.raises(ValueError, match="model.norm_scaling.*pre or sandwich"):
        tiny(norm_scaling="lns", placement="post")


def _extra(placement: str = "pre", **variant: object) -> int:
    """Parameters added over the standard model with the same placement."""
    kw = dict(d_model=16, n_heads=2, n_layers=3, placement=placement)
    base = num_params(DeepTransformer(tiny(**kw)))
    return num_params(DeepTransformer(tiny(**kw, **variant))) - base  # type: ignore[arg-type]


def test_added_parameter_counts() -> None:
    """Each variant adds what its equations need, and nothing else (L = 3 blocks, d = 16)."""
    L, d, n, subs = 3, 16, 4, 6
    assert _extra(residual="rezero", placement="none") == subs
    assert _extra(residual="rezero") == subs
    assert _extra(residual="deepnorm", placement="post") == 0
    assert _extra(residual="denseformer") == L * (L + 3) // 2
    assert _extra(residual="hyper") == subs * (n + n * n + n)
    dynamic = n + n * n + n + d + d * n + d + 2 + d  # + the RMSNorm gain on the streams
    assert _extra(residual="hyper", hc_dynamic=True) == subs * dynamic
    assert _extra(residual="mhc") == subs * (n * d * (n + n + n * n) + 3 + n + n + n * n)
    assert _extra(placement="mix", mix_ln_alpha=0.5) == 0
    assert _extra(norm_scaling="lns") == 0
