"""MUDDFormer (``residual="mudd"``): what follows from its equations and the reference init."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.trainers.conftest import assert_causal, tiny
from trainers.model.transformer import Block, DeepTransformer, num_params
from trainers.residual.mudd import DepthAggregate, MuddAttentionSite, MuddState, MuddStream
from trainers.training.module import param_groups

EXACT = dict(d_model=32, n_heads=4, n_layers=4, norm_eps=1e-12)  # eps out of the way


def _pair(**kw: object) -> tuple[DeepTransformer, DeepTransformer]:
    """A standard pre-norm model and MUDDFormer loaded from its state dict (float64, eval)."""
    standard = DeepTransformer(tiny(**EXACT, **kw)).double().eval()  # type: ignore[arg-type]
    mudd = DeepTransformer(tiny(**EXACT, **kw, residual="mudd")).double().eval()  # type: ignore[arg-type]
    missing, unexpected = mudd.load_state_dict(standard.state_dict(), strict=False)
    assert not unexpected
    assert all(".kv_norms." in k or k.startswith("stream.aggregates.") for k in missing)
    return standard, mudd


def _aggregates(model: DeepTransformer) -> list[DepthAggregate]:
    assert isinstance(model.stream, MuddStream)
    return [a for a in model.stream.aggregates if isinstance(a, DepthAggregate)]


@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
def test_equals_pre_norm_at_init(norm: str) -> None:
    """Dynamic weights zero (W_2 = 0) and static weights one-hot on the newest output make every
    stream X_i: the pre-norm Transformer with the same weights (the split projection of the
    decoupled inputs rounds differently from the fused one: equal to 1e-12, not bitwise)."""
    standard, mudd = _pair(norm=norm)
    idx = torch.randint(0, 32, (3, 12))
    torch.testing.assert_close(mudd(idx), standard(idx), rtol=1e-12, atol=1e-12)


def _attention_inputs(model: DeepTransformer, block: int, idx: torch.Tensor) -> list[torch.Tensor]:
    """(R, Q, K, V) as block ``block``'s attention site and branch receive them."""
    seen: list[torch.Tensor] = []
    b = model.blocks[block]
    assert isinstance(b, Block) and isinstance(b.attn_site, MuddAttentionSite)
    hooks = [
        b.attn_site.register_forward_pre_hook(lambda m, args: seen.append(args[0].x)),
        b.attn.register_forward_pre_hook(lambda m, args: seen.extend(args)),  # (Q, K, V)
    ]
    with torch.no_grad():
        model(idx)
    for h in hooks:
        h.remove()
    return seen


def test_perturbing_the_query_weights_changes_only_the_queries() -> None:
    """The four streams are separate: moving the Q row of block 1's aggregation (static and
    dynamic weights) changes block 2's query input and nothing else it reads (R, K, V bit for
    bit); the same move on the V row changes only the values."""
    _, mudd = _pair()
    idx = torch.randint(0, 32, (2, 12))
    before = _attention_inputs(mudd, 2, idx)
    for row, changed in ((0, 1), (2, 3)):  # stream q, then v; inputs are (R, Q, K, V)
        model = DeepTransformer(mudd.cfg).double().eval()
        model.load_state_dict(mudd.state_dict())
        agg = _aggregates(model)[1]
        with torch.no_grad():
            agg.static[row].normal_()
            agg.w_out.view(agg.w_out.shape[0], agg.streams, agg.sources)[:, row].normal_()
        after = _attention_inputs(model, 2, idx)
        same = [torch.equal(a, b) for a, b in zip(before, after, strict=True)]
        assert same == [i != changed for i in range(4)]


def _randomize(model: DeepTransformer) -> None:
    with torch.no_grad():
        for agg in _aggregates(model):
            agg.w_out.normal_(0, 0.5)
            agg.static.normal_()


def test_aggregation_follows_the_formula() -> None:
    """With random weights, each stream after block i is sum_j A[c, j] X_j with
    A = GELU(RMSNorm(X_i) W_1) W_2 + a (RMSNorm without gain), for each of Q, K, V, R."""
    model = DeepTransformer(tiny(**EXACT, residual="mudd")).double().eval()
    _randomize(model)
    stream, agg = model.stream, _aggregates(model)[2]
    assert isinstance(stream, MuddStream)
    outputs = [torch.randn(2, 5, 32, dtype=torch.float64) for _ in range(4)]  # X_0 .. X_3
    x = outputs[-1]
    rms = x / x.square().mean(-1, keepdim=True).add(1e-12).sqrt()
    a = (F.gelu(rms @ agg.w_in) @ agg.w_out).view(2, 5, 4, 4) + agg.static
    state = stream.after_block(MuddState(x, None, outputs[:-1]), 2)
    assert state.qkv is not None
    for c, got in enumerate((*state.qkv, state.x)):
        want = sum(a[..., c, j, None] * outputs[j] for j in range(4))
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_causal_with_dynamic_weights() -> None:
    """Per-token weights never read later tokens: causality holds with random weights too."""
    model = DeepTransformer(tiny(residual="mudd", n_layers=3)).double().eval()
    _randomize(model)
    assert_causal(model)


def test_last_aggregation_builds_the_residual_stream_only() -> None:
    """After the last block only R feeds the head: one stream over L + 1 sources with a hidden
    layer of 4(L + 1); the others build Q, K, V, R with a hidden layer of 4(i + 2)."""
    aggs = _aggregates(DeepTransformer(tiny(residual="mudd", n_layers=3)))
    assert [(a.streams, a.sources, a.w_in.shape[1]) for a in aggs] == [
        (4, 2, 8),
        (4, 3, 12),
        (1, 4, 16),
    ]


@pytest.mark.parametrize("norm,norm_params", [("rmsnorm", 1), ("layernorm", 2)])
def test_added_parameter_count(norm: str, norm_params: int) -> None:
    """Extra parameters: sum over blocks i < L-1 of 4S(d + 4S + 1) with S = i + 2, plus
    (L + 1)(4d + 4(L + 1) + 1) for the last, plus 2(L - 1) key/value input norms."""
    d, L = 16, 3
    kw = dict(d_model=d, n_heads=2, n_layers=L, norm=norm)
    base = num_params(DeepTransformer(tiny(**kw)))  # type: ignore[arg-type]
    extra = num_params(DeepTransformer(tiny(**kw, residual="mudd"))) - base  # type: ignore[arg-type]
    dense = sum(4 * s * (d + 4 * s + 1) for s in range(2, L + 1))
    last = (L + 1) * (4 * d + 4 * (L + 1) + 1)
    assert extra == dense + last + 2 * (L - 1) * norm_params * d


def test_static_weights_are_not_decayed_and_init_is_the_references() -> None:
    """a_i is outside weight decay (decaying it would cut the residual path); W_1 ~ N(0, 1/d),
    W_2 = 0, a one-hot on the newest source."""
    torch.manual_seed(0)
    model = DeepTransformer(tiny(residual="mudd", n_layers=6, d_model=256, n_heads=4))
    no_decay = {id(p) for p in param_groups(model, 0.1)[1]["params"]}
    w_in = torch.cat([a.w_in.flatten() for a in _aggregates(model)])
    assert w_in.std().item() == pytest.approx(1 / math.sqrt(256), rel=0.03)
    for agg in _aggregates(model):
        assert id(agg.static) in no_decay and id(agg.w_in) not in no_decay
        assert not agg.w_out.any()
        assert torch.equal(
            agg.static, F.one_hot(torch.full((agg.streams,), agg.sources - 1), agg.sources).float()
        )
