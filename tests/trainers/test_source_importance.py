"""Causal importance of a depth-mixing source (``train.diagnostics_importance``): the loss change
when one source is left out of one site's softmax, the rest renormalized. Checked against an
independent route to the same function (the softmax over the other logits), across both AttnRes
paths, and where the answer follows from the definition."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from trainers.config import ModelConfig
from trainers.measure.diagnostics import dilution_profile
from trainers.model.transformer import DeepTransformer
from trainers.residual.attnres.depth_mixing import DepthMixer, Gate

VOCAB, T = 64, 16
# The loss is about log 64 = 4.2; two float32 forwards that order the same sums differently
# differ by a few ulps of it per step (1e-6 relative), far below this.
ATOL = 2e-5


def _model(seed: int = 0, **fields: Any) -> DeepTransformer:
    """A small AttnRes model whose mixing parameters are drawn away from their zero init, so
    sites weigh their sources unevenly."""
    torch.manual_seed(seed)
    cfg = ModelConfig(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=3, seq_len=T, **fields)
    model = DeepTransformer(cfg)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, DepthMixer):
                for p in module.parameters():
                    p.add_(torch.randn_like(p))
    return model


def _batch(seed: int = 1) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (4, T), generator=g), torch.randint(
        0, VOCAB, (4, T), generator=g
    )


@contextmanager
def _logit_masked(mixer: DepthMixer, site: int, source: int) -> Iterator[None]:
    """The plain path's softmax at ``site`` over every logit but ``source``'s (set to -inf):
    the reference the renormalized weights must equal."""
    at: dict[str, int] = {}
    gate = mixer.gate

    class Masked(Gate):
        def __call__(self, logits: Tensor, keep: Tensor | None) -> Tensor:
            if at.get("site") == site:
                logits = logits.clone()
                logits[..., source] = -math.inf
            return gate(logits, keep)

    hook = mixer.register_forward_pre_hook(lambda m, args: at.update(site=args[0]))
    mixer.gate = Masked()
    try:
        yield
    finally:
        mixer.gate = gate
        hook.remove()


def _reference(model: DeepTransformer, idx: Tensor, targets: Tensor, weights: np.ndarray) -> Any:
    """Importance through the masked logits, site by site (Full AttnRes's sites are rows)."""
    model.stream.fast = False
    mixer = model.stream.sites
    base = F.cross_entropy(model(idx).flatten(0, 1), targets.flatten()).item()
    out = np.full(weights.shape, np.nan)
    for site in range(len(weights)):
        sources = np.flatnonzero(~np.isnan(weights[site]))
        for source in sources if len(sources) > 1 else []:
            with torch.no_grad(), _logit_masked(mixer, site, int(source)):
                loss = F.cross_entropy(model(idx).flatten(0, 1), targets.flatten()).item()
            out[site, source] = loss - base
    return out


@pytest.mark.parametrize(
    "fields",
    [{}, {"attnres_heads": 2}, {"attnres_query": "input"}, {"attnres_key_norm": "none"}],
    ids=["paper", "heads=2", "query=input", "key_norm=none"],
)
def test_importance_is_the_softmax_over_the_other_sources(fields: dict[str, Any]) -> None:
    """Leaving a source out and renormalizing the rest is the softmax with that source's logit
    at -inf: each (site, source) entry equals the loss change through masked logits, and one
    source sites (site 0 reads only the embedding) have none. The drawn raw input query puts
    the logits far apart, where renormalizing weights that underflowed would fail."""
    model = _model(residual="attnres", **fields)
    model.stream.fast = False
    idx, targets = _batch()
    profile = dilution_profile(model, idx, targets, importance=True)
    assert profile.source_importance is not None and profile.depth_weights is not None
    reference = _reference(model, idx, targets, profile.depth_weights)
    np.testing.assert_allclose(profile.source_importance, reference, atol=ATOL, equal_nan=True)
    assert np.isnan(profile.source_importance[0]).all()
    assert np.abs(np.nan_to_num(profile.source_importance)).max() > 100 * ATOL  # not vacuous


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_a_model_on_the_buffered_path_is_measured_on_the_plain_one(residual: str) -> None:
    """The two-phase buffered path has no logits to mask: the measurement takes the plain path
    (the same function) and hands the model back on its own path, with the same importance
    and the same weights as a model built on the plain path."""
    idx, targets = _batch()
    found = []
    for fast in (True, False):
        model = _model(residual=residual, attnres_blocks=2)
        model.stream.fast = fast
        found.append(dilution_profile(model, idx, targets, importance=True))
        assert model.stream.fast == fast
    importance = [p.source_importance for p in found]
    assert importance[0] is not None and np.isfinite(importance[0][1:, :2]).all()
    np.testing.assert_allclose(importance[0], importance[1], atol=ATOL, equal_nan=True)


def test_a_source_outside_the_window_has_no_importance() -> None:
    """Under attnres_window a site gives the sources outside its window weight zero: leaving
    one out renormalizes nothing and changes no logit, so its loss change is exactly 0, while
    a source inside the window matters."""
    model = _model(residual="attnres", attnres_window=2)
    idx, targets = _batch()
    profile = dilution_profile(model, idx, targets, importance=True)
    importance, weights = profile.source_importance, profile.depth_weights
    assert importance is not None and weights is not None
    last = len(weights) - 1  # the output site reads the embedding and the 2 newest of 7
    outside = [i for i in range(1, 5) if weights[last, i] == 0.0]
    assert outside and all(importance[last, i] == 0.0 for i in outside)
    assert abs(importance[last, 6]) > 0


def test_importance_is_measured_only_where_asked_and_only_for_a_softmax() -> None:
    """Off by default; free weights (the sigmoid gate) and a plain residual have no softmax to
    renormalize, so no importance; the measurement leaves the model's output as it was."""
    idx, targets = _batch()
    model = _model(residual="attnres")
    before = model(idx)
    assert dilution_profile(model, idx, targets).source_importance is None
    assert dilution_profile(model, idx, targets, importance=True).source_importance is not None
    torch.testing.assert_close(model(idx), before, rtol=0, atol=0)
    for fields in ({"residual": "attnres", "attnres_gate": "sigmoid"}, {"residual": "standard"}):
        profile = dilution_profile(_model(**fields), idx, targets, importance=True)
        assert profile.source_importance is None


def test_delta_attnres_sites_are_numbered_as_its_weights() -> None:
    """Delta AttnRes routes from site 1 on (site 0 has no query), so a profile's rows start at
    site 1: each row's importance is measured at that row's site, and its sources are the
    ones that row weighs (no entry beyond them)."""
    model = _model(residual="attnres", attnres_sources="deltas")
    idx, targets = _batch()
    profile = dilution_profile(model, idx, targets, importance=True)
    importance, weights = profile.source_importance, profile.depth_weights
    assert importance is not None and weights is not None
    assert (np.isnan(importance) | ~np.isnan(weights)).all()
    assert np.isfinite(importance[~np.isnan(weights)]).all()
