"""Dilution diagnostics: facts about deep residual streams, and a measurement that disturbs
nothing."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tests.trainers.conftest import covering, tiny
from trainers.config import valid_wirings
from trainers.measure.diagnostics import dilution_profile
from trainers.measure.dilution_plot import save_profile
from trainers.model.transformer import DeepTransformer


def _unit_fan_in_init(model: nn.Module, emb_std: float = 0.02) -> None:
    """Every linear weight ~ N(0, 1/fan_in), a small embedding: the init under which pre-norm's
    stream visibly grows at init (GPT-2's scaled projections barely let it grow)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, m.weight.shape[1] ** -0.5)
            elif isinstance(m, nn.Embedding):
                m.weight.normal_(0.0, emb_std)


def _batch(n: int = 4, t: int = 32, vocab: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    idx = torch.randint(0, vocab, (n, t))
    return idx, idx.roll(-1, dims=1)


def test_pre_norm_stream_grows_while_post_norm_stays_flat() -> None:
    """At 32 blocks with unit fan-in init, the pre-norm stream grows several-fold from the second
    block's input to the last (it adds O(1) outputs to an unnormalized sum: linear growth of the
    squared norm, about 8x in norm here) while post-norm renormalizes it at every sublayer."""
    idx, _ = _batch()
    growth = {}
    for placement in ("pre", "post"):
        torch.manual_seed(0)
        cfg = tiny(
            placement=placement,
            n_layers=32,
            d_model=64,
            n_heads=4,
            vocab_size=64,
            seq_len=32,
            scaled_init=False,
        )
        model = DeepTransformer(cfg)
        _unit_fan_in_init(model)
        growth[placement] = dilution_profile(model, idx).summaries()["dilution/stream_growth"]
    assert growth["pre"] > 4.0
    assert 0.8 < growth["post"] < 1.25


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_zero_queries_give_uniform_depth_weights(residual: str) -> None:
    """With zero pseudo-queries every site weighs its sources 1/#sources: entropy exactly 1."""
    model = DeepTransformer(tiny(residual=residual, n_layers=4, attnres_blocks=4))
    profile = dilution_profile(model, _batch(2, 12, 32)[0])
    w = profile.depth_weights
    assert w is not None and w.shape[0] == 2 * 4 + 1  # one row per site, the output site last
    for row in w:
        sources = row[~np.isnan(row)]
        np.testing.assert_allclose(sources, 1.0 / len(sources), rtol=1e-6)
    multi = ~np.isnan(profile.depth_entropy)  # type: ignore[operator]
    np.testing.assert_allclose(profile.depth_entropy[multi], 1.0, rtol=1e-6)  # type: ignore[index]
    assert profile.summaries()["dilution/depth_entropy"] == pytest.approx(1.0)


def test_full_attnres_sites_see_one_more_source_each() -> None:
    """Full AttnRes: site j mixes j + 1 sources (embedding and every earlier output)."""
    model = DeepTransformer(tiny(residual="attnres", n_layers=3))
    w = dilution_profile(model, _batch(2, 12, 32)[0]).depth_weights
    assert w is not None
    assert [int(np.sum(~np.isnan(r))) for r in w] == list(range(1, 2 * 3 + 2))


def test_removing_a_rezero_block_at_init_changes_nothing() -> None:
    """alpha = 0 at init: zeroing any block's outputs leaves the loss exactly unchanged."""
    model = DeepTransformer(tiny(residual="rezero", placement="none", n_layers=5))
    idx, targets = _batch(2, 12, 32)
    profile = dilution_profile(model, idx, targets, removal=True)
    assert profile.removal_delta is not None
    assert np.all(profile.removal_delta == 0.0)


def test_removing_blocks_of_a_standard_model_changes_the_loss() -> None:
    """The removal delta is a real measurement: in a standard model every block matters."""
    model = DeepTransformer(tiny(n_layers=4))
    profile = dilution_profile(model, *_batch(2, 12, 32), removal=True)
    assert profile.removal_delta is not None and np.all(profile.removal_delta != 0.0)


WIRINGS = covering(valid_wirings())


@pytest.mark.parametrize("wiring", WIRINGS, ids=["-".join(w) for w in WIRINGS])
def test_every_wiring_is_profiled_with_positive_finite_gradients(wiring: tuple[str, ...]) -> None:
    """Every valid wiring gets a profile; each block's gradient norm is finite and positive."""
    residual, placement, norm, scaling = wiring
    model = DeepTransformer(
        tiny(
            residual=residual,
            placement=placement,
            norm=norm,
            norm_scaling=scaling,
            n_layers=4,
            attnres_blocks=4,
        )
    )
    if residual == "rezero":  # alpha = 0 blocks no gradient into the branches: move it off zero
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("alpha"):
                    p.fill_(0.5)
    profile = dilution_profile(model, *_batch(2, 12, 32))
    assert profile.grad_norm is not None and profile.act_grad_norm is not None
    assert np.all(np.isfinite(profile.grad_norm)) and np.all(profile.grad_norm > 0)
    assert np.all(np.isfinite(profile.act_grad_norm)) and np.all(profile.act_grad_norm > 0)
    summaries = profile.summaries()
    assert all(math.isfinite(v) for v in summaries.values()), summaries
    json.dumps(profile.to_dict())  # serializable as the artifact


def test_profile_leaves_logits_mode_and_grads_untouched() -> None:
    """Measuring changes neither the model's outputs, its training mode, nor any .grad."""
    model = DeepTransformer(tiny(residual="block_attnres", n_layers=3, dropout=0.1))
    idx, targets = _batch(2, 12, 32)
    model.train()
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    before = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.eval()
    logits = model(idx)
    model.train()
    dilution_profile(model, idx, targets, removal=True)
    assert model.training
    model.eval()
    assert torch.equal(model(idx), logits)
    for n, p in model.named_parameters():
        assert torch.equal(p.grad, before[n]), n  # type: ignore[arg-type]


def test_depth_256_is_numerically_safe() -> None:
    """At 256 blocks every per-block measurement is finite."""
    model = DeepTransformer(tiny(n_layers=256, residual="block_attnres", attnres_blocks=8))
    profile = dilution_profile(model, *_batch(1, 8, 32))
    for name in ("output_norm", "stream_norm", "update_ratio", "adjacent_cosine", "grad_norm"):
        assert np.all(np.isfinite(getattr(profile, name))), name


def test_standard_pre_norm_virtual_stream_is_the_stream() -> None:
    """For a plain pre-norm residual the running sum is the actual stream: the two agree."""
    model = DeepTransformer(tiny(n_layers=6))
    p = dilution_profile(model, _batch(2, 12, 32)[0])
    np.testing.assert_allclose(p.virtual_stream_norm, p.stream_norm, rtol=1e-5)


def test_hyper_connection_maps_are_reported() -> None:
    """HC's read-out and stream-mixing matrices are recorded per site, identity-like at init."""
    model = DeepTransformer(tiny(residual="hyper", n_layers=2))
    p = dilution_profile(model, _batch(2, 12, 32)[0])
    assert p.stream_mix is not None and p.stream_mix.shape == (4, 4, 4)
    np.testing.assert_allclose(p.stream_mix[0], np.eye(4))


def test_profile_is_float32_inside_a_bf16_autocast() -> None:
    """Called from bf16 mixed-precision code, the profile still computes in float32: the same
    numbers as outside autocast. A model with bf16 weights is refused (the callback passes a
    float32 copy)."""
    model = DeepTransformer(tiny(residual="attnres", n_layers=3))
    idx, targets = _batch(2, 12, 32)
    plain = dilution_profile(model, idx, targets)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = dilution_profile(model, idx, targets)
    for name in ("output_norm", "stream_norm", "grad_norm", "depth_weights"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(mixed, name))
    with pytest.raises(ValueError, match="float32"):
        dilution_profile(model.to(torch.bfloat16), idx)


ONE_PER_RESIDUAL = list({w[0]: w for w in reversed(WIRINGS)}.values())


@pytest.mark.parametrize("wiring", ONE_PER_RESIDUAL, ids=[w[0] for w in ONE_PER_RESIDUAL])
def test_a_nan_model_is_profiled_without_raising(wiring: tuple[str, ...], tmp_path: Path) -> None:
    """A model whose weights hold a NaN (a diverged run) is measured without raising: the flag
    is down, the per-block entries and summaries are NaN, and the saved JSON is strict JSON with
    null for each NaN; the figure draws too (a line plot and a heatmap: two wirings suffice)."""
    residual, placement, norm, scaling = wiring
    cfg = tiny(residual=residual, placement=placement, norm=norm, norm_scaling=scaling)
    model = DeepTransformer(dataclasses.replace(cfg, n_layers=3, attnres_blocks=3))
    with torch.no_grad():
        for p in model.blocks[0].parameters():
            p.fill_(math.nan)
    idx, targets = _batch(2, 12, 32)
    profile = dilution_profile(model, idx, targets, removal=True)
    assert not profile.finite
    assert np.isnan(profile.output_norm[-1]) and np.isnan(profile.effective_rank[-1])
    assert math.isnan(profile.summaries()["dilution/erank_last"])
    paths = save_profile(profile, tmp_path, "nan", figure=residual in ("standard", "attnres"))
    data = json.loads(paths[0].read_text(), parse_constant=_refuse)
    assert data["finite"] is False and data["summaries"]["dilution/erank_last"] is None


def _refuse(name: str) -> None:
    raise ValueError(f"not strict JSON: {name}")


def test_a_finite_model_is_flagged_finite() -> None:
    """The flag is up for an ordinary model."""
    assert dilution_profile(DeepTransformer(tiny()), *_batch(2, 12, 32)).finite
