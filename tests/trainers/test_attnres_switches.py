"""The AttnRes design switches of the paper's Table 4: the defaults are the model from before
the switches, and each switch keeps the properties its math promises."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from tests.trainers.attnres_cases import CASES, RESIDUALS, SWITCHES, randomize_mixing
from tests.trainers.conftest import assert_causal, tiny
from trainers.config import ATTNRES_SWITCHES, ModelConfig
from trainers.model.transformer import DeepTransformer, num_params
from trainers.residual.attnres.depth_mixing import DepthMixer
from trainers.residual.probe import mixing_probe

REFERENCE = Path(__file__).parent / "data" / "attnres_default_logits.json"
# Depth 64 costs ~0.3 s a model: every switch on Full AttnRes (every source at every site),
# Block AttnRes with the switches combined and with scalar logits (the rest is shared code).
DEEP = [("attnres", name) for name in SWITCHES] + [
    ("block_attnres", "combined"),
    ("block_attnres", "query=scalar"),
]


def _cfg(residual: str, switch: str, **kw: Any) -> ModelConfig:
    return tiny(residual=residual, **{**SWITCHES[switch], **kw})


def _reference_logits(residual: str) -> tuple[torch.Tensor, list[str]]:
    """The reference file's model: seed 0, 3 blocks, random mixing parameters."""
    torch.manual_seed(0)
    model = DeepTransformer(tiny(residual=residual, n_layers=3, attnres_blocks=3))
    randomize_mixing(model)
    idx = torch.arange(12).remainder(32)[None] * 5 % 32
    with torch.no_grad():
        return model.eval()(idx).flatten(), sorted(model.state_dict())


@pytest.mark.parametrize("residual", RESIDUALS)
def test_default_model_is_the_one_from_before_the_switches(residual: str) -> None:
    """With every switch at its default, the seeded model has the state-dict keys and the
    logits stored from the code before the switches existed (float32, so to 1e-5: another CPU
    may round differently)."""
    stored = json.loads(REFERENCE.read_text())[residual]
    logits, keys = _reference_logits(residual)
    assert keys == stored["keys"]
    torch.testing.assert_close(logits, torch.tensor(stored["logits"]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("residual", RESIDUALS)
def test_explicit_defaults_are_bitwise_the_default_model(residual: str) -> None:
    """Every switch spelled out at its default builds the default model on the fast path:
    the same parameters, bitwise the same logits."""
    models = []
    for explicit in ({}, ATTNRES_SWITCHES):
        torch.manual_seed(0)
        model = DeepTransformer(tiny(residual=residual, n_layers=3, **explicit))
        randomize_mixing(model)
        assert model.stream.fast
        models.append(model.eval())
    idx = torch.randint(0, 32, (2, 12))
    assert models[0].state_dict().keys() == models[1].state_dict().keys()
    assert torch.equal(models[0](idx), models[1](idx))


def _on_plain_path(model: DeepTransformer) -> None:
    """Sends a default model through the plain path (DepthMixer's formula), same parameters."""
    assert model.stream.fast
    model.stream.fast = False


@pytest.mark.parametrize("residual", RESIDUALS)
def test_plain_path_at_the_defaults_is_the_fast_path(residual: str) -> None:
    """The direct formula (DepthMixer) at the paper's settings computes what the buffered
    two-phase path computes, logits and gradients with respect to the input."""
    model = DeepTransformer(tiny(residual=residual, n_layers=5, attnres_blocks=4)).double()
    randomize_mixing(model)
    idx = torch.randint(0, 32, (2, 12))
    fast = model(idx)
    _on_plain_path(model)
    torch.testing.assert_close(model(idx), fast, rtol=0, atol=1e-12)


@pytest.mark.parametrize("residual,switch", CASES)
def test_switch_keeps_causality(residual: str, switch: str) -> None:
    """Changing a later token never changes earlier logits, with non-trivial depth weights."""
    model = DeepTransformer(_cfg(residual, switch, n_layers=3)).double().eval()
    randomize_mixing(model)
    assert_causal(model)


@pytest.mark.parametrize("residual,switch", DEEP)
def test_switch_has_finite_gradients_at_depth_64(residual: str, switch: str) -> None:
    """At 64 blocks (128 sublayers) the loss and every parameter's gradient are finite."""
    model = DeepTransformer(_cfg(residual, switch, n_layers=64, attnres_blocks=8))
    randomize_mixing(model, scale=0.1)
    idx = torch.randint(0, 32, (1, 6))
    loss = F.cross_entropy(model(idx).flatten(0, 1), idx.roll(-1, 1).flatten())
    loss.backward()
    assert torch.isfinite(loss)
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


@pytest.mark.parametrize("residual,switch", CASES)
def test_switch_round_trips_through_the_state_dict(residual: str, switch: str) -> None:
    """A fresh model loading the state dict (strict) reproduces the logits exactly."""
    model = DeepTransformer(_cfg(residual, switch, n_layers=2)).eval()
    randomize_mixing(model)
    fresh = DeepTransformer(_cfg(residual, switch, n_layers=2)).eval()
    fresh.load_state_dict(model.state_dict())
    idx = torch.randint(0, 32, (2, 12))
    assert torch.equal(model(idx), fresh(idx))


# Additive routing adds the routed sources to the plain sum: no pre-norm identity at init.
IDENTITY = [
    (r, s) for r, s in CASES if not {"attnres_window", "attnres_sources"} & set(SWITCHES[s])
]


@pytest.mark.parametrize("residual,switch", IDENTITY)
def test_switch_keeps_the_zero_init_pre_norm_identity(residual: str, switch: str) -> None:
    """At init the depth weights are equal over the sources (1/S, or 1/2 each under sigmoid),
    and the scale-invariant input norm turns that into the pre-norm residual sum: the logits of
    a standard model with the same weights. A window drops sources, so it has no such identity."""
    kw = dict(n_layers=5, d_model=32, n_heads=4, norm_eps=1e-12, attnres_blocks=4)
    standard = DeepTransformer(tiny(**kw)).double()
    variant = DeepTransformer(_cfg(residual, switch, **kw)).double()
    missing, unexpected = variant.load_state_dict(standard.state_dict(), strict=False)
    assert not unexpected and all(k.startswith("stream.sites.") for k in missing)
    idx = torch.randint(0, 32, (2, 12))
    assert (standard.eval()(idx) - variant.eval()(idx)).abs().max() < 1e-6


def _mixer(**switches: Any) -> tuple[DepthMixer, list[torch.Tensor]]:
    cfg = dataclasses.replace(tiny(residual="attnres", d_model=8, n_heads=2), **switches)
    mixer = DepthMixer(cfg, n_sites=3, n_sources=6).double()
    sources = [torch.randn(2, 3, 8, dtype=torch.float64) * (i + 1) for i in range(6)]
    return mixer, sources


def test_zero_init_scalar_mixing_is_the_uniform_average() -> None:
    """Scalar mixing starts at zero logits: every site takes the plain mean of its sources."""
    mixer, sources = _mixer(attnres_query="scalar")
    for n in (1, 3, 6):
        x, weights = mixer(1, sources[:n])
        torch.testing.assert_close(x, torch.stack(sources[:n]).mean(0))
        torch.testing.assert_close(weights, torch.full_like(weights, 1 / n))


def test_sigmoid_with_zero_queries_weighs_every_source_one_half() -> None:
    """Sigmoid gates each source on its own: zero logits give 1/2 each, not renormalized."""
    mixer, sources = _mixer(attnres_gate="sigmoid")
    x, weights = mixer(0, sources)
    assert torch.equal(weights, torch.full_like(weights, 0.5))
    torch.testing.assert_close(x, 0.5 * torch.stack(sources).sum(0))


def test_window_mixes_the_embedding_and_the_newest_sources() -> None:
    """With window W a site's softmax runs over source 0 and the W newest only: the others get
    weight zero and the rest is the softmax of the kept logits."""
    mixer, sources = _mixer(attnres_window=2)
    _randomize_mixing_of(mixer)
    full, _ = _mixer()
    full.load_state_dict(mixer.state_dict())
    x, weights = mixer(2, sources)
    assert torch.equal(weights[..., 1:4], torch.zeros_like(weights[..., 1:4]))
    kept = [sources[0], *sources[4:]]
    x_kept, _ = full(2, kept)
    torch.testing.assert_close(x, x_kept)


def _randomize_mixing_of(mixer: DepthMixer) -> None:
    with torch.no_grad():
        for p in mixer.parameters():
            p.copy_(torch.randn_like(p))


@pytest.mark.parametrize("residual", RESIDUALS)
@pytest.mark.parametrize("base", [{}, {"attnres_gate": "sigmoid"}])
def test_window_covering_every_source_is_no_window(residual: str, base: dict[str, Any]) -> None:
    """attnres_window >= the sources any site mixes is the model without a window."""
    kw = dict(residual=residual, n_layers=3, attnres_blocks=3, **base)
    unwindowed = DeepTransformer(tiny(**kw)).double()
    randomize_mixing(unwindowed)
    windowed = DeepTransformer(tiny(attnres_window=7, **kw)).double()
    if not base:  # both run the buffered path: hold the windowed one to the plain-path twin
        _on_plain_path(unwindowed)
    windowed.load_state_dict(unwindowed.state_dict())
    idx = torch.randint(0, 32, (2, 12))
    torch.testing.assert_close(windowed(idx), unwindowed(idx), rtol=0, atol=1e-12)


@pytest.mark.parametrize("residual", RESIDUALS)
@pytest.mark.parametrize("query", ["static", "input"])
def test_heads_with_equal_queries_are_one_head(residual: str, query: str) -> None:
    """H groups whose queries are all equal have equal weights: the single-head model."""
    kw = dict(residual=residual, n_layers=3, attnres_blocks=3, attnres_query=query)
    one = DeepTransformer(tiny(attnres_gate="sigmoid", **kw)).double()  # sigmoid: plain path
    randomize_mixing(one)
    four = DeepTransformer(tiny(attnres_gate="sigmoid", attnres_heads=4, **kw)).double()
    state = dict(one.state_dict())
    name = "stream.sites." + ("queries" if query == "static" else "query_proj")
    state[name] = torch.cat([state[name]] * 4, dim=1)  # each group's query = the single one
    four.load_state_dict(state)
    idx = torch.randint(0, 32, (2, 12))
    torch.testing.assert_close(four(idx), one(idx), rtol=0, atol=1e-12)


def _extra(residual: str, switch: str, n_layers: int, d: int, n_blocks: int) -> int:
    kw = dict(n_layers=n_layers, d_model=d, n_heads=4, attnres_blocks=n_blocks)
    base = num_params(DeepTransformer(tiny(**kw)))
    return num_params(DeepTransformer(_cfg(residual, switch, **kw))) - base


@pytest.mark.parametrize("residual", RESIDUALS)
def test_extra_parameters_follow_their_formulas(residual: str) -> None:
    """Per site (2L + 1 of them; 2L - 1 with additive routing, which has no output site and
    nothing to route at site 0): a query of H*d (or a d x H*d projection), a key gain of d
    unless the keys are raw, or a logit per source position (S_max = 2L + 1, Block N + 1)."""
    n_layers, d, n_blocks = 3, 16, 3
    sites = 2 * n_layers + 1
    s_max = sites if residual == "attnres" else n_blocks + 1
    additive = 2 * n_layers - 1
    expected = {
        "key_norm=none": sites * d,
        "gate=sigmoid": sites * 2 * d,
        "query=input": sites * (d * d + d),
        "query=scalar": sites * s_max,
        "heads=4": sites * (4 * d + d),
        "window=2": sites * 2 * d,
        "combined": sites * 2 * d * d,
        "sources=deltas": additive * 2 * d,
        "sources=cumulative": additive * 2 * d,
        "deltas+combined": additive * 2 * d * d,
    }
    for switch, count in expected.items():
        assert _extra(residual, switch, n_layers, d, n_blocks) == count, switch


@pytest.mark.parametrize("gate,kind", [("softmax", "depth"), ("sigmoid", "dwa")])
def test_probe_reports_one_weight_per_source(gate: str, kind: str) -> None:
    """The diagnostics see each site's weights over its sources (groups averaged): softmax
    weights sum to one and count as depth attention, sigmoid ones as free weights."""
    cfg = tiny(residual="attnres", n_layers=2, attnres_gate=gate, attnres_heads=2)
    model = DeepTransformer(cfg).eval()
    randomize_mixing(model)
    with mixing_probe() as mixing:
        model(torch.randint(0, 32, (2, 12)))
    assert sorted(mixing[kind]) == list(range(5))
    assert [mixing[kind][s].numel() for s in range(5)] == [1, 2, 3, 4, 5]
    if gate == "softmax":
        for w in mixing[kind].values():
            torch.testing.assert_close(w.sum(), torch.tensor(1.0))


@pytest.mark.parametrize("switch", ["query=scalar", "combined"])
def test_dilution_profile_reads_switched_models(switch: str) -> None:
    """The per-layer diagnostics run on the plain path: one weight row per site, entropy only
    where the weights are a softmax, and finite summaries."""
    from trainers.measure.diagnostics import dilution_profile

    model = DeepTransformer(_cfg("block_attnres", switch, n_layers=4, attnres_blocks=4))
    idx = torch.randint(0, 32, (2, 12))
    profile = dilution_profile(model, idx, idx.roll(-1, 1))
    assert profile.depth_weights is not None and profile.depth_weights.shape[0] == 2 * 4 + 1
    sigmoid = SWITCHES[switch].get("attnres_gate") == "sigmoid"
    assert (profile.depth_entropy is None) == sigmoid
    assert all(math.isfinite(v) for v in profile.summaries().values())


@pytest.mark.parametrize("switch", ["query=input", "query=scalar", "heads=4"])
def test_depth_mixing_parameters_are_not_decayed(switch: str) -> None:
    """Decaying queries, projections, logits or key gains toward zero would pull the mixing
    toward uniform: every depth-mixing parameter sits in the group without weight decay."""
    from trainers.training.module import param_groups

    model = DeepTransformer(_cfg("attnres", switch))
    decayed = {id(p) for p in param_groups(model, 0.1)[0]["params"]}
    mixing = [p for n, p in model.named_parameters() if n.startswith("stream.sites.")]
    assert mixing and not any(id(p) in decayed for p in mixing)
